"""The radio interface: the part of pyrf24's ``RF24`` that LongGe uses, with pyrf24's names.

Every backend (``sim``, ``rf24``, ``serial``) offers exactly these names with pyrf24 0.6.0's
signatures and semantics, so the daemon cannot tell them apart.
``tests/test_radio_conformance.py`` checks the emulated radio against the installed pyrf24.

Semantics worth knowing (pyrf24 / RF24 C++):

- ``write(buf, multicast=False)`` blocks until the payload is acknowledged (True), or until
  MAX_RT, when it flushes the TX FIFO and returns False. ``multicast`` sets NO_ACK and needs
  ``enable_dynamic_ack()`` first; without it the payload asks for an ACK as usual.
- ``write_fast(buf, multicast=False)`` loads the TX FIFO, blocking while it is full; returns
  False (payload not loaded) if MAX_RT is raised while it waits. The failed payload stays at
  the FIFO head until ``flush_tx()`` or ``reuse_tx()``.
- ``start_fast_write(buf)`` loads the TX FIFO without asking the chip first (one SPI
  transaction where write_fast makes two); into a full FIFO the chip drops the payload, so
  the caller must know there is room (``is_fifo``).
- ``tx_standby()`` blocks until the TX FIFO is empty; on MAX_RT it flushes and returns False.
  ``tx_standby(timeout, start_tx=True)`` retries failed payloads for up to 95 + timeout ms.
- ``set_retries(delay, count)``: ARD = 250·(delay+1) µs, ``count`` retransmissions (0..15).
- ``stop_listening(tx_address)`` enters TX mode and sets the TX address.
- ``read(length)`` pops one payload from the RX FIFO; its last SPI transaction (clearing RX_DR)
  brings the STATUS byte as it is after the pop.
- ``get_status_flags()`` is that STATUS byte from the last transaction, without asking the
  chip: RX_P_NO (bits 3..1) is 7 when the RX FIFO is empty.

Beyond pyrf24, a backend the daemon drives is a ``LinkRadio``: its descriptor to sleep on,
its IRQ pin's edges, its counters, a read-back of the settings and a close, declared below and
offered by every backend (``tests/test_radio_conformance.py`` holds them to it), so the daemon
asks for no name a backend might lack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from longge.chip.registers import RadioRegisters

#: The RF24 names a LongGe radio backend must provide (methods and properties).
RADIO_METHODS = (
    "begin",
    "set_retries",
    "set_auto_ack",
    "set_pa_level",
    "open_rx_pipe",
    "close_rx_pipe",
    "open_tx_pipe",
    "stop_listening",
    "start_listening",
    "enable_dynamic_ack",
    "write",
    "write_fast",
    "start_fast_write",
    "tx_standby",
    "reuse_tx",
    "available",
    "available_pipe",
    "read",
    "get_dynamic_payload_size",
    "get_arc",
    "flush_tx",
    "flush_rx",
    "is_fifo",
    "what_happened",
    "get_status_flags",
)
RADIO_PROPERTIES = (
    "channel",
    "data_rate",
    "pa_level",
    "payload_size",
    "dynamic_payloads",
    "address_width",
    "crc_length",
    "listen",
    "power",
    "is_chip_connected",
    "is_plus_variant",
    "failure_detected",
    "rx_fifo_full",
    "rpd",
)


@runtime_checkable
class Radio(Protocol):
    channel: int
    data_rate: int
    pa_level: int
    payload_size: int
    dynamic_payloads: bool
    address_width: int
    crc_length: int
    listen: bool
    failure_detected: int

    @property
    def rx_fifo_full(self) -> bool: ...
    @property
    def rpd(self) -> bool: ...
    @property
    def is_chip_connected(self) -> bool: ...
    def begin(self) -> bool: ...
    def set_retries(self, delay: int, count: int) -> None: ...
    def set_auto_ack(self, *args: int | bool) -> None: ...
    def open_rx_pipe(self, pipe_number: int, address: bytes | bytearray) -> None: ...
    def stop_listening(self, tx_address: bytes | bytearray | None = None) -> None: ...
    def start_listening(self) -> None: ...
    def enable_dynamic_ack(self) -> None: ...
    def write(self, buf: bytes | bytearray, multicast: bool = False) -> bool: ...
    def write_fast(self, buf: bytes | bytearray, multicast: bool = False) -> bool: ...
    def start_fast_write(
        self, buf: bytes | bytearray, multicast: bool = False, start_tx: bool = True
    ) -> None: ...
    def tx_standby(self, timeout: int = ..., start_tx: bool = True) -> bool: ...
    def reuse_tx(self) -> None: ...
    def available(self) -> bool: ...
    def available_pipe(self) -> tuple[bool, int]: ...
    def read(self, length: int | None = None) -> bytearray: ...
    def get_arc(self) -> int: ...
    def flush_tx(self) -> None: ...
    def flush_rx(self) -> None: ...
    def is_fifo(self, about_tx: bool, check_empty: bool | None = None) -> bool | int: ...
    def what_happened(self) -> tuple[bool, bool, bool]: ...
    def get_status_flags(self) -> int: ...
    def set_pa_level(self, level: int, lna_enable: bool = True) -> None: ...


@runtime_checkable
class LinkRadio(Radio, Protocol):
    """A radio the daemon drives: RF24's names and these capabilities."""

    #: Sum of ARC_CNT over every finished payload (pyrf24 shows only the last one's).
    retransmissions: int

    @property
    def fifo_depth(self) -> int:
        """Payloads that may be on their way at once: the chip's TX FIFO (3), and a modem's
        queue in front of it."""
        ...

    def fileno(self) -> int:
        """A descriptor readable when the radio has news (received frame, TX result, IRQ
        edge), or -1: none (pyrf24 without its IRQ pin: the daemon polls)."""
        ...

    @property
    def irq_edges(self) -> int | None:
        """Falling edges of the IRQ pin the descriptor carries; None when it carries the
        chip's messages instead (or there is none): then no edges to take."""
        ...

    def take_edges(self) -> int:
        """Take the IRQ pin's waiting edges (their count; 0 without a pin)."""
        ...

    @property
    def link_errors(self) -> int | None:
        """Messages from the chip's side (the air, a modem's line) that were malformed and
        dropped; None where there is no such link (SPI)."""
        ...

    def verify(self, opts: Any, channel: int, pa_level: int) -> None:
        """Read back what the daemon set; HardwareError if something did not stick."""
        ...

    def close(self) -> None:
        """Let the radio go: its descriptors, SPI device and GPIO lines."""
        ...


class ChipLink(Protocol):
    """How a mirror reaches its chip: one message of the air's protocol at a time."""

    #: Payloads the host may have outstanding before the TX FIFO counts as full (the chip's 3;
    #: a USB modem adds its own queue in front of the chip).
    fifo_depth: int
    #: T messages the host may have sent that its far side has not yet taken in (reported by
    #: ``t``'s accepted count): a modem reads its serial line into a ring of a few messages
    #: and loses what overflows it. No fewer than fifo_depth where nothing is lost.
    max_unread: int
    #: The chip's far side wants to hear what the host read (``R``): the air does, to hold
    #: its clock for a host that has not read; a modem hands frames on at once.
    reports_reads: bool

    def open(self) -> bool: ...
    def close(self) -> None: ...
    def fileno(self) -> int: ...
    @property
    def connected(self) -> bool: ...
    @property
    def plus(self) -> bool: ...
    def send(self, msg: bytes) -> bool:
        """Send one message; False: the link is gone."""
        ...

    def receive(self, timeout: float) -> tuple[list[bytes], bool]:
        """The messages that arrived (waiting up to ``timeout`` s for the first), and whether
        the link was lost."""
        ...

    def registers_message(self, regs: RadioRegisters) -> bytes:
        """The ``C`` message that sets these registers on the chip."""
        ...
