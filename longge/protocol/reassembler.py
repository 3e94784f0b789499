"""Receiver side: frames become packets, or counted drops.

Frames are matched to packets by the packet number their header carries (mod 8) and the
frame index the packet expects next. A radio link delivers one sender's frames in order, so
normally one packet is in progress; but the air is open, and a foreign radio's frames can
land between a packet's frames. They must not cost the genuine packet: a frame that fits no
packet in progress is dropped on its own, and up to 8 packets (one per number mod 8) are
rebuilt side by side. Whatever the air does (loss, duplication, reordering, bit flips,
injected frames, a sender restarting mid-packet), a packet is delivered only if

1. its frames arrived complete and in sequence (header checks),
2. its CRC-32 matches (integrity, also against splices the header cannot see), and
3. its number is newer than the last delivered one of its lane (order within a lane; no
   duplicates) or, on a secured link, the security layer accepts it (authentic, not a replay:
   ``secure.py``). A lane-1 packet (an interactive one, sent between the frames of a lane-0
   packet: frame.py, "Lanes") may so be delivered before a lane-0 packet sealed or numbered
   before it.

Memory is bounded by 8 packets of ``mtu`` bytes. A packet in progress is dropped when a new
packet starts with its number mod 8 (INTERRUPTED: normally 8 packets later), or when it gets
no frame for ``timeout`` seconds (TIMEOUT, on the next call that passes the time in).

On a secured link a new first frame takes that place only if it proves itself: its stamp
checks under the link's key and its packet is fresher than the one in progress there
(``secure.py``, "First frames"); otherwise it is dropped on its own (REFUSED_FIRST) and the
packet in progress goes on. A stranger's first frame, forged or a genuine one replayed, so
costs no genuine packet. On an open link anyone can send whole packets, and a new first frame
ends the packet in progress as a restarted sender's does.
"""

from __future__ import annotations

import enum
import zlib
from collections import Counter
from dataclasses import dataclass
from itertools import islice
from typing import Protocol

from longge.protocol.fragmenter import DEFAULT_MTU, LANES, check_mtu
from longge.protocol.frame import (
    CRC_LEN,
    INDEX_MOD,
    NUMBER_LEN,
    PACKET_OVERHEAD,
    SEQ_MOD,
    Header,
)

#: Packet numbers are 16-bit, each lane's every other one (its parity); "newer" means ahead
#: within the lane by less than half the lane's space.
NUMBER_SPACE = 1 << 16
LANE_SPACE = NUMBER_SPACE // LANES
#: A sender that restarts begins a fresh run of numbers the receiver thinks are old. After
#: this many valid packets with consecutive numbers that all look old, the receiver follows.
RESYNC_AFTER = 3
#: A packet equal (number and CRC-32) to one of the last RECENT delivered is a repeat, whatever
#: its number looks like, never a sign of a new sender: a stream-mode ARQ that begins a new
#: session sends what was unacknowledged again (up to 64 frames), and a frame whose ARQ
#: sequence number was damaged past the radio's CRC can deliver a copy of a later one-frame
#: packet early (see ``late_guard``).
RECENT = 128
#: A jump ahead in a lane's numbers of at most this many places counts the places skipped as
#: packets that never came (``missing``); a longer one is a sender that started over, not loss.
GAP_MAX = 256


class DropReason(enum.StrEnum):
    # frames discarded on their own
    EMPTY_FRAME = "empty_frame"  # zero-length frame
    BAD_FIRST = "bad_first"  # first frame too short, or its number disagrees with its header
    # secured: a first frame that does not prove itself, or no fresher than the packet in
    # progress in its place (the module's drawing)
    REFUSED_FIRST = "refused_first"
    ORPHAN = "orphan"  # a frame that continues no packet in progress (lost or foreign)
    DUPLICATE_FRAME = "duplicate_frame"  # exact repeat of the previous frame (harmless)
    # packets dropped (in progress or complete)
    INTERRUPTED = "interrupted"  # a new packet began before this one ended
    OVERSIZE = "oversize"  # longer than the MTU allows
    CHECKSUM = "checksum"  # CRC-32 mismatch: corrupted or spliced
    TIMEOUT = "timeout"  # no frame for `timeout` seconds
    STALE = "stale"  # valid but not newer than the last delivered packet
    REJECTED = "rejected"  # refused by the security layer (forged, replayed: see secure.py)


@dataclass
class _Partial:
    """One packet being rebuilt; ``fresh``: how fresh its first frame said it is (secured)."""

    buf: bytearray
    next_index: int
    last_frame: bytes
    last_time: float
    fresh: int = -1


class Authenticator(Protocol):
    """A secured link's judge (``secure.Opener``)."""

    def first(self, number: int, head: bytes) -> int | None:
        """A first frame of packet ``number`` holding ``head`` of the packet: how fresh (a
        larger number: a later packet), or None to refuse it."""
        ...

    def open(self, data: bytes) -> bytes | None:
        """A whole packet, opened, or None to refuse it."""
        ...


class Reassembler:
    """``secured`` (optional: ``secure.Opener``) judges each first frame before it may take a
    packet's place (the module's drawing) and sees every packet whose CRC matched, returning
    it opened, or ``None`` to refuse it. With it, order and duplicates are its business (an
    authenticated sequence number beats the 16-bit one, which anyone can forge), so the number
    check and its resync are skipped.

    ``late_guard`` (stream mode: the ARQ's largest window): when a packet's number jumps ahead
    by at most this much, the numbers it skipped are remembered, and a packet that comes with
    one of them later is late, out of order: dropped, and not counted towards following a
    restarted sender. That is how a packet copied early by a damaged ARQ sequence number would
    otherwise bring the ones it overtook after it, out of order. Off (0) by default: on a link
    without phantoms it would only cost packets when a stray valid packet lands a little ahead
    (up to ``late_guard`` - 1 genuine ones, instead of RESYNC_AFTER - 1)."""

    def __init__(
        self,
        mtu: int = DEFAULT_MTU,
        timeout: float = 1.0,
        secured: Authenticator | None = None,
        late_guard: int = 0,
    ) -> None:
        check_mtu(mtu)
        self.mtu = mtu
        self.late_guard = min(late_guard, RECENT)
        self.secured = secured
        self.timeout = timeout
        self.drops: Counter[DropReason] = Counter()
        self.delivered = 0
        self.keepalives = 0
        self.frames = 0
        #: packets whose numbers a later packet skipped (an open link: the sender's, lost on
        #: the way or given up there; a sealed link counts in its Opener instead)
        self.missing = 0
        self._partial: dict[int, _Partial] = {}  # by packet number mod 8
        self._oldest = float("-inf")  # no packet in progress has a frame older than this (expire)
        # per lane: the place (number // LANES) of the last packet delivered, and a run of
        # consecutive places that all looked old (a restarted sender: RESYNC_AFTER)
        self._last: list[int | None] = [None] * LANES
        self._stale_runs: list[list[int]] = [[] for _ in range(LANES)]
        self._recent: dict[int, bytes] = {}  # number -> CRC-32 of the last RECENT delivered
        self._skipped: dict[int, None] = {}  # the last RECENT numbers skipped over (in order)

    @property
    def in_progress(self) -> int:
        """Bytes held for packets in progress (0 when idle)."""
        return sum(len(p.buf) for p in self._partial.values())

    def expire(self, now: float) -> None:
        """Drop packets in progress that have waited longer than the timeout."""
        # Called for every frame: none can have waited longer while the oldest frame time
        # seen at the last look (a frame time only grows) is within the timeout.
        if now - self._oldest <= self.timeout:
            return
        for seq in [s for s, p in self._partial.items() if now - p.last_time > self.timeout]:
            self._abandon(seq, DropReason.TIMEOUT)
        self._oldest = min((p.last_time for p in self._partial.values()), default=now)

    def receive(self, frame: bytes, now: float) -> bytes | None:
        """Feed one frame; returns a whole packet when this frame completes a valid one.

        A valid packet of zero bytes is a keepalive (``Fragmenter.keepalive``): it comes back
        as ``b""`` so that the caller can note that the peer is alive; it is not an IP packet.
        """
        self.frames += 1
        self.expire(now)
        if not frame:
            self.drops[DropReason.EMPTY_FRAME] += 1
            return None
        header = Header.decode(frame[0])
        part = self._partial.get(header.seq)
        if header.first:
            if part is not None and frame == part.last_frame:
                self.drops[DropReason.DUPLICATE_FRAME] += 1
                return None
            # checked before it costs the packet in progress anything: one malformed frame
            # per packet (anyone's radio can send it) once dropped every genuine packet
            data = frame[1:]
            if len(data) < NUMBER_LEN or data[1] % SEQ_MOD != header.seq or header.index != 0:
                self.drops[DropReason.BAD_FIRST] += 1
                return None
            fresh = -1
            if self.secured is not None:
                number = int.from_bytes(data[:NUMBER_LEN], "big")
                judged = self.secured.first(number, data[NUMBER_LEN:])
                if judged is None or (part is not None and judged <= part.fresh):
                    self.drops[DropReason.REFUSED_FIRST] += 1
                    return None
                fresh = judged
            if part is not None:
                self._abandon(header.seq, DropReason.INTERRUPTED)
            part = self._partial[header.seq] = _Partial(bytearray(), 0, b"", now, fresh)
        elif part is None or header.index != part.next_index:
            if part is not None and frame == part.last_frame:
                self.drops[DropReason.DUPLICATE_FRAME] += 1
            else:
                self.drops[DropReason.ORPHAN] += 1
            return None
        return self._append(header, part, frame, now)

    # -- internals -----------------------------------------------------------------------

    def _append(self, header: Header, part: _Partial, frame: bytes, now: float) -> bytes | None:
        part.buf += frame[1:]
        part.next_index = (part.next_index + 1) % INDEX_MOD
        part.last_frame = frame
        part.last_time = now
        if now < self._oldest:  # a clock that went back (expire's bound must hold)
            self._oldest = now
        if len(part.buf) > self.mtu + PACKET_OVERHEAD:
            self._abandon(header.seq, DropReason.OVERSIZE)
            return None
        if header.last:
            del self._partial[header.seq]
            return self._finish(bytes(part.buf))
        return None

    def _abandon(self, seq: int, reason: DropReason) -> None:
        self.drops[reason] += 1
        del self._partial[seq]

    def _finish(self, stream: bytes) -> bytes | None:
        if len(stream) < PACKET_OVERHEAD:
            self.drops[DropReason.CHECKSUM] += 1
            return None
        body, crc = stream[:-CRC_LEN], stream[-CRC_LEN:]
        if zlib.crc32(body).to_bytes(4, "big") != crc:
            self.drops[DropReason.CHECKSUM] += 1
            return None
        number = int.from_bytes(body[:NUMBER_LEN], "big")
        packet = body[NUMBER_LEN:]
        if self.secured is not None:
            opened = self.secured.open(packet)
            if opened is None:
                self.drops[DropReason.REJECTED] += 1
                return None
            packet = opened
        elif not self._accept_number(number, crc):
            self.drops[DropReason.STALE] += 1
            return None
        if not packet:
            self.keepalives += 1
        else:
            self.delivered += 1
        return packet

    def _accept_number(self, number: int, crc: bytes) -> bool:
        if self._recent.get(number) == crc:
            return False  # a repeat of a packet delivered already
        lane, place = number % LANES, number // LANES
        last = self._last[lane]
        ahead = 1 if last is None else (place - last) % LANE_SPACE
        if 0 < ahead < LANE_SPACE // 2:
            if last is not None and 1 < ahead <= self.late_guard:
                self._skip(lane, last, ahead)
            if last is not None and 1 < ahead <= GAP_MAX:
                self.missing += ahead - 1
            self._took(number, crc)
            return True
        if number in self._skipped:
            return False  # late: a packet skipped over, now out of order
        run = self._stale_runs[lane]
        if run and (place - run[-1]) % LANE_SPACE != 1:
            run.clear()
        run.append(place)
        if len(run) >= RESYNC_AFTER:
            self._took(number, crc)
            return True
        return False

    def _skip(self, lane: int, last: int, ahead: int) -> None:
        skipped = self._skipped
        for gap in range(1, ahead):
            skipped[(last + gap) % LANE_SPACE * LANES + lane] = None
        for old in list(islice(skipped, max(0, len(skipped) - RECENT))):
            del skipped[old]

    def _took(self, number: int, crc: bytes) -> None:
        lane = number % LANES
        self._last[lane] = number // LANES
        self._stale_runs[lane].clear()
        recent = self._recent
        recent.pop(number, None)
        recent[number] = crc
        if len(recent) > RECENT:
            del recent[next(iter(recent))]
