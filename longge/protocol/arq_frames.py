"""The stream mode's ARQ frames (``arq.py``: the sending half, ``arq_receiver.py``: the
receiving half; docs/design.md §4), and the counters both halves keep.

In stream mode the chip sends without Enhanced ShockBurst acknowledgements, so LongGe
acknowledges itself: the receiving node answers through its own TX radio (the reverse
channel), ahead of its own data. Each radio frame carries one ARQ byte in front of the LongGe
frame (``frame.py``: one header byte and a slice of the packet stream), so stream mode costs one
byte per frame more than ESB::

    data     0sssssss  LongGe frame              s: sequence number mod 128
    ACK      10000b00  epoch  cum  bitmap... c   cum: the next sequence number expected;
                                                 bitmap bit i: cum + 1 + i arrived (LSB first);
                                                 b: the receiver fell behind (RX FIFO full)
    RESET    10000001  epoch  c                  the sender starts a session at sequence 0
    RESYNC   10000010  c                         the receiver knows no session (it restarted)
    CHANNEL  10000011  message  c                the sender's link-control message of the
                                                 link's channels (channel_control.py's MOVE,
                                                 HERE), outside the window

CHANNEL frames go ahead of the data, unacknowledged and outside the session, as a RESET does:
a base whose link moved reaches a mobile that missed the move although that mobile's ACKs do
not reach it (they go to the uplink's old channel, so the window stays full; a HERE in the
window never went, and a stream-mode link that moved stayed apart for good). They are sent
again and again anyway (MOVE till its moment, HERE as a keepalive: agility.py). A message
that does not fit one frame (a mobile's BAND) goes in the window, as a packet.

``c`` is a CRC-8 of the control frame: a data frame damaged past the radio's CRC into the
shape of a control frame (one bit flips 0x01 into RESET) is refused, and so is a damaged
ACK (an ACK with one bit flipped is a RESYNC, which would restart the session).

On a secured link (a key) the control frames are authenticated instead (``KeyedSeal``)::

    control  body  epoch (4)  counter (4)  tag (8)

tag = BLAKE2s-64 of body || epoch || counter under a key derived from the direction's packet
key (the sender's: RESET; the receiver's: ACK, RESYNC). epoch || counter is the freshness:
each end's control epoch is recorded (state_dir) before its first control frame, as a packet
sender's epoch is, and the counter counts its frames; a control frame acts only if its tag
checks and its (epoch, counter) is above the last one accepted. A stranger's forged or
replayed RESET, RESYNC or ACK acts on nothing and is counted (``control_forged``,
``control_replayed``). 16 bytes more per control frame, on the reverse channel.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import ClassVar

from longge.protocol.secure import keyed_hash

HEADER_LEN = 1  # the ARQ byte in front of every frame
SEQ_MOD = 128
MAX_WINDOW = SEQ_MOD // 2
CONTROL = 0x80
ACK, RESET, RESYNC, CHANNEL = 0x80, 0x81, 0x82, 0x83
BEHIND = 0x04  # in an ACK's first byte: the receiver found its RX FIFO full
BITMAP_BYTES = 8  # 64 frames after cum
#: The LongGe frame behind the ARQ byte is at most this long (a 32-byte radio frame).
MAX_INNER = 31
#: A radio frame's longest payload: a control frame, sealed, is at most this long.
MAX_FRAME = MAX_INNER + HEADER_LEN
#: s: a receiver holds an ACK back at most this long (``ArqReceiver.ack_delay``); the sender's
#: timer waits for it on top of the round trip (QUIC's max_ack_delay, RFC 9002 §6.2.1)
ACK_DELAY = 0.004


def crc8(data: bytes) -> int:
    """CRC-8 (polynomial 0x07, init 0): the check byte of a control frame."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc << 1) ^ 0x07 if crc & 0x80 else crc << 1
            crc &= 0xFF
    return crc


def control_frame(body: bytes) -> bytes:
    return body + bytes((crc8(body),))


def control_body(frame: bytes) -> bytes | None:
    """A control frame without its check byte, or None if the check fails."""
    if len(frame) < 2 or crc8(frame[:-1]) != frame[-1]:
        return None
    return frame[:-1]


class Crc8Seal:
    """Control frames on an open link (no key): a CRC-8 against damage, nothing against a
    stranger."""

    OVERHEAD: ClassVar[int] = 1  # the check byte

    def seal(self, body: bytes) -> bytes:
        return control_frame(body)

    def open(self, frame: bytes, stats: ArqStats) -> bytes | None:
        body = control_body(frame)
        if body is None:
            stats.malformed += 1
        return body


TAG_LEN = 8
NONCE_LEN = 8  # epoch (4) || counter (4)


def control_key(direction_key: bytes) -> bytes:
    """The key that authenticates a direction's control frames, apart from its packet key."""
    return keyed_hash(direction_key, b"longge/arq-control")


@dataclass
class KeyedSeal:
    """Control frames on a secured link: authenticated and fresh (the module's drawing).
    ``key_out`` seals what this end sends, ``keys_in`` open the peer's (the current key, and
    one being rotated out); ``epoch``: this end's control epoch, recorded before first use."""

    key_out: bytes
    keys_in: tuple[bytes, ...]
    epoch: int
    OVERHEAD: ClassVar[int] = NONCE_LEN + TAG_LEN
    _counter: int = field(default=0, init=False)
    _last: int = field(default=-1, init=False)  # the last (epoch, counter) accepted

    def seal(self, body: bytes) -> bytes:
        # (past 2**32 frames to_bytes raises: the process ends and, started again, records a
        # new epoch; a counter that wrapped would be refused by the peer from then on)
        self._counter += 1
        nonce = self.epoch.to_bytes(4, "big") + self._counter.to_bytes(4, "big")
        return body + nonce + keyed_hash(self.key_out, body + nonce, TAG_LEN)

    def open(self, frame: bytes, stats: ArqStats) -> bytes | None:
        if len(frame) < 1 + NONCE_LEN + TAG_LEN:
            stats.control_forged += 1
            return None
        signed, tag = frame[:-TAG_LEN], frame[-TAG_LEN:]
        if not any(hmac.compare_digest(keyed_hash(k, signed, TAG_LEN), tag) for k in self.keys_in):
            stats.control_forged += 1
            return None
        fresh = int.from_bytes(signed[-NONCE_LEN:], "big")
        if fresh <= self._last:
            stats.control_replayed += 1
            return None
        self._last = fresh
        return signed[:-NONCE_LEN]


ControlSeal = Crc8Seal | KeyedSeal


@dataclass
class ArqStats:
    sent: int = 0  # data frames sent, first time
    retransmitted: int = 0
    #: frames found lost (a hole below a frame acknowledged, or the oldest at a timeout),
    #: when found: with ``acked``, the fates learnt (an adapting link's rate is judged on them)
    lost: int = 0
    acked: int = 0
    acks_in: int = 0
    stale_acks: int = 0  # from an old session, or outside what is in flight
    phantoms: int = 0  # ACKs ahead of what was sent: the receiver took a damaged frame
    resets: int = 0
    #: RESETs answered in an earlier session of the same epoch (the receiver kept it): a new
    #: epoch at once
    epoch_clashes: int = 0
    timeouts: int = 0
    #: frames sent again because their ACK is overdue though the peer answers (``_probe``)
    probes: int = 0
    tail_probes: int = 0  # a small packet's newest frame sent again soon (``_tail``)
    slowdowns: int = 0  # the receiver said it fell behind (sender), said so (receiver)
    delivered: int = 0
    duplicates: int = 0
    out_of_window: int = 0
    malformed: int = 0
    #: control frames whose tag did not check (a stranger's, or damaged), or that were not
    #: fresh (a replay): they acted on nothing (a secured link: ``KeyedSeal``)
    control_forged: int = 0
    control_replayed: int = 0
    acks_out: int = 0
    resyncs: int = 0
    #: CHANNEL frames sent (sender), taken (receiver)
    channel_out: int = 0
    channel_in: int = 0


def arq_totals(stats: list[ArqStats]) -> dict[str, int]:
    """Several ARQs' counters summed (those that are not zero), for a status."""
    out: dict[str, int] = {}
    for s in stats:
        for k, v in vars(s).items():
            if v:
                out[k] = out.get(k, 0) + v
    return out
