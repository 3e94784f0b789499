"""What stream mode's ARQ sender sends again before its retransmission timer (docs/design.md
§4): a frame whose ACK is overdue while the peer answers (a probe), a small packet's last
frame (the tail probe), and the frames it is told to (``resend_unacked``, ``not_sent``). A
mixin of ``ArqSender``'s (``arq.py``, which has the window, the timers and the ACKs); sans-IO,
time passed in."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from longge.protocol.arq_frames import ACK_DELAY, ArqStats


@dataclass
class InFlight:
    """A frame sent and not yet acknowledged cumulatively."""

    frame: bytes
    sent_at: float
    order: int  # transmission order of its latest sending
    sends: int = 1
    #: selectively acknowledged: the receiver holds it, but has not delivered it yet (it
    #: waits for a hole), so a receiver that restarts loses it: kept until cum passes it
    sacked: bool = False


class SendingAgain:
    """ArqSender's probes and resendings (its state, declared here, is ArqSender's)."""

    min_rto: float
    stats: ArqStats
    tail_after: float | None
    _queue: deque[bytes]
    _flight: dict[int, InFlight]
    _retransmit: deque[int]
    _sendings: deque[tuple[int, int]]
    _srtt: float | None
    _rto: float
    _news_at: float
    _order: int
    _tail_probed: int
    _since_idle: int

    def _send_again(self, seq: int, f: InFlight, now: float) -> bytes:
        raise NotImplementedError  # (ArqSender's: the frame out again, counted)

    #: s: frames are probed for this long after the last ACK with news (a peer that answers;
    #: a dead one gets the timeouts' backed-off single frames only)
    PROBE_WHILE_S = 0.5

    def _oldest_sending(self) -> InFlight | None:
        """The unacknowledged frame sent longest ago (stale entries dropped)."""
        while self._sendings:
            order, seq = self._sendings[0]
            f = self._flight.get(seq)
            if f is not None and f.order == order and not f.sacked:
                return f
            self._sendings.popleft()
        return None

    def _probe_at(self) -> float | None:
        """When the oldest frame in flight is overdue and may be probed, if ever."""
        f = self._oldest_sending()
        if f is None:
            return None
        at = f.sent_at + self._rto + ACK_DELAY  # (not backed off: the peer answers)
        return at if at <= self._news_at + self.PROBE_WHILE_S else None

    #: A small packet sent from idle (at most this many frames sent since nothing was in
    #: flight, nothing queued) has no frame behind its last whose ACK would show it lost: the
    #: newest goes again after ``2 x srtt`` (at least TAIL_MIN_S) instead of the timer's wait
    #: (RFC 8985's tail loss probe). A ping's request that lost its last frame on a shared
    #: channel waited 14 ms. A bulk flow's tail is left to the timers: its receiver holds its
    #: ACK up to ACK_DELAY, and probes there would be sent in vain.
    TAIL_FRAMES = 9
    TAIL_MIN_S = 0.002

    def _tail(self) -> tuple[float, int] | None:
        """(when, seq) of the tail's probe, if one is due some time: once per tail."""
        if self._queue or self._srtt is None or not self._flight:
            return None
        if self._since_idle > self.TAIL_FRAMES:
            return None
        order, seq = max((f.order, s) for s, f in self._flight.items())
        if order <= self._tail_probed or self._flight[seq].sacked:
            return None
        wait = max(self.TAIL_MIN_S, 2 * self._srtt) if self.tail_after is None else self.tail_after
        return self._flight[seq].sent_at + wait, seq

    def _probe(self, now: float) -> bytes | None:
        """Nothing new may go (the window is full, or nothing is queued): send again the frame
        sent longest ago, if its ACK is overdue (the timer's wait) while the peer answers.
        Under heavy loss the timer alone leaves the air idle: a hole is found only when a
        frame sent after the lost one is acknowledged, and a retransmission lost again, or a
        lost ACK, waits for the timer, one frame at a time (at 50 % frame loss both ways,
        LongGe's ARQ carried half of what the channel let through; docs/design.md §4). A
        small packet's tail goes again sooner (``_tail``)."""
        tail = self._tail()
        if tail is not None and now >= tail[0]:
            self.stats.tail_probes += 1
            self._tail_probed = self._order
            return self._send_again(tail[1], self._flight[tail[1]], now)
        at = self._probe_at()
        if at is None or now < at:
            return None
        _, seq = self._sendings.popleft()  # (the live front _probe_at looked at)
        self.stats.probes += 1
        return self._send_again(seq, self._flight[seq], now)

    def resend_unacked(self, now: float) -> int:
        """Send every frame in flight for at least ``min_rto`` that the receiver has not said
        it holds again, next, oldest first (no timeout counted): before a frame the receiver
        must have at once, when its ACKs may have been lost (a mobile's, outside its grant:
        docs/design.md §4, "Several mobiles"). Younger frames' ACKs may be on their way (a
        mobile loaded on the downlink has a window of them: sent again before each of its
        grants, they cost a loaded downlink a tenth). How many."""
        again = [
            s
            for s, f in sorted(self._flight.items())
            if not f.sacked and s not in self._retransmit and now - f.sent_at >= self.min_rto
        ]
        self._retransmit.extend(again)
        return len(again)

    def not_sent(self, count: int) -> None:
        """The last ``count`` frames handed out never went on air (the chip gave up on them:
        a frame sent asking for the chip's ACK, daemon/aside.py): they go again first,
        no loss counted."""
        recent = {s for _, s in list(self._sendings)[-count:]} if count > 0 else set()
        again = sorted(s for s in recent if s in self._flight and s not in self._retransmit)
        self._retransmit.extendleft(reversed(again))
