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

At most MAX_FLOWS flows are kept apart (fq_codel's default count of queues): the packets of
flows beyond that share one queue (counted, ``shared``), so that neither the table nor the
overflow's search for the fattest flow grows with a scan or a flood of new flows.
"""

from __future__ import annotations

import bisect
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import islice


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


#: Flows kept apart at once; more share the queue SHARED_KEY (no packet's own key: those
#: start with "4", "6" or "?").
MAX_FLOWS = 1024
SHARED_KEY = b"*"

#: Flows with packets queued that the bounds grow for (beyond them, a scan or a flood of new
#: flows adds nothing: the bounds stay at most ROOM_FLOWS * room_per_flow bytes).
ROOM_FLOWS = 16

#: How many flows of the new list pop_sparse looks at (it runs once per frame sent).
SPARSE_LOOK = 8

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
        self._flows.clear()
        self._new.clear()
        self._old.clear()

    def _pop(self, now: float) -> bytes | None:
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

    def pop_sparse(self, now: float, max_len: int, busy: bytes) -> bytes | None:
        """The next packet of the first new flow (one that had nothing queued: a ping, a
        keystroke, an ACK; among the first SPARSE_LOOK) whose next packet is at most
        ``max_len`` bytes, not of flow ``busy`` (whose packet is on its way: never overtaken);
        else None. For a packet that may go between
        the frames of the one on its way (frame.py, "Lanes"). It is served as ``pop`` would
        serve it next: its flow's deficit pays, and a new flow has one quantum before it
        joins the old ones, so sparse flows cannot starve the bulk ones (fq_codel's bound)."""
        if not self.fair:
            return None
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

    def _take(self, flow: _Flow, now: float) -> bytes | None:
        """The head of ``flow``, served; None: it was too old (dropped, counted)."""
        max_age = self.max_age  # (the bound this packet waited under, before it leaves)
        packet, since = self._drop_head(flow)
        if now - since > max_age:
            self.drops["expired"] += 1
            return None
        flow.deficit -= len(packet)
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

    def oldest_age(self, now: float) -> float:
        ages = [now - f.packets[0][1] for f in self._flows.values() if f.packets]
        return max(ages, default=0.0)
