"""The TX process's queues, sans-IO: one flow-fair queue per peer (fairqueue.py), and which
peer's packet goes next.

A base that serves several mobiles shares its downlink between them, not between their flows:
a mobile with eight flows gets no more air than one with one. Between the peers the rule is
the least air served (bytes sent, as in a virtual clock): the backlogged peer that has been
sent the fewest bytes goes next, and a peer that comes back from idle starts level with the
others (with the most served when none is busy), with no credit saved up. A peer whose
frames keep meeting MAX_RT (a mobile out of range, switched off) is backed off, 10 ms
doubling up to 1 s. While another peer has something to send it waits from its first MAX_RT;
alone, from its second in a row (``ALONE_AFTER``): one MAX_RT of a peer that answers (a
collision, a lossy channel with few retries) costs no idle air, but a peer that does not answer
is not sent one packet after another to lose (each packet that meets MAX_RT is given up: a
mobile whose RX process stalled for 0.2 s, alone on the downlink, lost 12 of 12 so). Its
packets age out of its own queue meanwhile (``queue_ms``). Time is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from longge.daemon.fairqueue import SOJOURN_EDGES_MS, FairQueue

BACKOFF_FIRST_S = 0.010
BACKOFF_MAX_S = 1.0
#: A peer alone with packets queued waits for its backoff's end once it has met this many
#: MAX_RT in a row.
ALONE_AFTER = 2


class PeerQueues:
    def __init__(self, queues: Sequence[FairQueue]) -> None:
        self.queues = list(queues)
        n = len(self.queues)
        self.served = [0] * n  # bytes sent to each peer while it was backlogged
        self.failures = [0] * n  # MAX_RT in a row, per peer
        self.backoff_until = [0.0] * n
        self.backoffs = [0] * n  # times each was backed off
        #: the queues' clock from the loop's time (a mobile that shares the uplink: its
        #: permit's, uplink.UplinkPermit.clock; else the time itself)
        self.clock: Callable[[float], float] = float
        #: when a packet was last queued (the loop's time): a mobile's answer came
        #: (uplink.UplinkPermit.awaits_answer)
        self.pushed_at = -math.inf

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues)

    def push(self, index: int, packet: bytes, now: float) -> None:
        if not len(self.queues[index]) and len(self.queues) > 1:
            # back from idle: level with the least served of the busy ones, no saved credit,
            # and next (a byte below them: a tie went to the lower index, so a ping for the
            # last mobile waited for a packet of each busy one, 44 ms beside two of them).
            # None busy: level with the most served, where the clock stood (a peer served
            # alone earlier waited for the others to catch up: a second of air, its pings
            # expired)
            busy = [s for i, s in enumerate(self.served) if len(self.queues[i])]
            level = min(busy) - 1 if busy else max(self.served)
            self.served[index] = max(self.served[index], level)
        self.queues[index].push(packet, self.clock(now))
        self.pushed_at = now

    def next_peer(self, now: float) -> int | None:
        """The peer whose packet goes next, or None: nothing queued."""
        if len(self.queues) == 1:
            return 0 if len(self.queues[0]) else None
        ready = [i for i, q in enumerate(self.queues) if len(q)]
        if not ready:
            return None
        awake = [i for i in ready if self.backoff_until[i] <= now]
        if not awake:  # (alone: only a peer that answered lately goes before its time)
            awake = [i for i in ready if self.failures[i] < ALONE_AFTER]
            if not awake:
                return None
        return min(awake, key=lambda i: (self.served[i], i))

    def sendable(self, now: float) -> bool:
        """Is a packet queued that may go now (``next_peer``)?"""
        return self.next_peer(now) is not None

    def wake_at(self, now: float) -> float | None:
        """The end of the backoff that keeps a queued packet waiting (None if none does, or
        one may go now: its news wakes the pump)."""
        if self.sendable(now):
            return None
        ends = [
            self.backoff_until[i]
            for i, q in enumerate(self.queues)
            if len(q) and self.backoff_until[i] > now
        ]
        return min(ends) if ends else None

    def pop(self, index: int, now: float) -> bytes | None:
        """Peer ``index``'s next packet (None: what it had expired)."""
        packet = self.queues[index].pop(self.clock(now))
        if packet is not None:
            self.served[index] += len(packet)
        return packet

    def pop_sparse(
        self, index: int, now: float, max_len: int, busy: bytes, fast_len: int | None = None
    ) -> bytes | None:
        """Peer ``index``'s next packet if it is a sparse flow's, or one below its fair share
        (FairQueue.pop_sparse)."""
        packet = self.queues[index].pop_sparse(self.clock(now), max_len, busy, fast_len)
        if packet is not None:
            self.served[index] += len(packet)
        return packet

    def last_key(self, index: int) -> bytes:
        """The flow of peer ``index``'s packet popped last."""
        return self.queues[index].last_key

    def max_rt(self, index: int, now: float) -> None:
        self.failures[index] += 1
        wait = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** min(self.failures[index] - 1, 10))
        self.backoff_until[index] = now + wait
        self.backoffs[index] += 1

    def delivered(self, index: int) -> None:
        """A frame to peer ``index`` was acknowledged: it answers again."""
        self.failures[index] = 0
        self.backoff_until[index] = 0.0

    def stats(self, now: float) -> dict[str, Any]:
        """The queues' part of a TX process's counters (one queue: as FairQueue's own)."""
        qs = self.queues
        drops: dict[str, int] = {}
        for q in qs:
            for k, v in q.drops.items():
                drops[k] = drops.get(k, 0) + v
        return {
            "queue_packets": len(self),
            "queue_bytes": sum(q.bytes for q in qs),
            "queue_limit_bytes": sum(q.limit_bytes for q in qs),
            "queue_oldest_ms": round(max(q.oldest_age(self.clock(now)) for q in qs) * 1000, 1),
            "queue_drops": drops,
            "queue_shared": sum(q.shared for q in qs),
            # packets pushed while their flow was below its fair share (served first)
            "queue_interactive": sum(q.interactive for q in qs),
            "queue_delay_hist": [sum(b) for b in zip(*(q.sojourn for q in qs), strict=True)],
            "queue_delay_edges_ms": list(SOJOURN_EDGES_MS),
        }
