"""The ``rf24`` backend: a real nRF24L01+ on a Raspberry Pi's SPI bus, through pyrf24.

pyrf24's ``RF24`` already has the radio interface (``interface.py``: LongGe uses pyrf24's
names), so this backend is ``RF24`` plus what a daemon needs from real hardware:

- ``begin()`` says precisely what is wrong when a radio does not answer: which radio, which
  CE GPIO and spidev, what to check (SPI enabled, 3.3 V with a 10 µF capacitor, wiring);
- ``verify()`` reads every setting back after it was written (a radio on a marginal supply or
  a loose wire "accepts" writes and keeps its old values) and refuses 250 kbit/s on a chip that
  is not the "+" variant;
- ``retransmissions`` sums ARC_CNT over finished payloads (pyrf24 shows only the last one),
  ``close()`` powers the radio down;
- with its IRQ pin wired (``irq_pin``), ``fileno()`` is a descriptor readable after the pin
  fell (``irq.py``): the radio process sleeps on it instead of polling (-1 without one).

Every other name goes straight to pyrf24. The daemon's code path is the one it uses with the
``sim`` backend: the backend choice is configuration only. ``driver = "sim"`` (config
``[rf24]``) runs this backend's code over emulated chips, so it is tested here without radios.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from longge.chip.datasheet import TX_FIFO_DEPTH
from longge.errors import HardwareError
from longge.radio.constants import RATE_BY_NAME, rf24_crclength_e
from longge.radio.irq import IrqLine
from longge.radio.options import RadioOptions

#: What begin() failing usually means, in the order worth checking.
WIRING_HINTS = (
    "SPI enabled (sudo raspi-config nonint do_spi 0, then reboot; ls /dev/spidev*)",
    "VCC on 3.3 V (never 5 V) with a 10 µF capacitor across VCC and GND at the module",
    "MOSI GPIO10, MISO GPIO9, SCK GPIO11, CSN to the chip select of this spidev, CE to the GPIO",
    "the radio not shared with another running program (systemctl stop longge)",
)


def spidev(csn_pin: int) -> str:
    """The device file pyrf24 opens for a CSN number (Linux SPIDEV driver)."""
    bus, cs = (1, csn_pin - 10) if csn_pin >= 10 else (0, csn_pin)
    return f"/dev/spidev{bus}.{cs}"


@functools.cache
def _rf24_names() -> frozenset[str]:
    """The public names of pyrf24's RF24 class."""
    from pyrf24 import RF24

    return frozenset(n for n in dir(RF24) if not n.startswith("_"))


#: What a node without pyrf24 is told (the daemon's status, doctor).
NO_PYRF24 = "pyrf24 is not installed in this Python: ./run.sh help installs it"


def _pyrf24_driver() -> Callable[[int, int, int], Any]:
    try:
        from pyrf24 import RF24
    except ImportError as exc:
        raise HardwareError(f"{NO_PYRF24} ({exc})") from exc
    return RF24


def _pyrf24_enums() -> dict[str, Any]:
    """The RF24 properties pyrf24 types as its own enums (it refuses a plain int there: found
    when the real pyrf24 first ran, on emulated chips), by property name."""
    try:
        import pyrf24
    except ImportError as exc:
        raise HardwareError(f"{NO_PYRF24} ({exc})") from exc
    return {
        "data_rate": pyrf24.rf24_datarate_e,
        "crc_length": pyrf24.rf24_crclength_e,
        "pa_level": pyrf24.rf24_pa_dbm_e,
    }


class Rf24Radio:
    """One radio: pyrf24's ``RF24`` with checks (see the module doc)."""

    _own = frozenset(
        {
            "_chip",
            "_enums",
            "_irq",
            "name",
            "ce_pin",
            "csn_pin",
            "irq_pin",
            "spi_speed",
            "retransmissions",
            "_acked",
            "_max_rt_counted",
        }
    )

    def __init__(
        self,
        ce_pin: int,
        csn_pin: int,
        spi_speed: int = 10_000_000,
        *,
        name: str = "radio",
        driver: Callable[[int, int, int], Any] | None = None,
        irq_pin: int = -1,
    ) -> None:
        self.name = name
        self.irq_pin = irq_pin
        self._irq: IrqLine | None = None
        self.ce_pin = ce_pin
        self.csn_pin = csn_pin
        self.spi_speed = spi_speed
        self.retransmissions = 0
        self._acked = True  # auto-ack on pipe 0 (the chip's default): a payload has an ARC
        self._max_rt_counted = False  # the MAX_RT raised now was counted
        self._enums: dict[str, Any] = {} if driver else _pyrf24_enums()
        self._chip = (driver or _pyrf24_driver())(ce_pin, csn_pin, spi_speed)

    # Every RF24 name not defined here is the chip's own (reads and writes): pyrf24's names
    # only, so that what an emulated chip offers beyond them (a descriptor to sleep on) is not
    # used here: the daemon takes the polled path it takes with real pyrf24.
    def __getattr__(self, name: str) -> Any:
        if name not in _rf24_names():
            raise AttributeError(f"pyrf24's RF24 has no {name!r}")
        value = getattr(self._chip, name)
        if callable(value):
            # a method (not a property's value): found here once, then as fast as the chip's
            # own (this lookup cost the radio process more than some SPI calls do)
            object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._own:
            object.__setattr__(self, name, value)
        elif name in self._enums:
            setattr(self._chip, name, self._enums[name](int(value)))
        else:
            setattr(self._chip, name, value)

    @property
    def where(self) -> str:
        return f"{self.name} radio (CE GPIO{self.ce_pin}, CSN {spidev(self.csn_pin)})"

    def begin(self) -> bool:
        try:
            ok = bool(self._chip.begin())
        except RuntimeError as exc:  # pyrf24: the SPI device or GPIO cannot be opened
            raise HardwareError(
                f"{self.where}: {exc}. Check: {WIRING_HINTS[0]}; {WIRING_HINTS[3]}"
            ) from exc
        if not ok or not self._chip.is_chip_connected:
            raise HardwareError(
                f"{self.where} does not answer on SPI. Check: " + "; ".join(WIRING_HINTS[1:])
            )
        if self.irq_pin >= 0 and self._irq is None:
            self._irq = IrqLine(self.irq_pin, consumer=f"longge {self.name}")
        return True

    @property
    def fifo_depth(self) -> int:
        return TX_FIFO_DEPTH  # (the chip's own)

    def fileno(self) -> int:
        """The IRQ line's descriptor, readable while edges not yet taken (``take_edges``) wait
        on it; -1 when the pin is not wired."""
        return -1 if self._irq is None else self._irq.fileno()

    def take_edges(self) -> int:
        """Take the edges waiting on the IRQ descriptor (their count; 0 without a pin). A
        process takes them before it looks at the chip: an edge that comes after the look
        stays, and wakes it."""
        return 0 if self._irq is None else self._irq.clear()

    @property
    def irq_edges(self) -> int | None:
        """Falling edges seen on the IRQ pin (None: not wired)."""
        return None if self._irq is None else self._irq.edges

    @property
    def link_errors(self) -> int | None:
        """None: SPI has no messages to be malformed (a loose wire shows otherwise: doctor)."""
        return None

    def verify(self, opts: RadioOptions, channel: int, pa_level: int) -> None:
        """Every setting the daemon wrote reads back the same, else HardwareError."""
        # RF24 tells a chip without the "+" by its FEATURE register around ACTIVATE, which a
        # freshly powered one does not show: 250 kbit/s not sticking says it too.
        if opts.rate == "250k" and (
            not self._chip.is_plus_variant or int(self._chip.data_rate) != int(RATE_BY_NAME["250k"])
        ):
            raise HardwareError(
                f"{self.where} is not an nRF24L01+ (no 250 kbit/s): use rate 1M or 2M, or a "
                "'+' module"
            )
        want = {
            "channel": channel,
            "data_rate": int(RATE_BY_NAME[opts.rate]),
            "address_width": opts.address_width,
            "crc_length": int(rf24_crclength_e(opts.crc)),
            "dynamic_payloads": True,
            "pa_level": pa_level,
        }
        wrong = {
            k: (v, int(getattr(self._chip, k)))
            for k, v in want.items()
            if int(getattr(self._chip, k)) != int(v)
        }
        if wrong:
            detail = ", ".join(f"{k} wrote {w} read {r}" for k, (w, r) in wrong.items())
            raise HardwareError(
                f"{self.where}: settings do not stick ({detail}). Check the supply (3.3 V, "
                "10 µF capacitor) and the SPI wiring; lower spi_speed in [rf24]"
            )

    def set_auto_ack(self, *args: int | bool) -> None:
        """pyrf24's two forms: (enable) for every pipe, (pipe_number, enable) for one."""
        if len(args) == 2:
            self._chip.set_auto_ack(int(args[0]), bool(args[1]))
            if int(args[0]) == 0:
                self._acked = bool(args[1])
        else:
            self._chip.set_auto_ack(bool(args[0]))
            self._acked = bool(args[0])

    def what_happened(self) -> tuple[bool, bool, bool]:
        flags: tuple[bool, bool, bool] = tuple(self._chip.what_happened())
        # A MAX_RT is one payload's however often it is read: pyrf24 clears the flag as it
        # reads it, a chip that keeps it raised until the FIFO is flushed shows it again.
        max_rt = flags[1] and not self._max_rt_counted
        self._max_rt_counted = flags[1]
        if (flags[0] or max_rt) and self._acked:
            # a payload finished (sent or MAX_RT): count its retries (without auto-ack there
            # are none: the SPI transaction is saved, once a frame in stream mode)
            self.retransmissions += int(self._chip.get_arc())
        return flags

    def flush_tx(self) -> None:
        self._chip.flush_tx()
        self._max_rt_counted = False  # (the next MAX_RT is the next payload's)

    def reuse_tx(self) -> None:
        self._chip.reuse_tx()
        self._max_rt_counted = False  # (the payload is tried again: its next MAX_RT counts)

    def close(self) -> None:
        if self._irq is not None:
            self._irq.close()
            self._irq = None
        with contextlib.suppress(RuntimeError, OSError):  # a chip that is gone stays down
            self._chip.power = False
