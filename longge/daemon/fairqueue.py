"""The link's transmit queue, sans-IO: flow-fair, bounded in bytes and in time.

Latency under overload is set here, on purpose, not by a 500-packet kernel queue
(docs/design.md §1). Packets are sorted into flows by their addresses, protocol and ports (the
exact key, not a hash into a few buckets: two flows never share a queue, so a probe never waits
behind a bulk flow that happened to land in its bucket; a flow exists while it has packets or
a turn), and served by deficit round robin with fq_codel's trick: a flow that was idle (a ping,
a DNS query, a TCP ACK) joins the "new" list and is served before the bulk flows. Two bounds:

- bytes: at most ``limit_bytes`` queued; on overflow the head of the fattest flow is dropped;
- time: a packet older than ``max_age`` seconds when its turn comes is dropped.

Both drops are counted. Time is passed in; nothing here reads a clock.

Both bounds grow with the flows that have packets queued (``room_per_flow`` bytes each, for at
most ROOM_FLOWS flows; the age bound in proportion): ``limit_bytes`` is what the air carries in
``max_age``, and N bulk TCP flows need room for a few segments each, or their windows stay
below the four segments a fast retransmit needs and they share the link by timeouts, unevenly
(docs/design.md §1, "The queue's bounds"). A sparse flow does not wait for that room: it is
served from the new list.

"New" is not enough on this link, where one 1400-byte packet is some 22 ms of ESB air: a flow
that sends every 20 ms (a call, a game) still has a packet listed when its next comes, so it
was never new again and waited behind the bulk packets. So a flow is also served first while
it is **below its fair share** (``interactive``; the rates and the share:
protocol/fair_share.py): its rate (the bytes it pushed, averaged over a second; a young
flow's over its age) under 0.9 of its max-min fair share of the link's drain rate (measured
while packets wait) among the flows heard in the last two seconds.
Each packet it pushes so goes first (``pop``; of several such flows the slowest first) and may
go between a bulk packet's frames (``pop_sparse``), its deficit paying as in the round robin.
A flow at or above its share is not: a bulk flow split into many is as many flows each at its
share, a flow that sends more than its share loses the place as its rate shows it, and a
flow's first packets read as fast (the place is earned: ever new flows get none). Until the
drain rate is known (nothing has waited yet) only the new list holds.

At most MAX_FLOWS flows are kept apart (fq_codel's default count of queues): the packets of
flows beyond that share one queue (counted, ``shared``), so that neither the table nor the
overflow's search for the fattest flow grows with a scan or a flood of new flows.
"""

from __future__ import annotations

import bisect
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import islice

from longge.protocol.fair_share import FairShare


def flow_key(packet: bytes) -> bytes:
    """Flow of an IPv4/IPv6 packet: addresses, protocol and (if present) ports."""
    if not packet:
        return b""
    version = packet[0] >> 4
    if version == 4 and len(packet) >= 20:
        ihl = (packet[0] & 0x0F) * 4
        proto = packet[9]
        key = b"4" + packet[12:20] + bytes((proto,))
        frag = int.from_bytes(packet[6:8], "big") & 0x1FFF
        if proto in (6, 17) and frag == 0 and len(packet) >= ihl + 4:
            key += packet[ihl : ihl + 4]
        return key
    if version == 6 and len(packet) >= 40:
        proto = packet[6]
        key = b"6" + packet[8:40] + bytes((proto,))
        if proto in (6, 17) and len(packet) >= 44:
            key += packet[40:44]
        return key
    return b"?"


@dataclass
class _Flow:
    key: bytes
    packets: deque[tuple[bytes, float]] = field(default_factory=deque)
    bytes: int = 0
    deficit: int = 0
    listed: bool = False
    #: packets it pushed while below its fair share, not yet served (``_fast`` lists it)
    fast: int = 0


#: Flows kept apart at once; more share the queue SHARED_KEY (no packet's own key: those
#: start with "4", "6" or "?").
MAX_FLOWS = 1024
SHARED_KEY = b"*"

#: Flows with packets queued that the bounds grow for (beyond them, a scan or a flood of new
#: flows adds nothing: the bounds stay at most ROOM_FLOWS * room_per_flow bytes).
ROOM_FLOWS = 16

#: How many flows of the new list pop_sparse looks at (it runs once per frame sent).
SPARSE_LOOK = 8

#: A flow with more packets than this queued (the one just pushed counted) is not interactive.
INTERACTIVE_QUEUED = 2
#: Upper edges (ms) of the queueing-delay histogram; the last bin is everything above.
SOJOURN_EDGES_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


class FairQueue:
    def __init__(
        self,
        limit_bytes: int,
        max_age: float,
        quantum: int = 1514,
        fair: bool = True,
        room_per_flow: int = 0,
    ) -> None:
        """``fair=False``: one FIFO for all packets (same bounds), for comparison.
        ``room_per_flow``: bytes each flow with packets queued may hold before the bounds
        count as reached (0: the bounds are fixed)."""
        self.fair = fair
        self.base_limit_bytes = limit_bytes
        self.base_max_age = max_age
        self.room_per_flow = room_per_flow
        self.limit_bytes = limit_bytes
        self.max_age = max_age
        self.backlogged = 0  # flows with packets queued
        self.quantum = quantum
        self.bytes = 0
        self.packets = 0
        self.drops: Counter[str] = Counter()
        self.shared = 0  # packets of flows beyond MAX_FLOWS, queued together
        #: How long the bytes sent waited here (bytes per SOJOURN_EDGES_MS bin): weighted by
        #: bytes, so that a bulk flow's delay is not hidden by many small sparse packets.
        self.sojourn = [0] * (len(SOJOURN_EDGES_MS) + 1)
        self._flows: dict[bytes, _Flow] = {}
        self._new: deque[_Flow] = deque()
        self._old: deque[_Flow] = deque()
        #: the flow of the packet ``pop`` or ``pop_sparse`` returned last
        self.last_key = b""
        #: flows below their fair share with packets pushed so (``_Flow.fast``), in order
        self._fast: deque[_Flow] = deque()
        self.interactive = 0  # packets pushed below their flow's fair share (counted)
        #: each flow's rate and the fair share (protocol/fair_share.py)
        self.share = FairShare(MAX_FLOWS)

    def __len__(self) -> int:
        return self.packets

    @property
    def flow_count(self) -> int:
        """Flows with packets queued or a turn pending (idle flows are forgotten)."""
        return len(self._flows)

    def push(self, packet: bytes, now: float) -> None:
        key = flow_key(packet) if self.fair else b""
        flow = self._flows.get(key)
        if flow is None:
            # (while the shared queue lasts, new flows join it: a flow of it given its own
            # queue again would overtake its own older packets)
            if len(self._flows) >= MAX_FLOWS or SHARED_KEY in self._flows:
                key = SHARED_KEY
                self.shared += 1
                flow = self._flows.get(key)
            if flow is None:
                flow = self._flows[key] = _Flow(key)
        if not flow.packets:
            self._backlog(+1)
        flow.packets.append((packet, now))
        flow.bytes += len(packet)
        self.bytes += len(packet)
        self.packets += 1
        if not flow.listed:
            flow.listed = True
            flow.deficit = self.quantum
            self._new.append(flow)
        # (a flow with packets standing in the queue asks for more than it is served: at its
        # share or above, whatever its rate reads; one listed besides this: a call's on a
        # link where a bulk packet outlasts its interval)
        below = self.fair and key != SHARED_KEY and self.share.asked(key, len(packet), now)
        if below and len(flow.packets) <= INTERACTIVE_QUEUED:
            self.interactive += 1
            if not flow.fast:
                self._fast.append(flow)
            flow.fast += 1
        while self.bytes > self.limit_bytes:
            fattest = max(self._flows.values(), key=lambda f: f.bytes)
            self._drop_head(fattest)
            self.drops["overflow"] += 1

    def pop(self, now: float) -> bytes | None:
        packet = self._pop(now)
        self._retire_if_empty()
        return packet

    def _retire_if_empty(self) -> None:
        """Nothing queued: every flow is idle, and goes (fq_codel retires them at its next
        dequeue, which finds them empty; nothing here dequeues from an empty queue). So the
        next packet of a sparse flow is new again. Before, a mobile's ping flow, alone in its
        queue, stayed listed after its packet went: pop_sparse spent its deficit, and after
        18 pings it no longer went between the frames of another mobile's packet (a ping to
        an idle mobile beside downlink load waited 13.6 ms in the median on the base)."""
        if self.packets or not self._flows:
            return
        for flow in self._flows.values():
            flow.listed = False
            flow.fast = 0
        self._flows.clear()
        self._new.clear()
        self._old.clear()
        self._fast.clear()

    def _pop(self, now: float) -> bytes | None:
        while self._fast:  # (flows below their fair share, each packet pushed so)
            packet = self._take_fast(self._slowest_fast(), now)
            if packet is not None:
                return packet
        while True:
            if self._new:
                lst = self._new
            elif self._old:
                lst = self._old
            else:
                return None
            flow = lst[0]
            if flow.packets and flow.deficit < len(flow.packets[0][0]):
                # Used up its turn (classic DRR: serve only what the deficit covers).
                flow.deficit += self.quantum
                lst.popleft()
                self._old.append(flow)
                continue
            if not flow.packets:
                lst.popleft()
                if lst is self._new:
                    self._old.append(flow)  # as fq_codel: no starving the old list
                else:
                    flow.listed = False
                    del self._flows[flow.key]  # idle: forgotten until its next packet
                continue
            packet = self._take(flow, now)
            if packet is not None:
                return packet

    def pop_sparse(
        self, now: float, max_len: int, busy: bytes, fast_len: int | None = None
    ) -> bytes | None:
        """The next packet of the first new flow (one that had nothing queued: a ping, a
        keystroke, an ACK; among the first SPARSE_LOOK) whose next packet is at most
        ``max_len`` bytes, not of flow ``busy`` (whose packet is on its way: never overtaken);
        else None. For a packet that may go between
        the frames of the one on its way (frame.py, "Lanes"). It is served as ``pop`` would
        serve it next: its flow's deficit pays, and a new flow has one quantum before it
        joins the old ones, so sparse flows cannot starve the bulk ones (fq_codel's bound).
        A flow below its fair share (``interactive``) goes first, its packet up to
        ``fast_len`` bytes (``max_len`` if None): its rate bounds what it takes."""
        if not self.fair:
            return None
        longest = max_len if fast_len is None else fast_len
        for flow in list(islice(self._fast, SPARSE_LOOK)):  # (_take_fast may remove it)
            if flow.key == busy or not flow.packets or len(flow.packets[0][0]) > longest:
                continue
            packet = self._take_fast(flow, now)
            if packet is not None:
                self._retire_if_empty()
                return packet
        for flow in islice(self._new, SPARSE_LOOK):
            if not flow.packets or flow.key == busy:
                continue  # (an emptied new flow moves on at the next pop; the busy one waits)
            size = len(flow.packets[0][0])
            if size > max_len or flow.deficit < size:
                continue
            packet = self._take(flow, now)
            if packet is not None:
                self._retire_if_empty()
                return packet
        self._retire_if_empty()
        return None

    def _slowest_fast(self) -> _Flow:
        """Of the first SPARSE_LOOK flows below their share, the one whose rate is lowest:
        a bulk flow that is below its share too (a long path's TCP, its window the limit)
        does not hold a call's packet behind its own."""
        return min(islice(self._fast, SPARSE_LOOK), key=lambda f: self.share.rate(f.key))

    def _take_fast(self, flow: _Flow, now: float) -> bytes | None:
        """The head of ``flow``, a packet it pushed below its fair share (or one before it:
        a flow's order holds), served; the flow leaves ``_fast`` when it has no more such."""
        flow.fast = min(flow.fast, len(flow.packets))  # (some dropped, or served in turn)
        packet = None
        if flow.fast > 0:
            flow.fast -= 1
            packet = self._take(flow, now)
        if flow.fast <= 0:
            self._fast.remove(flow)  # (among the first SPARSE_LOOK)
        return packet

    def _take(self, flow: _Flow, now: float) -> bytes | None:
        """The head of ``flow``, served; None: it was too old (dropped, counted)."""
        max_age = self.max_age  # (the bound this packet waited under, before it leaves)
        packet, since = self._drop_head(flow)
        if now - since > max_age:
            self.drops["expired"] += 1
            return None
        flow.deficit -= len(packet)
        self.share.departed(len(packet), now, self.packets > 0)
        self.last_key = flow.key
        self.sojourn[bisect.bisect_left(SOJOURN_EDGES_MS, (now - since) * 1000)] += len(packet)
        return packet

    def _drop_head(self, flow: _Flow) -> tuple[bytes, float]:
        packet, since = flow.packets.popleft()
        flow.bytes -= len(packet)
        self.bytes -= len(packet)
        self.packets -= 1
        if not flow.packets:
            self._backlog(-1)
        return packet, since

    def _backlog(self, change: int) -> None:
        """Count a flow that got its first packet or lost its last, and set the bounds."""
        self.backlogged += change
        room = min(self.backlogged, ROOM_FLOWS) * self.room_per_flow
        self.limit_bytes = max(self.base_limit_bytes, room)
        self.max_age = self.base_max_age * self.limit_bytes / self.base_limit_bytes

    @property
    def drain_rate(self) -> float | None:
        """What the link carried (bytes a second) while packets waited (FairShare)."""
        return self.share.drain_rate

    def oldest_age(self, now: float) -> float:
        ages = [now - f.packets[0][1] for f in self._flows.values() if f.packets]
        return max(ages, default=0.0)
