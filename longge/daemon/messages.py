"""What a node's two radio processes tell each other over their pair (a SOCK_SEQPACKET
socketpair the supervisor makes: one message per datagram), typed: each kind a class, one
``encode`` and one ``decode`` here, and no length or tag checked anywhere else.

RX process -> TX process:

    AckToSend    o|u  peer  frame   stream mode: our receiver's ACK (or RESYNC) to send;
                                    ``urgent`` (u): it may end a burst to another mobile
    PeerAck      i    peer  frame   stream mode: the peer's ACK (or RESYNC) for our sender
    GrantHeard   g    peer  grant (3) heard-at (8)   our base granted us the uplink
    AnswerAsked  a    peer  at (8)  a packet that asks for an answer was delivered
    Released     r    peer  number  a mobile handed its grant ``number`` back
    Heard        h|k  peer          a whole packet of a mobile's came (k: no IP packet)
    FramesCame   f    peer          a mobile's frames came (stream mode, between its packets)
    Say          y    peer  packet  a link-control packet of the link's channels to send to
                                    the peer (channel_control.py: MOVE, HERE, BAND)
    SwitchAt     w    0  tx rx at (8)  the link's channels from ``at`` on: our TX radio's
                                    (tx), the RX radio's (rx)

TX process -> RX process:

    HeardAside   x    pipe  frame   a frame our TX radio heard between its bursts (listening.py)
    Sent         s    0  attempts (4)  failures (4)   our sending's attempts and failed ones
                                    since the process began (ESB: frames and retransmissions;
                                    stream mode: the ARQ's fates), for the link's channels
    SwitchAt     w    (as above: a base's move, for its RX radio)

``peer``: the peer's index in the table; times are ``time.monotonic()`` of the sender's
(a double). A datagram that is none of these decodes to None: the reader counts and drops it.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from longge.protocol.uplink import Grant

#: A message is at most a tag, an index and 38 bytes (a radio frame is 32 at most, a Say's
#: packet 33: the pair's datagrams are read with this buffer).
MAX_LEN = 40
FRAME_MAX = 32
_TIME = struct.Struct("!d")
_COUNTS = struct.Struct("!II")
_SWITCH = struct.Struct("!BBd")


@dataclass(frozen=True, slots=True)
class AckToSend:
    peer: int
    frame: bytes
    urgent: bool = False


@dataclass(frozen=True, slots=True)
class PeerAck:
    peer: int
    frame: bytes


@dataclass(frozen=True, slots=True)
class GrantHeard:
    peer: int
    grant: Grant
    heard_at: float


@dataclass(frozen=True, slots=True)
class AnswerAsked:
    peer: int
    at: float


@dataclass(frozen=True, slots=True)
class Released:
    peer: int
    number: int


@dataclass(frozen=True, slots=True)
class Heard:
    peer: int
    sent: bool  # an IP packet (h), or a keepalive or another link-control packet (k)


@dataclass(frozen=True, slots=True)
class FramesCame:
    peer: int


@dataclass(frozen=True, slots=True)
class HeardAside:
    pipe: int
    frame: bytes


@dataclass(frozen=True, slots=True)
class Say:
    peer: int
    packet: bytes


@dataclass(frozen=True, slots=True)
class SwitchAt:
    tx: int
    rx: int
    at: float


@dataclass(frozen=True, slots=True)
class Sent:
    attempts: int
    failures: int


Message = (
    AckToSend
    | PeerAck
    | GrantHeard
    | AnswerAsked
    | Released
    | Heard
    | FramesCame
    | HeardAside
    | Say
    | SwitchAt
    | Sent
)


def encode(msg: Message) -> bytes:
    """The datagram for ``msg``."""
    match msg:
        case AckToSend(peer, frame, urgent):
            return (b"u" if urgent else b"o") + bytes((peer,)) + frame
        case PeerAck(peer, frame):
            return b"i" + bytes((peer,)) + frame
        case GrantHeard(peer, grant, heard_at):
            return b"g" + bytes((peer,)) + grant.wire() + _TIME.pack(heard_at)
        case AnswerAsked(peer, at):
            return b"a" + bytes((peer,)) + _TIME.pack(at)
        case Released(peer, number):
            return b"r" + bytes((peer, number))
        case Heard(peer, sent):
            return (b"h" if sent else b"k") + bytes((peer,))
        case FramesCame(peer):
            return b"f" + bytes((peer,))
        case HeardAside(pipe, frame):
            return b"x" + bytes((pipe,)) + frame
        case Say(peer, packet):
            return b"y" + bytes((peer,)) + packet
        case SwitchAt(tx, rx, at):
            return b"w\x00" + _SWITCH.pack(tx, rx, at)
        case Sent(attempts, failures):
            return b"s\x00" + _COUNTS.pack(attempts & 0xFFFFFFFF, failures & 0xFFFFFFFF)
    raise TypeError(f"not a pair message: {msg!r}")


def decode(data: bytes) -> Message | None:
    """The message in a datagram, or None if it is none (the reader counts it)."""
    if len(data) < 2 or len(data) > MAX_LEN:
        return None
    tag, index, rest = data[0], data[1], data[2:]
    if tag in b"ouix" and len(rest) > FRAME_MAX:
        return None
    if tag in b"oui":
        if not rest:
            return None
        return PeerAck(index, rest) if tag == ord("i") else AckToSend(index, rest, tag == ord("u"))
    if tag == ord("g") and len(rest) == 3 + _TIME.size:
        grant = Grant.from_wire(rest[:3])
        return None if grant is None else GrantHeard(index, grant, _TIME.unpack(rest[3:])[0])
    if tag == ord("a") and len(rest) == _TIME.size:
        return AnswerAsked(index, _TIME.unpack(rest)[0])
    if tag == ord("r") and len(rest) == 1:
        return Released(index, rest[0])
    if tag in b"hk" and not rest:
        return Heard(index, tag == ord("h"))
    if tag == ord("f") and not rest:
        return FramesCame(index)
    if tag == ord("x") and rest:
        return HeardAside(index, rest)
    if tag == ord("y") and rest:
        return Say(index, rest)
    if tag == ord("w") and index == 0 and len(rest) == _SWITCH.size:
        return SwitchAt(*_SWITCH.unpack(rest))
    if tag == ord("s") and index == 0 and len(rest) == _COUNTS.size:
        return Sent(*_COUNTS.unpack(rest))
    return None


def send(sock: socket.socket, msg: Message) -> bool:
    """``msg`` on the pair; False if it did not go (the pair is full: the reader is behind,
    or gone; the caller counts it)."""
    try:
        return sock.send(encode(msg)) > 0
    except OSError:  # (BlockingIOError: the pair is full)
        return False


def received(sock: socket.socket) -> Iterator[Message]:
    """Every message waiting on the pair, in order, till it has none (a datagram that is no
    message is passed over)."""
    while True:
        try:
            msg = decode(sock.recv(MAX_LEN + 1))
        except OSError:  # (BlockingIOError: nothing more)
            return
        if msg is not None:
            yield msg
