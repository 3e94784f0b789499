"""Selective-repeat ARQ for the no-ack stream mode, sans-IO (time is an argument).

The frames (one ARQ byte in front of each LongGe frame, and the control frames) are in
``arq_frames.py``.

The sender keeps at most ``window`` (<= 64, half the sequence space) frames unacknowledged,
retransmits a frame when a frame sent after it has been acknowledged (the channel keeps order,
so a hole is a loss) or when its retransmission timer (from the measured round trip) expires,
and halves its window when the receiver says it fell behind (its host found the chip's RX FIFO
full: a no-ack chip then drops frames silently, so noise and overflow look alike from the
sender's side, and only the receiver can tell them apart). A sender that restarts begins a new
session (a random epoch) with RESET; a receiver that restarts answers data it has no session
for with RESYNC, and the sender starts a new session. Frames are delivered in order, each at
most once per session; the LongGe reassembler above still checks every packet's CRC-32, so a
frame damaged past the radio's CRC never yields a wrong packet. See docs/design.md §4.

This module holds the sending half (what it sends again before its timer, the probes, is
``arq_again.py``); the receiving half is ``arq_receiver.py``.
"""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass, field

from longge.protocol.arq_again import InFlight, SendingAgain
from longge.protocol.arq_frames import (
    ACK,
    ACK_DELAY,
    BEHIND,
    BITMAP_BYTES,
    CHANNEL,
    CONTROL,
    MAX_FRAME,
    MAX_INNER,
    MAX_WINDOW,
    RESET,
    RESYNC,
    SEQ_MOD,
    ArqStats,
    ControlSeal,
    Crc8Seal,
)


@dataclass
class ArqSender(SendingAgain):
    """The sending half: LongGe frames in, radio frames out, ACKs from the peer in."""

    window: int = 48
    backlog: int = 256  # frames waiting for the window (memory bound)
    # a round trip with busy hosts (the peer's ACK delay comes on top: ``_timeout``): at
    # 6 ms, with both directions saturated, timeouts came 2-5 times as often
    min_rto: float = 0.010
    max_rto: float = 0.5
    epoch: int = field(default_factory=lambda: 1 + secrets.randbelow(255))
    stats: ArqStats = field(default_factory=ArqStats)
    #: how its RESETs are sealed and the peer's ACKs and RESYNCs opened (arq_frames.py)
    seal: ControlSeal = field(default_factory=Crc8Seal)
    #: s: the tail's probe waits this long instead of ``2 x srtt``, while set (a mobile whose
    #: base says it keeps sending: the others' ACKs cross the uplink's channel at any time,
    #: and a copy this much later rarely meets the one that spoilt the first:
    #: daemon/stream_tx.py)
    tail_after: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.window <= MAX_WINDOW:
            raise ValueError(f"window = {self.window}: 1..{MAX_WINDOW}")
        self.established = False
        self._queue: deque[bytes] = deque()
        self._flight: dict[int, InFlight] = {}  # absolute sequence -> frame
        self._base = 0  # oldest unacknowledged (absolute)
        self._next = 0  # next new sequence (absolute)
        self._order = 0
        self._retransmit: deque[int] = deque()
        self._srtt: float | None = None
        self._rttvar = 0.0
        self._rto = 0.05  # from the measured round trip (RFC 6298's formula)
        self._backoff = 1  # doubled by each timeout, back to 1 when an ACK brings news
        self._silent_timeouts = 0  # timeouts in a row without the base moving
        self._silent_since = 0.0  # when the first of them came
        #: a new session only after this long without progress too (an adapting link's
        #: ends that lost each other's rate find each other within 2 x rate.FALLBACK_S: a
        #: session begun before would send again what the receiver took, its ACKs lost,
        #: and a repeat 8 slices behind fits the packet in progress: frame.py)
        self.restart_after_s = 0.0
        self._last_timeout_at = -1.0
        self._reset_sent_at: float | None = None
        self._ahead_of: int | None = None  # the last ACK's cum when it was ahead of next
        self.cwnd = float(self.window)
        self._cut_at = -1.0
        self.offered = 0  # frames offered (``passed``)
        #: (order, seq) of every sending, oldest first; entries of frames acknowledged or sent
        #: again since are dropped as they come to the front (``_probe``)
        self._sendings: deque[tuple[int, int]] = deque()
        self._news_at = -1.0  # the last ACK that acknowledged something
        self._tail_probed = -1  # the order of the last tail probe's sending (``_tail``)
        self._since_idle = 0  # new frames sent since the last one sent with none in flight

    # -- the host's side ---------------------------------------------------------------------

    def offer(self, frame: bytes, force: bool = False) -> bool:
        """Queue one LongGe frame; False if the backlog is full (the caller keeps it).
        ``force``: past the backlog (a link-control packet of a few frames that must go
        now: protocol/adapt_stream.py)."""
        if not 1 <= len(frame) <= MAX_INNER:
            raise ValueError(f"a frame of {len(frame)} bytes: 1..{MAX_INNER}")
        if len(self._queue) >= self.backlog and not force:
            return False
        self._queue.append(frame)
        self.offered += 1
        return True

    @property
    def passed(self) -> int:
        """How many of the frames offered so far the receiver has taken in order (the
        cumulative ACK passed them; or given up past a phantom): frame n (counted from 1
        in offering order) has passed once this is n or more."""
        return self.offered - len(self._queue) - len(self._flight)

    @property
    def idle(self) -> bool:
        return not self._queue and not self._flight

    @property
    def in_flight(self) -> int:
        return len(self._flight)

    @property
    def queued(self) -> int:
        """Frames offered, not yet sent (waiting for the window)."""
        return len(self._queue)

    # -- the radio's side ---------------------------------------------------------------------

    def next_frame(self, now: float) -> bytes | None:
        """The radio frame to send now, if any: a RESET while no session is up, a frame to
        retransmit, a new one if the window allows, or a probe (``_probe``)."""
        if not self.established:
            if self._reset_sent_at is None or now - self._reset_sent_at >= self._rto:
                self._reset_sent_at = now
                self.stats.resets += 1
                return self.seal.seal(bytes((RESET, self.epoch)))
            return None
        self._check_timeout(now)
        while self._retransmit:
            seq = self._retransmit.popleft()
            f = self._flight.get(seq)
            if f is None or f.sacked:
                continue
            return self._send_again(seq, f, now)
        if self._queue and self._next - self._base < min(self.window, int(self.cwnd)):
            frame = self._queue.popleft()
            seq = self._next
            self._next += 1
            self._since_idle = self._since_idle + 1 if self._flight else 1
            self._flight[seq] = InFlight(frame, now, self._order)
            self._sendings.append((self._order, seq))
            self._order += 1
            self.stats.sent += 1
            return bytes((seq % SEQ_MOD,)) + frame
        return self._probe(now)

    def _send_again(self, seq: int, f: InFlight, now: float) -> bytes:
        f.sent_at, f.order, f.sends = now, self._order, f.sends + 1
        self._sendings.append((self._order, seq))
        self._order += 1
        self.stats.retransmitted += 1
        return bytes((seq % SEQ_MOD,)) + f.frame

    def next_deadline(self) -> float | None:
        """When next_frame has something to do without news from the peer (a timer)."""
        if not self.established:
            return (self._reset_sent_at or 0.0) + self._rto
        if not self._flight:
            return None
        oldest = self._flight.get(self._base)
        at = [] if oldest is None else [oldest.sent_at + self._timeout]
        tail = self._tail()
        at += [t for t in (self._probe_at(), None if tail is None else tail[0]) if t is not None]
        return min(at, default=None)

    def channel_frame(self, message: bytes) -> bytes | None:
        """A link-control message of the link's channels as a CHANNEL frame, to go outside
        the window (arq_frames.py), or None: it does not fit one frame (it goes as a packet)."""
        if 1 + len(message) + self.seal.OVERHEAD > MAX_FRAME:
            return None
        self.stats.channel_out += 1
        return self.seal.seal(bytes((CHANNEL,)) + message)

    def on_control(self, msg: bytes, now: float) -> None:
        """A control frame from the peer's receiver (ACK or RESYNC)."""
        if not msg or not msg[0] & CONTROL:
            self.stats.malformed += 1
            return
        body = self.seal.open(msg, self.stats)  # (it counts what it refuses)
        if body is None:
            return
        msg = body
        if msg == bytes((RESYNC,)):
            self._restart()
            return
        if msg[0] & ~BEHIND != ACK or len(msg) < 3:
            self.stats.malformed += 1
            return
        self.stats.acks_in += 1
        if msg[1] != self.epoch:
            self.stats.stale_acks += 1
            return
        if not self.established and msg[2] != self._base % SEQ_MOD:
            # The answer to our RESET expects a number of an earlier session of this epoch:
            # the receiver kept a session whose epoch ours, drawn at random, matched (1 in 255
            # after a restart); frames past half the sequence space from there were refused
            # till 13 timeouts began a new session (a mobile unreachable 8.4 s after its base's
            # restart). A new epoch at once.
            self.stats.epoch_clashes += 1
            self._restart()
            return
        if not self.established:
            self.established = True
            self._rto = max(self.min_rto, self._rto)
        cum = self._absolute(msg[2])
        if cum > self._next:
            self._ahead(cum)
            return
        self._ahead_of = None
        if cum > self._base:
            self._backoff = 1  # the peer hears us again
            self._silent_timeouts = 0
        newest_order = -1
        for seq in range(self._base, cum):
            newest_order = max(newest_order, self._acked(seq, now, cumulative=True))
        self._base = max(self._base, cum)
        for i, byte in enumerate(msg[3 : 3 + BITMAP_BYTES]):
            for bit in range(8):
                if byte >> bit & 1:
                    newest_order = max(newest_order, self._acked(cum + 1 + 8 * i + bit, now))
        # a frame sent before one that arrived, and not acknowledged, was lost
        lost = [
            s
            for s, f in self._flight.items()
            if not f.sacked and f.order < newest_order and s not in self._retransmit
        ]
        if lost:
            self._retransmit.extend(sorted(lost))
            self.stats.lost += len(lost)
        if newest_order >= 0:
            self._news_at = now
        if msg[0] & BEHIND and now - self._cut_at >= (self._srtt or self.min_rto):
            self.stats.slowdowns += 1  # at most once per round trip
            self.cwnd = max(self.MIN_CWND, self.cwnd / 2)
            self._cut_at = now

    # -- inside --------------------------------------------------------------------------------

    def _absolute(self, cum: int) -> int:
        """The absolute sequence ``cum`` (mod 128) stands for, from base on: in [base, next]
        for an ACK of what was sent."""
        return self._base + (cum - self._base) % SEQ_MOD

    def _ahead(self, seq: int) -> None:
        """An ACK whose cum (``seq``, absolute) is past next: stale, or ahead of what was sent.

        Ahead happens when a data frame damaged past the radio's CRC in its ARQ byte was
        buffered as a later frame (a phantom) and the gap below it filled: the receiver now
        expects ``cum`` and refuses every frame below it as a duplicate. Nothing in flight can
        reach it in this session any more, and waiting would only stall the link until the
        silent timeouts begin a new session. So the sender skips to ``cum`` and gives up what
        is in flight (the packet layer refuses what the phantom spoilt: docs/design.md §4).
        An old ACK (a channel that reorders or repeats) or one damaged past its CRC-8 can alias
        to "ahead" once; a phantom's shows in every ACK after it. So it takes the same ahead
        ``cum`` twice in a row, at most half the sequence space past ``base``."""
        if seq > self._base + MAX_WINDOW or self._ahead_of != seq:
            self._ahead_of = seq
            self.stats.stale_acks += 1
            return
        self.stats.phantoms += 1
        self._flight.clear()
        self._retransmit.clear()
        self._sendings.clear()
        self._base = self._next = seq
        self._ahead_of = None
        self._backoff = 1  # the peer hears us
        self._silent_timeouts = 0

    def _acked(self, seq: int, now: float, cumulative: bool = False) -> int:
        f = self._flight.pop(seq, None) if cumulative else self._flight.get(seq)
        if f is None or f.sacked:
            return -1
        f.sacked = not cumulative
        self.stats.acked += 1
        # Karn: a retransmitted frame's round trip is ambiguous, and so is one's whose ACK
        # waited behind a timeout (its ACK may have been lost and repeated)
        if f.sends == 1 and f.sent_at > self._last_timeout_at:
            self._sample(now - f.sent_at)
        self.cwnd = min(float(self.window), self.cwnd + 1.0)
        return f.order

    def _sample(self, rtt: float) -> None:
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - rtt)
            self._srtt = 0.875 * self._srtt + 0.125 * rtt
        self._rto = min(self.max_rto, max(self.min_rto, self._srtt + 4 * self._rttvar))

    #: Timeouts double the wait up to this factor: a lost burst of ACKs costs a few probes,
    #: never a wait of seconds (a frame is cheap, a stalled link is not).
    MAX_BACKOFF = 8
    #: Timeouts in a row with no progress after which a new session is begun.
    MAX_SILENT_TIMEOUTS = 12
    #: Losses halve the congestion window down to this many frames.
    MIN_CWND = 4.0

    @property
    def _timeout(self) -> float:
        return min(self.max_rto, (self._rto + ACK_DELAY) * self._backoff)

    def _check_timeout(self, now: float) -> None:
        oldest = self._flight.get(self._base)
        if oldest is None and self._flight:
            self._base = min(self._flight)
            oldest = self._flight[self._base]
        if oldest is not None and now - oldest.sent_at >= self._timeout:
            self.stats.timeouts += 1
            self._silent_timeouts += 1
            if self._silent_timeouts == 1:
                self._silent_since = now
            long_enough = now - self._silent_since >= self.restart_after_s
            if self._silent_timeouts > self.MAX_SILENT_TIMEOUTS and long_enough:
                # this long without an ACK of this session: the receiver may have lost it
                # (restarted, or taken a damaged frame for a RESET) and not said so
                self._restart()
                return
            # the window is not cut: only the receiver can tell a slow host from noise, and
            # says so (BEHIND); halving at each timeout left a lossy link a window of 4
            self._backoff = min(self._backoff * 2, self.MAX_BACKOFF)
            self._last_timeout_at = now
            if self._base not in self._retransmit:
                self._retransmit.appendleft(self._base)
                self.stats.lost += 1

    def _restart(self) -> None:
        """The receiver has no session: start one, sending what is unacknowledged again."""
        pending = [self._flight[s].frame for s in sorted(self._flight)]
        self._queue.extendleft(reversed(pending))
        self._flight.clear()
        self._retransmit.clear()
        self._sendings.clear()
        self._base = self._next = 0
        self._ahead_of = None
        self.epoch = self.epoch % 255 + 1
        self.established = False
        self._reset_sent_at = None
        self._silent_timeouts = 0
        self._backoff = 1
