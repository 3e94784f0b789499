"""The ``sim`` backend: an nRF24L01+ attached to the emulated air (``longge.air.server``).

It behaves like pyrf24's ``RF24`` (the host side is ``mirror.ChipMirror``) but its "SPI bus" is
a Unix socket to the air server (``AirLink``): settings go there as register snapshots,
payloads go into the air's TX FIFO, received frames and TX results come back as they happen
on air.
"""

from __future__ import annotations

import json
import os
import select
import socket

from longge.air import wire
from longge.air.wire import DEFAULT_SOCKET
from longge.chip.datasheet import TX_FIFO_DEPTH
from longge.chip.registers import RadioRegisters, registers_to_json
from longge.radio.mirror import _AIR_TIMEOUT_S, ChipMirror


def air_socket_path() -> str:
    return os.environ.get("LONGGE_AIR", DEFAULT_SOCKET)


class AirLink:
    """The emulated air's socket as a chip link (SOCK_SEQPACKET: one message per datagram)."""

    fifo_depth = TX_FIFO_DEPTH
    max_unread = TX_FIFO_DEPTH
    reports_reads = True
    plus = True

    def __init__(self, path: str, name: str) -> None:
        self.path = path
        self.name = name
        self._sock: socket.socket | None = None
        self._poll = select.poll()

    def open(self) -> bool:
        """Attach to the air as a radio called ``name``. False if no air answers."""
        self.close()
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.settimeout(_AIR_TIMEOUT_S)
            sock.connect(self.path)
            sock.send(b"H" + self.name.encode())
            reply = sock.recv(wire.MAX_MESSAGE)
        except OSError:
            return False
        if reply[:1] != b"h":
            sock.close()
            return False
        sock.setblocking(False)
        self._sock = sock
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else -1

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def send(self, msg: bytes) -> bool:
        assert self._sock is not None
        try:
            self._sock.send(msg)
        except BlockingIOError:
            select.select([], [self._sock], [], _AIR_TIMEOUT_S)
            try:
                self._sock.send(msg)
            except OSError:
                return False
        except OSError:
            return False
        return True

    def receive(self, timeout: float) -> tuple[list[bytes], bool]:
        sock = self._sock
        if sock is None:
            return [], True
        if timeout > 0:
            readable, _, _ = select.select([sock], [], [], timeout)
            if not readable:
                return [], False
        # Asked several times a frame, mostly with nothing waiting: a zero-timeout poll says so
        # for a third of what a recv() failing with EAGAIN costs (its exception).
        poll = self._poll.poll
        msgs: list[bytes] = []
        while poll(0):
            try:
                msg = sock.recv(wire.MAX_MESSAGE)
            except BlockingIOError:
                break
            except OSError:
                msg = b""
            if not msg:
                return msgs, True  # the air hung up
            msgs.append(msg)
        return msgs, False

    def registers_message(self, regs: RadioRegisters) -> bytes:
        return b"C" + json.dumps(registers_to_json(regs)).encode()


class SimRadio(ChipMirror):
    """An emulated nRF24L01+ with pyrf24's ``RF24`` interface."""

    def __init__(
        self,
        ce_pin: int = 0,
        csn_pin: int = 0,
        spi_speed: int = 10_000_000,
        *,
        air: str | None = None,
        name: str | None = None,
    ) -> None:
        self.ce_pin = ce_pin
        self.csn_pin = csn_pin
        self.spi_speed = spi_speed
        self.air_path = air or air_socket_path()
        name = name or f"radio-{os.getpid()}-{ce_pin}-{csn_pin}"
        super().__init__(AirLink(self.air_path, name), name)

    def begin(self, ce_pin: int | None = None, csn_pin: int | None = None) -> bool:
        """Attach to the air. False (like a radio that does not answer) if it is not there."""
        if ce_pin is not None and csn_pin is not None:
            self.ce_pin, self.csn_pin = ce_pin, csn_pin
        return super().begin()
