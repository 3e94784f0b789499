"""The ``serial`` backend: an nRF24L01+ on a microcontroller board plugged in over USB serial
(``firmware/``), driven with pyserial.

The modem speaks the emulated radios' own messages (``longge/chip/messages.py``: ``T`` payload,
``F`` flush, ``t`` TX result, ``r`` received frame, …), each framed with COBS and a CRC-16
(CCITT, init 0xFFFF) on the serial line; only the chip settings travel as a fixed record
instead of JSON (29 bytes; 33 with pipes 2..5 open, firmware 1.2 on). So this backend is the
emulated radio's host side (``mirror.ChipMirror``: FIFO accounting, TX results, MAX_RT) over
a serial line (``SerialLink``) instead of the air socket, and the daemon cannot tell the three
backends apart.

``begin()`` opens the port, asks for the firmware version and whether a chip answers on the
modem's SPI bus, and says precisely what is wrong. A modem that disappears (unplugged) counts as
a failure; the daemon then begins it again every second until it is back.
"""

from __future__ import annotations

import binascii
import contextlib
import glob
import os
import termios
import time
from typing import Any

from cobs import cobs

from longge.chip.registers import RadioRegisters
from longge.errors import HardwareError
from longge.radio.mirror import ChipMirror

FIRMWARE_MAJOR = 1
#: The most payloads a modem may say it holds (chip FIFO + its queue; firmware 1.x: 3 + 16).
MAX_DEPTH = 64
DEFAULT_BAUD = 2_000_000
RATE_CODE = {"1M": 0, "2M": 1, "250k": 2}
CONFIG_LEN = 29
#: The record with pipes 2..5's own first bytes (a base serving several mobiles): firmware 1.2
CONFIG_LEN_PIPES = 33
PIPES_FIRMWARE = (1, 2)


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF): the firmware's proto_crc16."""
    return binascii.crc_hqx(data, 0xFFFF)


def frame(msg: bytes) -> bytes:
    """One message on the wire: COBS(message || CRC-16 big endian) || 0x00."""
    return bytes(cobs.encode(msg + crc16(msg).to_bytes(2, "big"))) + b"\x00"


def unframe(raw: bytes) -> bytes | None:
    """The message in one delimited frame (without the 0x00), or None if it is damaged."""
    try:
        data = cobs.decode(raw)
    except cobs.DecodeError:
        return None
    if len(data) < 3 or crc16(data[:-2]) != int.from_bytes(data[-2:], "big"):
        return None
    return bytes(data[:-2])


def find_modems() -> list[str]:
    """USB serial devices that may be modems, by their stable names."""
    return sorted(glob.glob("/dev/serial/by-id/*")) or sorted(
        glob.glob("/dev/ttyUSB*") + glob.glob("/dev/ttyACM*")
    )


class SerialLink:
    """A LongGe USB modem's serial line as a chip link (see the module doc)."""

    reports_reads = False  # the modem hands frames on at once: nothing to report

    def __init__(self, port: str, baud: int, name: str, index: int = 0) -> None:
        self.port = port
        self.baud = baud
        self.name = name
        self.index = index  # which modem "auto" picks: 0 for TX, 1 for RX
        self._serial: Any = None
        self._inbuf = bytearray()
        self.firmware: tuple[int, int] | None = None
        self.plus = True
        self.fifo_depth = 3  # the chip's FIFO, and (once it answered) the modem's queue
        self.max_unread = 3  # T messages its serial ring holds (firmware 1.0: 128 bytes)
        self.bad_frames = 0

    def _resolve(self) -> str:
        if self.port != "auto":
            return self.port
        found = find_modems()
        if len(found) <= self.index:
            raise HardwareError(
                f"{self.name}: port = auto, but {len(found)} USB serial device(s) found "
                f"({', '.join(found) or 'none'}); a node needs two modems (TX and RX). Plugged "
                "in? Or set [serial] tx_port / rx_port"
            )
        return found[self.index]

    def open(self) -> bool:
        """Open the port and ask the modem who it is; raises HardwareError saying what is
        wrong (no device, not a LongGe modem, wrong firmware, no chip on its SPI bus)."""
        import serial

        self.close()
        port = self._resolve()
        try:
            self._serial = serial.Serial(port, self.baud, timeout=0, write_timeout=1.0)
            # VMIN 1 on the non-blocking descriptor: "no data" is EAGAIN, and an empty read
            # means the device hung up (pyserial's VMIN 0 makes both read as b"").
            attrs = termios.tcgetattr(self._serial.fileno())
            attrs[6][termios.VMIN] = 1
            termios.tcsetattr(self._serial.fileno(), termios.TCSANOW, attrs)
        except (serial.SerialException, OSError, termios.error) as exc:
            self.close()
            raise HardwareError(
                f"{self.name}: cannot open the modem at {port}: {exc}. Plugged in? "
                "ls /dev/serial/by-id; is another program using it?"
            ) from exc
        self._inbuf.clear()
        self._serial.reset_input_buffer()
        self.send(b"V")
        reply = self._version_reply(1.5)
        if reply is None:
            self.close()
            raise HardwareError(
                f"{self.name}: {port} does not answer as a LongGe modem (flashed with "
                "firmware/? right baud rate? see docs/details.md 'USB radio modem')"
            )
        if len(reply) < 6 or reply[5] > MAX_DEPTH:
            self.close()
            raise HardwareError(
                f"{self.name}: {port} answers the version request with {reply!r}: not a "
                "LongGe modem (firmware/ sends v, major, minor, chip, plus, queue depth)"
            )
        major, minor, chip_ok, plus, depth = reply[1:6]
        self.firmware = (major, minor)
        self.plus = bool(plus)
        self.fifo_depth = max(3, depth)  # the chip's FIFO and the modem's queue in front of it
        # 1.1 reads the line into 256 bytes: six 38-byte T messages (docs/modem.md)
        self.max_unread = 6 if (major, minor) >= (1, 1) else 3
        if major != FIRMWARE_MAJOR:
            self.close()
            raise HardwareError(
                f"{self.name}: firmware {major}.{minor} at {port}; this LongGe speaks "
                f"{FIRMWARE_MAJOR}.x: flash firmware/ again (make -C firmware flash)"
            )
        if not chip_ok:
            self.close()
            raise HardwareError(
                f"{self.name}: the modem at {port} runs, but no nRF24L01+ answers on its SPI bus. "
                "Check: VCC 3.3 V with a 10 µF capacitor, CE on D9, CSN on D10, SCK D13, "
                "MOSI D11, MISO D12"
            )
        return True

    def _version_reply(self, timeout: float) -> bytes | None:
        """The modem's ``v`` reply; anything else before it is from before: dropped."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msgs, lost = self.receive(0.005)
            if lost:
                return None
            for msg in msgs:
                if msg[:1] == b"v":
                    return msg
        return None

    def close(self) -> None:
        if self._serial is not None:
            with contextlib.suppress(OSError):
                self._serial.close()
            self._serial = None

    def fileno(self) -> int:
        return int(self._serial.fileno()) if self._serial is not None else -1

    @property
    def connected(self) -> bool:
        return self._serial is not None

    # The hot path reads and writes the port's descriptor itself: pyserial opened and set it up
    # (raw, baud rate, non-blocking), but its read() adds a select() and in_waiting an ioctl()
    # per call, and its write() a select() after every write; at ~2000 frames/s that was a
    # fifth of the TX process's time.

    def write_raw(self, data: bytes) -> bool:
        """Bytes onto the line as they are (the framing is the caller's). False: gone."""
        import serial

        try:
            n = os.write(self._serial.fileno(), data)
            if n < len(data):
                self._serial.write(data[n:])  # the line is backed up: let pyserial wait
        except BlockingIOError:
            try:
                self._serial.write(data)
            except (serial.SerialException, OSError):
                return False
        except (serial.SerialException, OSError):
            return False
        return True

    def send(self, msg: bytes) -> bool:
        if msg[:1] == b"H":
            return True  # attaching is the version handshake here
        return self.write_raw(frame(msg))

    def _read_frames(self) -> tuple[list[bytes], bool]:
        if self._serial is None:
            return [], True
        try:
            data = os.read(self._serial.fileno(), 4096)
        except BlockingIOError:
            return [], False
        except OSError:
            return [], True
        if not data:
            return [], True  # end of file: the device went away
        self._inbuf += data
        if len(self._inbuf) > 4096 and b"\x00" not in self._inbuf:
            self._inbuf.clear()  # noise without delimiters: drop it, resync on the next 0x00
            self.bad_frames += 1
        out = []
        while b"\x00" in self._inbuf:
            raw, _, rest = bytes(self._inbuf).partition(b"\x00")
            self._inbuf = bytearray(rest)
            if not raw:
                continue
            msg = unframe(raw)
            if msg is None:
                self.bad_frames += 1
            else:
                out.append(msg)
        return out, False

    def receive(self, timeout: float) -> tuple[list[bytes], bool]:
        import select

        msgs, lost = self._read_frames()
        if msgs or lost or timeout <= 0 or self._serial is None:
            return msgs, lost
        readable, _, _ = select.select([self._serial.fileno()], [], [], timeout)
        return self._read_frames() if readable else ([], False)

    def registers_message(self, regs: RadioRegisters) -> bytes:
        record = config_record(regs)
        if len(record) == CONFIG_LEN_PIPES and (self.firmware or (0, 0)) < PIPES_FIRMWARE:
            major, minor = self.firmware or (0, 0)
            raise HardwareError(
                f"{self.name}: pipes 2..5 need modem firmware 1.2; {major}.{minor} here: flash "
                "firmware/ again (make -C firmware flash)"
            )
        return b"C" + record


class SerialRadio(ChipMirror):
    """A radio behind a LongGe USB modem (see the module doc)."""

    def __init__(
        self, port: str, baud: int = DEFAULT_BAUD, *, name: str | None = None, index: int = 0
    ) -> None:
        name = name or f"serial-{port}"
        self.serial = SerialLink(port, baud, name, index)
        super().__init__(self.serial, name)

    @property
    def port(self) -> str:
        return self.serial.port

    @property
    def firmware(self) -> tuple[int, int] | None:
        return self.serial.firmware

    @property
    def bad_frames(self) -> int:
        return self.serial.bad_frames

    @property
    def link_errors(self) -> int | None:
        """Malformed messages: the chip's (``bad_messages``) and the serial line's frames."""
        return self.bad_messages + self.serial.bad_frames

    def verify(self, opts: object, channel: int, pa_level: int) -> None:
        """After the daemon's settings: did the modem take them? (It answers a settings record
        it refuses with an error; e.g. 250 kbit/s on a chip without the "+".)"""
        self.air_errors.clear()
        self._send(self.link.registers_message(self._regs))
        # The modem answers in order: a record it takes with ``c``, one it refuses with an
        # error and nothing else. A request that is always answered (its counters) comes
        # back after the record's answer, which was taken in meanwhile. (Waiting for a ``c``
        # took an earlier record's, late, and a 20-ms wait for the error missed it on a busy
        # machine: a chip without the "+" passed at 250 kbit/s.)
        reply = self._request(b"S", b"s", 0.5)
        refused = [e for e in self.air_errors if "config" in e or "250k" in e]
        if reply is None or refused:
            why = refused[-1].lstrip("\x00\x01\x02\x03\x04\x05") if refused else "no answer"
            raise HardwareError(
                f"{self.name}: the modem at {self.port} refused the settings: {why}"
            )

    def stats(self) -> dict[str, int] | None:
        """The modem's own counters (parser and radio), or None if it does not answer."""
        reply = self._request(b"S", b"s", 0.5)
        if reply is None or len(reply) < 37:
            return None
        names = (
            "frames_ok",
            "bad_crc",
            "bad_cobs",
            "malformed",
            "unknown",
            "bad_args",
            "tx_ok",
            "tx_max_rt",
            "rx_frames",
        )
        return {n: int.from_bytes(reply[1 + 4 * i : 5 + 4 * i], "big") for i, n in enumerate(names)}


def config_record(regs: RadioRegisters) -> bytes:
    """The chip settings as the firmware's record (firmware/src/radio.c): 29 bytes, and 4 more
    (pipes 2..5's own first bytes: datasheet §7.6) when one of those pipes is open."""
    aw = regs.address_width
    pipes = dict(regs.rx_pipes)
    mask = sum(1 << p for p in pipes)
    auto = sum(1 << i for i, on in enumerate(regs.auto_ack) if on)
    rec = bytes(
        (
            regs.channel,
            RATE_CODE[regs.rate],
            regs.pa_level,
            aw,
            regs.crc_len,
            regs.ard_step,
            regs.arc,
            auto,
            int(regs.dynamic_payloads),
            int(regs.dynamic_ack),
            regs.payload_size,
            int(regs.powered),
        )
    )
    rec += regs.tx_address[:5].ljust(5, b"\x00") + bytes((mask,))
    for p in (0, 1):
        rec += pipes.get(p, b"")[:aw].ljust(5, b"\x00")
    rec += b"\x00"
    more = any(p >= 2 for p in pipes)
    if more:  # (their other bytes are pipe 1's: mirror.py's open_rx_pipe keeps them so)
        rec += bytes(pipes[p][0] if p in pipes else 0xC1 + p for p in range(2, 6))
    assert len(rec) == (CONFIG_LEN_PIPES if more else CONFIG_LEN)
    return rec
