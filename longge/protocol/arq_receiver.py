"""The receiving half of the stream mode's selective-repeat ARQ (``arq.py``: the frames, the
sending half and how they work together), sans-IO: radio frames in, LongGe frames out in order,
and the ACKs to send back on the reverse channel."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from longge.protocol.arq_frames import (
    ACK,
    ACK_DELAY,
    BEHIND,
    BITMAP_BYTES,
    CHANNEL,
    CONTROL,
    MAX_WINDOW,
    RESET,
    RESYNC,
    SEQ_MOD,
    ArqStats,
    ControlSeal,
    Crc8Seal,
)

#: CHANNEL messages kept till the caller takes them
CHANNEL_BACKLOG = 8


@dataclass
class ArqReceiver:
    """The receiving half: radio frames in, LongGe frames in order out, ACKs to send."""

    window: int = 48
    # Every ACK costs a frame on the reverse channel and a wake-up of the processes on both
    # ends, so frames are acknowledged by 16 (or after 4 ms); after asking the sender to slow
    # down, whose window may then be under 16 frames, by 8 (or after 2 ms) for the next
    # TIGHT_FRAMES frames (docs/design.md §4, "ACKs").
    ack_every: int = 16  # frames
    ack_delay: float = ACK_DELAY  # s: an ACK is never held back longer than this
    stats: ArqStats = field(default_factory=ArqStats)
    #: how the peer's RESETs are opened and its ACKs and RESYNCs sealed (arq_frames.py)
    seal: ControlSeal = field(default_factory=Crc8Seal)

    def __post_init__(self) -> None:
        if not 1 <= self.window <= MAX_WINDOW:
            raise ValueError(f"window = {self.window}: 1..{MAX_WINDOW}")
        self.epoch: int | None = None
        self._expected = 0  # absolute
        self._buffer: dict[int, bytes] = {}
        self._unacked = 0  # frames since the last ACK
        self._first_unacked_at: float | None = None
        self._tight = 0  # frames still to acknowledge twice as often (see ack_every)
        self._ack_now = False
        self._resync_at: float | None = None
        self._resync_due = False
        self._repeat_at: float | None = None  # the last ACK once more, if nothing came since
        self._behind = False
        self._full_seen = False  # the host found the RX FIFO full since the last ACK
        #: the sender's CHANNEL messages taken (arq_frames.py), for the caller to take away
        #: (the newest few: each is sent again and again)
        self.channel: deque[bytes] = deque(maxlen=CHANNEL_BACKLOG)

    def on_frame(self, frame: bytes, now: float) -> list[bytes]:
        """A frame from the peer's sender: the LongGe frames it makes deliverable, in order."""
        if not frame:
            self.stats.malformed += 1
            return []
        if frame[0] & CONTROL:
            body = self.seal.open(frame, self.stats)  # (it counts what it refuses)
            if body is None:
                return []
            if len(body) == 2 and body[0] == RESET:
                if body[1] != self.epoch:
                    self.epoch, self._expected = body[1], 0
                    self._buffer.clear()
                    # what the old session's sender was told to do is not the new one's
                    self._behind = self._full_seen = False
                    self._tight = self._unacked = 0
                    self._first_unacked_at = None
                self._ack_now = True  # the sender waits for this ACK to begin
            elif len(body) > 1 and body[0] == CHANNEL:
                self.stats.channel_in += 1
                self.channel.append(body[1:])
            else:
                self.stats.malformed += 1
            return []
        if self.epoch is None:
            self._resync_due = True
            return []
        distance = (frame[0] - self._expected) % SEQ_MOD
        if distance >= SEQ_MOD - self.window:  # already delivered: the ACK was lost
            self.stats.duplicates += 1
            self._ack_now = True
            return []
        if distance >= self.window:
            self.stats.out_of_window += 1
            return []
        seq = self._expected + distance
        if seq in self._buffer:
            # a repeat, or a phantom (a damaged sequence number): the first one stays
            self.stats.duplicates += 1
        else:
            self._buffer[seq] = frame[1:]
        out = []
        while self._expected in self._buffer:
            out.append(self._buffer.pop(self._expected))
            self._expected += 1
        self.stats.delivered += len(out)
        if self._buffer:
            self._ack_now = True  # a hole: tell the sender at once
            if self._full_seen:
                self._slow_down()  # and the FIFO was full: the hole is ours
        self._unacked += 1
        self._repeat_at = None
        if self._tight:
            self._tight -= 1
        if self._first_unacked_at is None:
            self._first_unacked_at = now
        return out

    def fell_behind(self) -> None:
        """The host found the chip's RX FIFO full: frames may have been dropped. If a frame is
        missing too (a hole), the next ACK, sent at once, asks the sender to send less; a full
        FIFO that lost nothing (the chip, or the emulated air, waited) asks nothing."""
        self._full_seen = True
        if self._buffer:
            self._slow_down()

    def ack_now(self) -> None:
        """The next ``control`` acknowledges at once (a mobile granted the uplink: its ACK goes
        in its own grant, docs/design.md §4, "Several mobiles")."""
        if self.epoch is not None:
            self._ack_now = True

    @property
    def prompt(self) -> bool:
        """Is the next ACK due at once (a hole, a repeat, ``ack_now``), not by count or
        delay?"""
        return self._ack_now

    #: Frames acknowledged twice as often after each request to slow down: four windows, so
    #: the sender's window, growing by one a frame acknowledged, is back over ack_every.
    TIGHT_FRAMES = 4 * MAX_WINDOW

    def _slow_down(self) -> None:
        if not self._behind:
            self.stats.slowdowns += 1
        self._behind = self._ack_now = True
        self._tight = self.TIGHT_FRAMES

    def control(self, now: float) -> bytes | None:
        """The control frame to send now on the reverse channel, if one is due."""
        if self._resync_due:
            self._resync_due = False
            if self._resync_at is None or now - self._resync_at >= self.ack_delay:
                self._resync_at = now
                self.stats.resyncs += 1
                return self.seal.seal(bytes((RESYNC,)))
            return None
        every, delay = self._spacing
        due = self._ack_now or self._unacked >= every
        waited = self._first_unacked_at is not None and now - self._first_unacked_at >= delay
        if self.epoch is None:
            return None
        if due or waited:
            self._repeat_at = now + self.ack_delay
            return self._ack()
        if self._repeat_at is not None and now >= self._repeat_at:
            # Nothing arrived since the last ACK: the sender may be waiting for it, and it may
            # have been lost. Once more (the reverse channel is nearly idle then).
            self._repeat_at = None
            return self._ack()
        return None

    @property
    def _spacing(self) -> tuple[int, float]:
        """(frames, seconds) an ACK may wait: half as long while the sender slows down."""
        if self._tight:
            return max(1, self.ack_every // 2), self.ack_delay / 2
        return self.ack_every, self.ack_delay

    def next_deadline(self) -> float | None:
        if self._first_unacked_at is not None:
            return self._first_unacked_at + self._spacing[1]
        return self._repeat_at

    def _ack(self) -> bytes:
        assert self.epoch is not None
        bits = bytearray(BITMAP_BYTES)
        for seq in self._buffer:
            i = seq - self._expected - 1
            if 0 <= i < 8 * BITMAP_BYTES:
                bits[i // 8] |= 1 << (i % 8)
        while bits and bits[-1] == 0:
            bits.pop()
        kind = ACK | (BEHIND if self._behind else 0)
        self._ack_now = self._behind = self._full_seen = False
        self._unacked = 0
        self._first_unacked_at = None
        self.stats.acks_out += 1
        return self.seal.seal(bytes((kind, self.epoch, self._expected % SEQ_MOD)) + bytes(bits))
