"""Messages between emulated radios (``radio/sim.py``) and the air server (``server.py``).

One message per SOCK_SEQPACKET datagram on a Unix socket (a filesystem path, so radios in
other network namespaces reach it). The first byte says what it is.

Radio -> air:
    ``H`` name                         attach as a radio called ``name`` (utf-8)
    ``C`` json                         set the chip registers (``RadioRegisters`` fields)
    ``L`` on(1)                        listen (RX mode) or not
    ``T`` no_ack(1) payload            load a payload into the TX FIFO
    ``F``                              flush the TX FIFO (also clears MAX_RT)
    ``U``                              reuse the TX FIFO head after MAX_RT
    ``R`` count(1)                     the host read ``count`` frames from the RX FIFO
    ``X``                              flush the RX FIFO
    ``D``                              read the received power detector: reply ``d``
Anyone -> air (control; needs no ``H``):
    ``S``                              ask for counters: the reply is ``s`` json
    ``P`` json                         set loss: {"per", "ack_per", "burst", "tx", "rx"}
    ``W`` json                         add a Wi-Fi-like interferer {"wifi": 1..13, "duty"}
                                       ({"clear": true} removes them); reply ``s``
Air -> radio:
    ``h`` id(2)                        attached
    ``t`` ok(1) arc(1) fifo(1) accepted(4) flushes(4)
                                       a TX FIFO head finished: acknowledged (or no-ack sent),
                                       or MAX_RT; ``fifo`` frames remain after ``accepted``
                                       ``T`` messages and ``flushes`` ``F`` messages
    ``r`` pipe(1) payload              a received frame
    ``s`` json                         counters
    ``d`` rpd(1)                       the received power detector (after ``D``)
    ``e`` text                         the request was refused (text says why)
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

from longge.chip import AIR_SOCKET

DEFAULT_SOCKET = AIR_SOCKET

TX_RESULT = struct.Struct("!cBBBII")


def wifi_centre(wifi_channel: int) -> int:
    """The nRF24 channel at the centre of a 2.4 GHz Wi-Fi channel (1..13: 2412 + 5·(n−1) MHz)."""
    if not 1 <= wifi_channel <= 13:
        raise ValueError(f"Wi-Fi channel {wifi_channel}: 1..13")
    return 12 + 5 * (wifi_channel - 1)


MAX_MESSAGE = 4096


def tx_result(ok: bool, arc: int, fifo: int, accepted: int, flushes: int) -> bytes:
    return TX_RESULT.pack(b"t", int(ok), arc, fifo, accepted & 0xFFFFFFFF, flushes & 0xFFFFFFFF)


def parse_tx_result(msg: bytes) -> tuple[bool, int, int, int, int]:
    _, ok, arc, fifo, accepted, flushes = TX_RESULT.unpack(msg)
    return bool(ok), arc, fifo, accepted, flushes


# -- control messages (anyone -> air): one encoder each ---------------------------------------

STATS = b"S"


def loss_message(spec: dict[str, Any]) -> bytes:
    """``P``: set loss ({"per", "ack_per", "burst", "tx", "rx"}, any subset)."""
    return b"P" + json.dumps(spec).encode()


def interferer_message(wifi: int, duty: float) -> bytes:
    """``W``: add a Wi-Fi-like interferer on Wi-Fi channel ``wifi`` taking ``duty`` of the air."""
    return b"W" + json.dumps({"wifi": wifi, "duty": duty}).encode()


CLEAR_INTERFERERS = b"W" + json.dumps({"clear": True}).encode()


def query(path: str, msg: bytes = STATS, timeout: float = 2.0) -> dict[str, Any]:
    """Ask a running air server for its counters (or send a control message)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.send(msg)
        reply = sock.recv(1 << 20)
    if reply[:1] != b"s":
        raise ValueError(reply[1:].decode(errors="replace"))
    result: dict[str, Any] = json.loads(reply[1:])
    return result
