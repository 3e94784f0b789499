"""Receiver side: frames become packets, or counted drops.

One packet is rebuilt at a time: a radio link delivers frames in the order they were sent,
so a frame that does not continue the packet in progress means something was lost, and the
packet in progress is dropped. Whatever the air does (loss, duplication, reordering, bit
flips, a sender restarting mid-packet), a packet is delivered only if

1. its frames arrived complete and in sequence (header checks),
2. its CRC-32 matches (integrity, also against splices the header cannot see), and
3. its number is newer than the last delivered one (order; no duplicates).

Memory is bounded by one packet of ``mtu`` bytes. A packet in progress that receives no frame
for ``timeout`` seconds is dropped on the next call that passes the time in.
"""

from __future__ import annotations

import enum
import zlib
from collections import Counter

from longge.protocol.fragmenter import DEFAULT_MTU, check_mtu
from longge.protocol.frame import CRC_LEN, NUMBER_LEN, PACKET_OVERHEAD, SEQ_MOD, Header

#: Packet numbers are 16-bit; "newer" means ahead by less than half the space.
NUMBER_SPACE = 1 << 16
#: A sender that restarts begins a fresh run of numbers the receiver thinks are old. After
#: this many valid packets with consecutive numbers that all look old, the receiver follows.
RESYNC_AFTER = 3


class DropReason(enum.StrEnum):
    # frames discarded on their own
    EMPTY_FRAME = "empty_frame"  # zero-length frame
    BAD_FIRST = "bad_first"  # first frame too short, or its number disagrees with its header
    ORPHAN = "orphan"  # continuation frame with no matching packet in progress
    DUPLICATE_FRAME = "duplicate_frame"  # exact repeat of the previous frame (harmless)
    # packets dropped (in progress or complete)
    GAP = "gap"  # a frame inside the packet is missing
    INTERRUPTED = "interrupted"  # a new packet began before this one ended
    OVERSIZE = "oversize"  # longer than the MTU allows
    CHECKSUM = "checksum"  # CRC-32 mismatch: corrupted or spliced
    TIMEOUT = "timeout"  # no frame for `timeout` seconds
    STALE = "stale"  # valid but not newer than the last delivered packet


class Reassembler:
    def __init__(self, mtu: int = DEFAULT_MTU, timeout: float = 1.0) -> None:
        check_mtu(mtu)
        self.mtu = mtu
        self.timeout = timeout
        self.drops: Counter[DropReason] = Counter()
        self.delivered = 0
        self.keepalives = 0
        self.frames = 0
        self._buf = bytearray()
        self._active = False
        self._seq = 0
        self._next_index = 0
        self._last_frame = b""
        self._last_time = 0.0
        self._last_number: int | None = None
        self._stale_run: list[int] = []

    @property
    def in_progress(self) -> int:
        """Bytes held for the packet in progress (0 when idle)."""
        return len(self._buf) if self._active else 0

    def expire(self, now: float) -> None:
        """Drop the packet in progress if it has waited longer than the timeout."""
        if self._active and now - self._last_time > self.timeout:
            self._abandon(DropReason.TIMEOUT)

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
        if header.first:
            return self._start(header, frame, now)
        if not self._active or header.seq != self._seq:
            if self._active:
                self._abandon(DropReason.GAP)
            self.drops[DropReason.ORPHAN] += 1
            return None
        if header.index != self._next_index:
            if frame == self._last_frame:
                self.drops[DropReason.DUPLICATE_FRAME] += 1
                return None
            self._abandon(DropReason.GAP)
            self.drops[DropReason.ORPHAN] += 1
            return None
        return self._append(header, frame, now)

    # -- internals -----------------------------------------------------------------------

    def _start(self, header: Header, frame: bytes, now: float) -> bytes | None:
        if self._active:
            if frame == self._last_frame:
                self.drops[DropReason.DUPLICATE_FRAME] += 1
                return None
            self._abandon(DropReason.INTERRUPTED)
        data = frame[1:]
        if len(data) < NUMBER_LEN or data[1] % SEQ_MOD != header.seq or header.index != 0:
            self.drops[DropReason.BAD_FIRST] += 1
            return None
        self._active = True
        self._seq = header.seq
        self._next_index = 0
        self._buf.clear()
        return self._append(header, frame, now)

    def _append(self, header: Header, frame: bytes, now: float) -> bytes | None:
        self._buf += frame[1:]
        self._next_index = (self._next_index + 1) % 8
        self._last_frame = frame
        self._last_time = now
        if len(self._buf) > self.mtu + PACKET_OVERHEAD:
            self._abandon(DropReason.OVERSIZE)
            return None
        if header.last:
            return self._finish()
        return None

    def _abandon(self, reason: DropReason) -> None:
        self.drops[reason] += 1
        self._active = False
        self._buf.clear()
        self._last_frame = b""

    def _finish(self) -> bytes | None:
        stream = bytes(self._buf)
        self._active = False
        self._buf.clear()
        if len(stream) < PACKET_OVERHEAD:
            self.drops[DropReason.CHECKSUM] += 1
            return None
        body, crc = stream[:-CRC_LEN], stream[-CRC_LEN:]
        if zlib.crc32(body).to_bytes(4, "big") != crc:
            self.drops[DropReason.CHECKSUM] += 1
            return None
        number = int.from_bytes(body[:NUMBER_LEN], "big")
        if not self._accept_number(number):
            self.drops[DropReason.STALE] += 1
            return None
        packet = body[NUMBER_LEN:]
        if not packet:
            self.keepalives += 1
        else:
            self.delivered += 1
        return packet

    def _accept_number(self, number: int) -> bool:
        last = self._last_number
        if last is None or 0 < (number - last) % NUMBER_SPACE < NUMBER_SPACE // 2:
            self._last_number = number
            self._stale_run.clear()
            return True
        run = self._stale_run
        if run and (number - run[-1]) % NUMBER_SPACE != 1:
            run.clear()
        run.append(number)
        if len(run) >= RESYNC_AFTER:
            self._last_number = number
            run.clear()
            return True
        return False
