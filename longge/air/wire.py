"""The emulated air's wire: a radio's messages (``longge/chip/messages.py``, the same as the
USB modem's) one per SOCK_SEQPACKET datagram on a Unix socket (a filesystem path, so radios in
other network namespaces reach it), and the control messages anyone may send, each with its
one encoder here:

    ``S``                              ask for counters: the reply is ``s`` json
    ``P`` json                         set loss: {"per", "ack_per", "burst", "tx", "rx"}
    ``W`` json                         add a Wi-Fi-like interferer {"wifi": 1..13, "duty"}
                                       ({"clear": true} removes them); reply ``s``
"""

from __future__ import annotations

import json
import socket
from typing import Any

from longge.chip import AIR_SOCKET

# the radios' own messages, which the air speaks too
from longge.chip.messages import MAX_MESSAGE as MAX_MESSAGE
from longge.chip.messages import TX_RESULT as TX_RESULT
from longge.chip.messages import parse_tx_result as parse_tx_result
from longge.chip.messages import tx_result as tx_result

DEFAULT_SOCKET = AIR_SOCKET


def wifi_centre(wifi_channel: int) -> int:
    """The nRF24 channel at the centre of a 2.4 GHz Wi-Fi channel (1..13: 2412 + 5·(n−1) MHz)."""
    if not 1 <= wifi_channel <= 13:
        raise ValueError(f"Wi-Fi channel {wifi_channel}: 1..13")
    return 12 + 5 * (wifi_channel - 1)


# -- control messages (anyone -> air): one encoder each ---------------------------------------

STATS = b"S"


def loss_message(spec: dict[str, Any]) -> bytes:
    """``P``: set loss ({"per", "ack_per", "burst", "tx", "rx"}, any subset)."""
    return b"P" + json.dumps(spec).encode()


def interferer_message(
    wifi: int, duty: float, model: str = "slots", near: str | None = None
) -> bytes:
    """``W``: add a Wi-Fi-like interferer on Wi-Fi channel ``wifi`` taking ``duty`` of the air,
    its traffic made as ``model`` says (air/interferer.py), near every radio or (``near``) only
    the radios of that node."""
    spec: dict[str, object] = {"wifi": wifi, "duty": duty, "model": model}
    if near is not None:
        spec["near"] = near
    return b"W" + json.dumps(spec).encode()


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
