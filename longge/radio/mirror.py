"""The host side of an nRF24L01+ as pyrf24's ``RF24`` shows it (see ``interface.py`` for the
semantics), kept by the host: the registers it set, what it has put in the TX FIFO and what
became of it, the frames it has been handed. Two backends use it, each with its own way to the
chip: the emulated air's socket (``sim.AirLink``) and a USB modem's serial line
(``serial_modem.SerialLink``). Both speak the same messages (``longge/chip/messages.py``), so the
mirror's FIFO accounting, TX results and MAX_RT are one code.

Like the real driver, a mirror is meant to be used by one thread; run each radio in its own
process (docs/design.md, process model).
"""

from __future__ import annotations

import time
from collections import deque

from longge.chip import messages
from longge.chip.datasheet import MAX_PAYLOAD, TX_FIFO_DEPTH
from longge.chip.registers import RadioRegisters
from longge.radio.interface import ChipLink
from longge.radio.settings import RegisterSettings

#: RF24's own give-up time for a transmission that never completes (hardware failure).
_FAILURE_TIMEOUT_S = 0.095
#: How long a blocking call waits for the chip before it declares a failure.
_AIR_TIMEOUT_S = 2.0
#: write_fast on a full FIFO polls this long before it sleeps: a slot frees within one frame
#: time, and a sleeping host misses the next slot (as a slow host misses it on real hardware).
_SPIN_NS = 1_000_000


class ChipMirror(RegisterSettings):
    """pyrf24's ``RF24`` interface over a ChipLink."""

    #: Its descriptor carries the chip's messages, not IRQ edges (``Rf24Radio.irq_edges``): a
    #: plain attribute, so that the daemon's per-frame ``on_irq`` look never misses.
    irq_edges: int | None = None

    def __init__(self, link: ChipLink, name: str) -> None:
        self.link = link
        self.name = name
        self._regs = RadioRegisters()
        self._listening = False
        self._sent = 0  # T messages sent
        self._flushes = 0  # F messages sent
        self._fifo = 0  # frames in the chip's TX FIFO as last reported
        self._reported_accepted = 0
        self._max_rt = False
        self._tx_ds = False
        self._arc = 0
        self._rx: deque[tuple[int, bytes]] = deque()
        self.failure_detected = 0
        #: Sum of ARC_CNT over every finished payload (extension: pyrf24 shows only the last).
        self.retransmissions = 0
        self.air_errors: list[str] = []
        self._reads_unreported = 0
        #: Messages from the chip's side of a wrong length or pipe: dropped, counted.
        self.bad_messages = 0

    @property
    def fifo_depth(self) -> int:
        return self.link.fifo_depth or TX_FIFO_DEPTH

    # -- connection ---------------------------------------------------------------------------

    def begin(self, ce_pin: int | None = None, csn_pin: int | None = None) -> bool:
        """Reach the chip. False (like a radio that does not answer) if it is not there."""
        self.close()
        if not self.link.open():
            return False
        self._reset_state()
        self._push_registers()
        return True

    def _reset_state(self) -> None:
        """A freshly begun chip: default registers, empty FIFOs, counters from zero."""
        self._regs = RadioRegisters()
        self._listening = False
        self._sent = self._flushes = self._fifo = self._reported_accepted = 0
        self._max_rt = False
        self._rx.clear()

    def close(self) -> None:
        self.link.close()

    def fileno(self) -> int:
        """Readable when the chip has news for this radio (extension; not in pyrf24)."""
        return self.link.fileno()

    def take_edges(self) -> int:
        """No IRQ pin: the descriptor carries the chip's messages, read when they come."""
        return 0

    @property
    def link_errors(self) -> int | None:
        """Malformed messages from the chip's side, dropped (``bad_messages``)."""
        return self.bad_messages

    def verify(self, opts: object, channel: int, pa_level: int) -> None:
        """The settings went to the chip in the messages that set them (the emulated chip
        refuses none the options allow); a modem reads them back (SerialRadio)."""

    @property
    def is_chip_connected(self) -> bool:
        return self.link.connected

    @property
    def is_plus_variant(self) -> bool:
        return self.link.plus

    @property
    def is_valid(self) -> bool:
        return True

    def _send(self, msg: bytes) -> None:
        if not self.link.connected:
            self.failure_detected += 1
            return
        if not self.link.send(msg):
            self._lost_link()

    def _report_reads(self) -> None:
        """Tell the air what the host read: once it has caught up, or every second read."""
        count, self._reads_unreported = self._reads_unreported, 0
        if self.link.reports_reads:
            self._send(b"R" + bytes((min(count, 255),)))

    def _lost_link(self) -> None:
        self.failure_detected += 1
        self.close()

    def _pump(self, timeout: float = 0.0) -> bool:
        """Take in what the chip sent, waiting up to ``timeout`` s for the first message."""
        if not self.link.connected:
            return False
        if self._reads_unreported and (not self._rx or self._reads_unreported >= 2):
            self._report_reads()
        msgs, lost = self.link.receive(timeout)
        for msg in msgs:
            self._on_message(msg)
        if lost:
            self._lost_link()
        return bool(msgs)

    def _request(self, msg: bytes, kind: bytes, timeout: float) -> bytes | None:
        """Send ``msg`` and wait up to ``timeout`` s for the reply of ``kind``; what else
        arrives meanwhile is taken in as usual."""
        self._send(msg)
        deadline = time.monotonic() + timeout
        while self.link.connected:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            msgs, lost = self.link.receive(left)
            reply = None
            for m in msgs:
                if m[:1] == kind and reply is None:
                    reply = m
                else:
                    self._on_message(m)
            if lost:
                self._lost_link()
            if reply is not None:
                return reply
        return None

    def _on_message(self, msg: bytes) -> None:
        kind = msg[:1]
        if kind == b"r":
            # r, the pipe (0..5), the payload (1..32 bytes)
            if 3 <= len(msg) <= 34 and msg[1] <= 5:
                self._rx.append((msg[1], msg[2:]))
            else:
                self.bad_messages += 1
        elif kind == b"t":
            if len(msg) != messages.TX_RESULT.size:
                self.bad_messages += 1
                return
            ok, arc, fifo, accepted, flushes = messages.parse_tx_result(msg)
            if flushes != self._flushes & 0xFFFFFFFF:
                return  # about payloads flushed since
            self._fifo = fifo
            self._reported_accepted = accepted
            self._arc = arc
            self.retransmissions += arc
            if ok:
                self._tx_ds = True
            else:
                self._max_rt = True
        elif kind == b"e":
            # The chip's side refused a request: a bug on our side. Keep it visible.
            self.air_errors.append(msg[1:].decode(errors="replace"))
            del self.air_errors[:-10]

    def _tx_outstanding(self) -> int:
        return self._fifo + (self._sent - self._reported_accepted) % (1 << 32)

    def _tx_full(self) -> bool:
        """No room for another T: the FIFO (and queue) is full, or the far side has not yet
        taken in as many as it can hold unread."""
        unread = (self._sent - self._reported_accepted) % (1 << 32)
        return self._tx_outstanding() >= self.fifo_depth or unread >= self.link.max_unread

    def _push_registers(self) -> None:
        self._send(self.link.registers_message(self._regs))

    def open_rx_pipe(self, pipe_number: int, address: bytes | bytearray) -> None:
        if not 0 <= pipe_number <= 5:
            return
        pipes = dict(self._regs.rx_pipes)
        address = bytes(address)[:5]
        if pipe_number >= 2:
            # Pipes 2..5 hold only their first (least significant) byte; the rest is pipe 1's.
            base = pipes.get(1, b"\xc2" * 5)
            address = address[:1] + base[1:]
        pipes[pipe_number] = address
        self._set(rx_pipes=pipes)

    def close_rx_pipe(self, pipe: int) -> None:
        pipes = dict(self._regs.rx_pipes)
        pipes.pop(pipe, None)
        self._set(rx_pipes=pipes)

    def open_tx_pipe(self, address: bytes | bytearray) -> None:
        self._set(tx_address=bytes(address)[:5])

    # -- modes ---------------------------------------------------------------------------------

    @property
    def listen(self) -> bool:
        return self._listening

    @listen.setter
    def listen(self, on: bool) -> None:
        if on:
            self.start_listening()
        else:
            self.stop_listening()

    def start_listening(self) -> None:
        self._listening = True
        self._send(b"L\x01")

    def stop_listening(self, tx_address: bytes | bytearray | None = None) -> None:
        if tx_address is not None:
            self.open_tx_pipe(tx_address)
        self._listening = False
        self._send(b"L\x00")

    # -- transmitting --------------------------------------------------------------------------

    def _frame(self, buf: bytes | bytearray) -> bytes:
        data = bytes(buf[:MAX_PAYLOAD])
        if not self._regs.dynamic_payloads:
            size = self._regs.payload_size
            data = data[:size].ljust(size, b"\x00")
        return data

    def start_fast_write(
        self, buf: bytes | bytearray, multicast: bool = False, start_tx: bool = True
    ) -> None:
        """pyrf24 loads the payload at once (a full FIFO drops it); the caller has just found
        room. The mirror's path is write_fast's: its link may hold fewer unread payloads than
        the FIFO (a modem), and it waits for that, not for the chip."""
        if not start_tx:
            raise NotImplementedError("start_fast_write(start_tx=False): CE is not modelled")
        self.write_fast(buf, multicast)

    def write_fast(self, buf: bytes | bytearray, multicast: bool = False) -> bool:
        # Room known from the last news stays room (only the air frees slots): ask the air
        # only when the FIFO looked full, not once per frame.
        if self._tx_full():
            self._pump()
        if self._tx_full():
            spin_until = time.monotonic_ns() + _SPIN_NS
            deadline = time.monotonic() + _AIR_TIMEOUT_S
            while self._tx_full():
                if self._max_rt or not self.is_chip_connected:
                    return False
                if time.monotonic_ns() < spin_until:
                    self._pump()  # a slot frees within one frame time: poll, do not sleep
                    continue
                if time.monotonic() > deadline:
                    self.failure_detected += 1
                    return False
                self._pump(0.05)
        self._send(b"T" + (b"\x01" if multicast else b"\x00") + self._frame(buf))
        self._sent += 1
        return True

    def _wait_tx_empty(self, timeout_s: float) -> bool:
        """Wait until the TX FIFO is empty (True) or MAX_RT / timeout (False)."""
        deadline = time.monotonic() + timeout_s
        self._pump()
        while self._tx_outstanding() > 0:
            if self._max_rt or not self.is_chip_connected:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                self.failure_detected += 1
                return False
            self._pump(min(left, 0.05))
        return True

    def write(self, buf: bytes | bytearray, multicast: bool = False) -> bool:
        if not self.write_fast(buf, multicast):
            self.flush_tx()
            return False
        if self._wait_tx_empty(_AIR_TIMEOUT_S):
            return True
        self.flush_tx()
        return False

    def tx_standby(self, timeout: int | None = None, start_tx: bool = True) -> bool:
        if timeout is None:
            ok = self._wait_tx_empty(_AIR_TIMEOUT_S)
            if not ok:
                self.flush_tx()
            return ok
        deadline = time.monotonic() + _FAILURE_TIMEOUT_S + timeout / 1000
        while True:
            if self._wait_tx_empty(max(deadline - time.monotonic(), 0.0)):
                return True
            if time.monotonic() >= deadline or not self.is_chip_connected:
                self.flush_tx()
                return False
            self.reuse_tx()

    def reuse_tx(self) -> None:
        self._max_rt = False
        self._send(b"U")

    def flush_tx(self) -> None:
        self._flushes += 1
        self._send(b"F")
        self._fifo = 0
        self._reported_accepted = self._sent
        self._max_rt = False

    def get_arc(self) -> int:
        return self._arc

    # -- receiving -----------------------------------------------------------------------------

    def available(self) -> bool:
        if self._rx:  # frames already taken in: no need to ask the air (a syscall) again
            return True
        self._pump()
        return bool(self._rx)

    def available_pipe(self) -> tuple[bool, int]:
        if not self._rx:  # (as available(): frames taken in already need no syscall)
            self._pump()
        if self._rx:
            return True, self._rx[0][0]
        return False, 7  # RX_P_NO = 0b111: RX FIFO empty

    def get_dynamic_payload_size(self) -> int:
        self._pump()
        return len(self._rx[0][1]) if self._rx else 0

    def read(self, length: int | None = None) -> bytearray:
        if not self._rx:
            self._pump()
        if not self._rx:
            return bytearray(length or 0)
        _, payload = self._rx.popleft()
        self._reads_unreported += 1
        if not self._rx:
            # The chip's read ends with a transaction whose STATUS tells what the FIFO holds
            # now (get_status_flags): take in what the air sent meanwhile (and say what was read)
            self._pump()
        elif self._reads_unreported >= 2:
            self._report_reads()
        if length is None:
            return bytearray(payload)
        return bytearray(payload[:length].ljust(length, b"\x00"))

    def flush_rx(self) -> None:
        self._pump()
        self._rx.clear()
        self._reads_unreported = 0
        self._send(b"X")

    @property
    def rx_fifo_full(self) -> bool:
        self._pump()
        return len(self._rx) >= 3

    def is_fifo(self, about_tx: bool, check_empty: bool | None = None) -> bool | int:
        """With ``check_empty``: that bool. Without: 0 occupied, 1 empty, 2 full (pyrf24 enum)."""
        self._pump()
        if about_tx:  # full: no room for another payload now (a modem's line may be the limit)
            count = self._tx_outstanding()
            state = 1 if count == 0 else 2 if self._tx_full() else 0
        else:
            count = len(self._rx)
            state = 1 if count == 0 else 2 if count >= 3 else 0
        if check_empty is None:
            return state
        return state == 1 if check_empty else state == 2

    def get_status_flags(self) -> int:
        """STATUS as the mirror last heard the chip (pyrf24: from the last SPI transaction;
        no message to the chip either way): RX_DR, TX_DS, MAX_RT, RX_P_NO (7: RX FIFO empty),
        TX_FULL."""
        pipe = self._rx[0][0] if self._rx else 7
        return (
            (0x40 if self._rx else 0)
            | (0x20 if self._tx_ds else 0)
            | (0x10 if self._max_rt else 0)
            | (pipe & 7) << 1
            | (1 if self._tx_full() else 0)
        )

    def what_happened(self) -> tuple[bool, bool, bool]:
        """(tx_ds, tx_df, rx_dr): a payload was sent, MAX_RT is raised, a payload arrived."""
        self._pump()
        sent, self._tx_ds = self._tx_ds, False
        return sent, self._max_rt, bool(self._rx)

    @property
    def rpd(self) -> bool:
        """Received power detector: a carrier above −64 dBm on the channel while listening
        (asks the chip; False if it does not answer within 0.2 s)."""
        if not self.link.connected:
            return False
        reply = self._request(b"D", b"d", 0.2)
        if reply is None or len(reply) < 2:
            self.failure_detected += 1
            return False
        return bool(reply[1])

    def wait(self, timeout: float) -> bool:
        """Block until the chip has news or ``timeout`` s pass (extension; not in pyrf24)."""
        if self._rx:
            return True
        return self._pump(timeout)
