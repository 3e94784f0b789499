"""The link's queue: fair between flows, sparse flows first, bounded in bytes and in time."""

from __future__ import annotations

import struct

import pytest

from longge.daemon.fairqueue import MAX_FLOWS, ROOM_FLOWS, SOJOURN_EDGES_MS, FairQueue, flow_key


def udp(src: int, dst_port: int, size: int, tag: int = 0) -> bytes:
    """A minimal IPv4/UDP packet from 10.0.0.src to 10.0.0.1:dst_port."""
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        size,
        tag,
        0,
        64,
        17,
        0,
        bytes([10, 0, 0, src]),
        bytes([10, 0, 0, 1]),
    )
    ports = struct.pack("!HH", 40000, dst_port)
    return (ip + ports).ljust(size, b"\0")


def drain(q: FairQueue, now: float = 0.0) -> list[bytes]:
    out = []
    while (p := q.pop(now)) is not None:
        out.append(p)
    return out


def test_flows_are_told_apart_by_addresses_and_ports() -> None:
    assert flow_key(udp(2, 5201, 100)) == flow_key(udp(2, 5201, 1400, tag=9))
    assert flow_key(udp(2, 5201, 100)) != flow_key(udp(2, 5202, 100))
    assert flow_key(b"\x60" + bytes(60)) != flow_key(b"\x45" + bytes(60))
    assert flow_key(b"") == b"" and flow_key(b"\x12junk") == b"?"


def test_no_probe_flow_ever_shares_the_bulk_flows_queue() -> None:
    # With flows hashed into a few buckets, some of these ports would land in the bulk flow's
    # bucket and wait behind its whole queue (seen: lTest probes at 53 ms instead of 15).
    for port in range(1, 2001):
        q = FairQueue(limit_bytes=1_000_000, max_age=10)
        for i in range(10):
            q.push(udp(2, 5201, 1400, tag=i), 0)
        q.pop(0)  # bulk is being served
        probe = udp(2, port, 88) if port != 5201 else udp(3, port, 88)
        q.push(probe, 0)
        assert q.pop(0) == probe, f"probe to port {port} waited behind the bulk flow"


def test_idle_flows_are_forgotten() -> None:
    q = FairQueue(limit_bytes=1_000_000, max_age=10)
    for port in range(1, 5001):  # many short flows, one packet each
        q.push(udp(4, port, 100), 0)
        assert q.pop(0) is not None
    assert q.pop(0) is None
    assert q.flow_count == 0 and len(q) == 0


def test_a_sparse_flow_overtakes_the_bulk_flow() -> None:
    q = FairQueue(limit_bytes=1_000_000, max_age=10)
    bulk = [udp(2, 5201, 1400, tag=i) for i in range(20)]
    for p in bulk:
        q.push(p, 0)
    q.pop(0)  # bulk is being served
    ping = udp(3, 7, 84)
    q.push(ping, 0)
    assert q.pop(0) == ping


def test_two_bulk_flows_share_in_bytes() -> None:
    q = FairQueue(limit_bytes=1_000_000, max_age=10)
    for i in range(30):
        q.push(udp(2, 1000, 1400, tag=i), 0)
        q.push(udp(4, 2000, 700, tag=i), 0)
        q.push(udp(4, 2000, 700, tag=100 + i), 0)
    first = [drain_one for drain_one in drain(q)[:40]]
    big = sum(len(p) for p in first if flow_key(p) == flow_key(udp(2, 1000, 1400)))
    small = sum(len(p) for p in first) - big
    assert abs(big - small) <= 1400 * 2


def test_overflow_drops_from_the_fattest_flow() -> None:
    q = FairQueue(limit_bytes=10 * 1400, max_age=10)
    for i in range(20):
        q.push(udp(2, 1000, 1400, tag=i), 0)
    ping = udp(3, 7, 84)
    q.push(ping, 0)
    assert q.bytes <= 10 * 1400
    assert q.drops["overflow"] == 11
    assert ping in drain(q)


def test_each_bulk_flow_has_room_for_a_few_packets_whatever_the_budget() -> None:
    # 8 TCP flows behind a budget of 5 packets kept each flow's window below the 4 segments a
    # fast retransmit needs: they shared the link by timeouts (Jain 0.95, issue 43)
    room = 2 * 1514
    q = FairQueue(limit_bytes=5 * 1400, max_age=0.1, room_per_flow=room)
    for port in range(1000, 1008):
        for i in range(2):
            q.push(udp(2, port, 1400, tag=i), 0)
    assert q.drops["overflow"] == 0 and len(q) == 16
    assert q.limit_bytes == 8 * room and q.max_age == pytest.approx(0.1 * 8 * room / 7000)
    # the third packet of every flow is beyond its room: dropped, from the fattest flow
    for port in range(1000, 1008):
        q.push(udp(2, port, 1400, tag=2), 0)
    assert q.drops["overflow"] >= 4 and q.bytes <= q.limit_bytes
    # a packet that waited a DRR round of 8 flows (longer than the budget's 0.1 s) is sent
    assert q.pop(0.2) is not None and q.drops["expired"] == 0
    drain(q, 0.2)
    assert q.limit_bytes == 5 * 1400 and q.max_age == 0.1  # back to the budget when idle
    # one flow alone gets no more than the budget (one UDP flood: latency as before)
    for i in range(20):
        q.push(udp(2, 1000, 1400, tag=i), 1.0)
    assert q.bytes <= 5 * 1400 and q.limit_bytes == 5 * 1400


def test_the_room_stops_growing_beyond_room_flows() -> None:
    q = FairQueue(limit_bytes=5 * 1400, max_age=0.1, room_per_flow=3000)
    for port in range(1, 5 * ROOM_FLOWS):  # a scan: a flow per packet
        q.push(udp(2, port, 1400), 0)
    assert q.limit_bytes == ROOM_FLOWS * 3000 and q.bytes <= ROOM_FLOWS * 3000


def test_packets_older_than_the_budget_are_dropped_when_their_turn_comes() -> None:
    q = FairQueue(limit_bytes=1_000_000, max_age=0.1)
    q.push(udp(2, 1000, 500), 0.0)
    q.push(udp(2, 1000, 500, tag=1), 0.05)
    assert q.pop(0.12) == udp(2, 1000, 500, tag=1)
    assert q.drops["expired"] == 1
    assert len(q) == 0 and q.bytes == 0


def test_fifo_mode_keeps_arrival_order_across_flows() -> None:
    q = FairQueue(limit_bytes=1_000_000, max_age=10, fair=False)
    bulk = [udp(2, 5201, 1400, tag=i) for i in range(5)]
    for p in bulk:
        q.push(p, 0)
    ping = udp(3, 7, 84)
    q.push(ping, 0)
    assert drain(q) == [*bulk, ping]  # the ping waits behind the bulk flow


def test_queueing_delay_is_counted_in_bytes_per_bin() -> None:
    q = FairQueue(100_000, max_age=1.0)
    q.push(b"x" * 1000, 0.0)
    q.push(b"y" * 60, 0.0)
    assert q.pop(0.030) is not None and q.pop(0.0305) is not None  # both waited 30 ms
    bin_30ms = SOJOURN_EDGES_MS.index(50)  # (20, 50] ms
    assert q.sojourn[bin_30ms] == 1060 and sum(q.sojourn) == 1060
    q.push(b"z" * 500, 1.0)
    assert q.pop(1.0) is not None
    assert q.sojourn[0] == 500  # no wait: first bin


def test_a_flood_of_new_flows_keeps_the_table_bounded_and_the_probe_served() -> None:
    """A scan through a full queue: each packet a new flow. Once each one stayed in the table
    (emptied by overflow, waiting for its turn) and every push searched them all for the
    fattest (36 ms for a 64-packet read at 10 000 flows). Past MAX_FLOWS they share a queue."""
    q = FairQueue(limit_bytes=100 * 1400, max_age=10)
    for i in range(100):
        q.push(udp(2, 5201, 1400, tag=i), 0)  # a bulk flow fills the queue
    for port in range(1, 10_001):
        q.push(udp(5, port, 100), 0)  # the scan
        assert q.flow_count <= MAX_FLOWS + 1 and q.bytes <= q.limit_bytes
    assert q.shared > 0 and q.drops["overflow"] > 0
    probe = udp(3, 7, 88)
    q.push(probe, 0)  # the table is full: it queues in the shared flow, behind the scan
    out = drain(q)
    assert out.count(probe) == 1
    assert q.packets == 0 and q.bytes == 0 and q.flow_count == 0  # all served, all forgotten


def test_every_flow_keeps_its_order_when_flows_outnumber_the_queues(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Random pushes and pops over more flows than the queue keeps apart (4 here): each flow's
    packets leave in the order they came. Once a flow of the shared queue got a queue of its
    own as a slot freed, and its new packets overtook its older ones (TCP: needless resends)."""
    import random

    from longge.daemon import fairqueue

    monkeypatch.setattr(fairqueue, "MAX_FLOWS", 4)
    for seed in range(200):
        rnd = random.Random(seed)
        q = FairQueue(limit_bytes=1_000_000, max_age=10)
        sent: dict[int, int] = {}
        got: dict[int, list[int]] = {}
        for _ in range(300):
            if rnd.random() < 0.55:
                flow = rnd.randrange(10)
                sent[flow] = sent.get(flow, 0) + 1
                q.push(udp(flow + 1, 5000, rnd.choice((100, 1400)), tag=sent[flow]), 0)
            elif (p := q.pop(0)) is not None:
                got.setdefault(p[15] - 1, []).append(int.from_bytes(p[4:6], "big"))
        for p in drain(q):
            got.setdefault(p[15] - 1, []).append(int.from_bytes(p[4:6], "big"))
        for flow, tags in got.items():
            assert tags == sorted(tags), (seed, flow, tags)
        assert q.flow_count <= 5  # the 4 kept apart and the shared one


def test_a_sparse_flows_packet_may_go_between_a_bulk_packets_frames() -> None:
    """pop_sparse (frame-level preemption): while a bulk packet is on its way, the next packet
    of a new flow (a ping) is served if it is small, and never one of the flow whose packet
    is on its way (it would overtake it), never a big one, never from a plain FIFO."""
    q = FairQueue(100_000, 1.0)
    bulk = [udp(2, 5201, 1400, tag=i) for i in range(3)]
    for p in bulk:
        q.push(p, 0.0)
    assert q.pop(0.0) == bulk[0]
    busy = q.last_key
    assert busy == flow_key(bulk[0])
    assert q.pop_sparse(0.0, 256, busy) is None  # (only bulk waits)
    ping = udp(3, 7, 84)
    q.push(ping, 0.0)
    assert q.pop_sparse(0.0, 256, busy) == ping and q.last_key == flow_key(ping)
    assert q.pop_sparse(0.0, 256, busy) is None
    q.push(udp(4, 53, 300), 0.0)  # sparse, but too big to go between frames
    assert q.pop_sparse(0.0, 256, busy) is None
    same = udp(2, 5201, 60, tag=9)  # the busy flow's own small packet: waits its turn
    q2 = FairQueue(100_000, 1.0)
    q2.push(same, 0.0)
    assert q2.pop_sparse(0.0, 256, flow_key(same)) is None
    fifo = FairQueue(100_000, 1.0, fair=False)
    fifo.push(bulk[0], 0.0)
    fifo.pop(0.0)
    fifo.push(ping, 0.0)
    assert fifo.pop_sparse(0.0, 256, b"") is None
    # what pop_sparse served is not served again; the rest keeps its order
    assert drain(q) == [udp(4, 53, 300), *bulk[1:]]


def test_sparse_packets_cannot_starve_the_bulk_flow() -> None:
    """A flow that keeps sending small packets back to back is no longer new after one
    quantum: pop_sparse then leaves it to pop's round robin."""
    q = FairQueue(100_000, 1.0)
    q.push(udp(2, 5201, 1400), 0.0)
    q.pop(0.0)
    busy = q.last_key
    for i in range(100):
        q.push(udp(3, 7, 84, tag=i), 0.0)
    served = 0
    while q.pop_sparse(0.0, 256, busy) is not None:
        served += 1
    assert served == q.quantum // 84  # one quantum's worth, then it waits as others do


def test_a_ping_alone_in_its_queue_is_new_at_each_packet() -> None:
    """A mobile's queue at the base that holds only its ping flow (the base sends another
    mobile's bulk meanwhile): each ping leaves through pop_sparse and the queue is empty
    again, so the next ping is a new flow's, as fq_codel would have it (its dequeue retires
    empty flows). Before, the flow stayed listed with its deficit spent: after a quantum's
    worth of pings (18) none could go between the other mobile's frames any more."""
    q = FairQueue(100_000, 1.0)
    for i in range(3 * q.quantum // 84):
        q.push(udp(3, 7, 84, tag=i), 0.05 * i)
        assert q.pop_sparse(0.05 * i, 256, b"") is not None, i
        assert len(q) == 0 and q.flow_count == 0


def run_link(
    q: FairQueue,
    bulk_flows: int,
    interactive: tuple[float, int] | None,
    seconds: float,
    capacity: float = 63_500.0,
    greedy: tuple[int, float] | None = None,
    settle: float = 3.0,
) -> dict[str, list[float]]:
    """The queue in front of a link that drains ``capacity`` bytes a second, one packet at a
    time: ``bulk_flows`` flows that keep four 1400-byte packets queued each (TCP's way: one
    more as one leaves); ``interactive``: (interval, size) of a flow that sends on a clock;
    ``greedy``: (port, bytes a second) of a UDP flow that sends 1400-byte packets at its own
    rate. Each flow's packets' waits (s), by name, and under "settled" how many packets the
    queue had counted interactive at ``settle`` s (the rates known by then)."""
    waits: dict[str, list[float]] = {"interactive": [], "bulk": [], "greedy": [], "settled": []}
    name = {}
    pushed: dict[bytes, float] = {}

    def push(p: bytes, t: float, who: str) -> None:
        name[flow_key(p)] = who
        pushed[p] = t
        q.push(p, t)

    tag = 0
    for f in range(bulk_flows):
        for _ in range(4):
            tag += 1
            push(udp(2, 6000 + f, 1400, tag), 0.0, "bulk")
    now, next_ping, next_greedy = 0.0, 0.0, 0.0
    while now < seconds:
        if now >= settle and not waits["settled"]:
            waits["settled"].append(q.interactive)
        while interactive is not None and next_ping <= now:
            tag += 1
            push(udp(3, 7, interactive[1], tag), next_ping, "interactive")
            next_ping += interactive[0]
        while greedy is not None and next_greedy <= now:
            tag += 1
            push(udp(4, greedy[0], 1400, tag), next_greedy, "greedy")
            next_greedy += 1400 / greedy[1]
        p = q.pop(now)
        if p is None:
            now = min(x for x in (next_ping, next_greedy, seconds) if x > now)
            continue
        who = name[flow_key(p)]
        waits[who].append(now - pushed.pop(p))
        now += len(p) / capacity
        if who == "bulk":  # (one more as one leaves)
            tag += 1
            push(udp(2, flow_key(p)[-1] + (flow_key(p)[-2] << 8), 1400, tag), now, "bulk")
    return waits


def test_a_flow_below_its_fair_share_goes_first_whatever_its_rate() -> None:
    """A flow sending 200 bytes every 20 ms beside three bulk flows (about a third of its
    share) always has a packet listed when its next comes, on a link where a bulk packet
    takes 22 ms: the new list alone left it behind the bulk packets. Below its fair share it
    is served next, so it waits at most for the packet on its way; the bulk flows still
    share the rest evenly."""
    q = FairQueue(1_000_000, 10.0)
    waits = run_link(q, 3, (0.020, 200), 8.0)
    late = sorted(waits["interactive"][len(waits["interactive"]) // 4 :])  # (after 2 s)
    one_packet = 1400 / 63_500.0
    assert late[-1] <= one_packet + 1e-9, late[-5:]
    assert q.interactive >= len(late)
    # (the same flow with the new list alone: behind bulk packets, several at times)
    old = FairQueue(1_000_000, 10.0)
    old.share.asked = lambda *a: False  # type: ignore[method-assign]
    before = sorted(run_link(old, 3, (0.020, 200), 8.0)["interactive"][len(late) // 3 :])
    assert before[int(0.95 * len(before))] > 2 * one_packet


def test_a_bulk_flow_split_in_sixteen_takes_no_interactive_place() -> None:
    """Sixteen flows that keep packets queued are each at their share: none is interactive,
    and the interactive flow beside them still goes first."""
    q = FairQueue(10_000_000, 100.0)
    waits = run_link(q, 16, (0.100, 200), 8.0)  # (2 kB/s: below C / 17, 3.7)
    ping = waits["interactive"]
    assert q.interactive - waits["settled"][0] <= (8.0 - 3.0) / 0.100 + 1  # (the ping's only)
    assert max(ping[len(ping) // 4 :]) <= 1400 / 63_500.0 + 1e-9


def test_a_flow_above_its_share_loses_the_place() -> None:
    """A UDP flow sending at twice its fair share beside two bulk flows: once the rates are
    known (the first seconds, when every flow starts from none), no packet of any is
    interactive, and the greedy flow queues as a bulk one: its packets wait longer and
    longer (it sends more than it is served)."""
    q = FairQueue(10_000_000, 100.0)
    waits = run_link(q, 2, None, 8.0, greedy=(7000, 2 * 63_500.0 / 3))
    assert q.interactive == waits["settled"][0]
    assert waits["greedy"][-1] > 1.0


def test_a_flow_below_its_share_goes_between_frames_at_any_size() -> None:
    """pop_sparse: a packet of a flow below its fair share goes between a bulk packet's
    frames up to ``fast_len`` (a call's 1000-byte frames), a new flow's only up to
    ``max_len``; the busy flow's never."""
    q = FairQueue(10_000_000, 100.0)
    run_link(q, 3, (0.100, 1000), 4.0)  # (its rate known: 10 kB/s; its share 63.5 / 5)
    now = 4.0
    busy = flow_key(udp(2, 6000, 1400))
    call = udp(3, 7, 1000, tag=60000)
    stranger = udp(9, 9, 1200, tag=60001)
    q.push(stranger, now)
    q.push(call, now)
    assert q.pop_sparse(now, 256, busy) is None  # (too big for a sparse flow's place)
    assert q.pop_sparse(now, 256, busy, fast_len=65535) == call
    assert q.pop_sparse(now, 256, busy, fast_len=65535) is None  # (the stranger: new, big)
    assert q.pop_sparse(now, 256, flow_key(call), fast_len=65535) is None


def test_ever_new_flows_earn_no_interactive_place() -> None:
    """A bulk flow split into ever new flows (a new port each packet) while packets wait:
    each new flow starts at its share, so none of their packets is interactive."""
    q = FairQueue(10_000_000, 100.0)
    run_link(q, 3, None, 4.0)
    before = q.interactive
    for i in range(200):
        q.push(udp(5, 10_000 + i, 1400, tag=i), 4.0 + i * 0.001)
    assert q.interactive == before


def test_an_expired_interactive_packet_is_dropped_and_the_next_one_served() -> None:
    """pop_sparse over flows below their share whose packets expired: each is dropped
    (counted) and the search goes on, whatever leaves the list meanwhile."""
    q = FairQueue(10_000_000, 0.5)
    run_link(q, 3, (0.100, 200), 4.0)
    for port in (7, 8):  # (the first's rate known from the run; the second starts at its share)
        q.push(udp(3, port, 200, tag=port), 4.0)
    expired = q.drops["expired"]
    later = 4.0 + 0.6
    got = q.pop_sparse(later, 256, b"", 65535)
    assert q.drops["expired"] > expired
    assert got is None or flow_key(got) != flow_key(udp(3, 7, 200))


def test_the_drain_rate_is_what_the_link_carried_while_packets_waited() -> None:
    """Packets of mixed sizes, some taken at one moment (stream mode's window takes several),
    each group leaving once the link has carried the one before: the rate the queue reads
    is the link's, not skewed by the sizes' order nor by groups; idle spells do not count."""
    capacity = 63_500.0
    q = FairQueue(10_000_000, 100.0)
    now, tag = 0.0, 0
    for burst in range(200):
        for size in (200, 1400, 1400, 90):
            tag += 1
            q.push(udp(2 + burst % 3, 6000, size, tag), now)
        while len(q):
            group = [q.pop(now) for _ in range(2)]  # (two at a moment)
            now += sum(len(p) for p in group if p is not None) / capacity
        now += 0.05  # (idle: nothing waits)
    assert q.drain_rate == pytest.approx(capacity, rel=0.02)


def test_bulk_flows_are_never_interactive_from_the_start() -> None:
    """Three flows that keep packets queued, from the first moment the link is loaded:
    none of their packets is interactive (before, each flow seen before the drain rate was
    known read as far below its share once it was, and was served a dozen times in a row)."""
    q = FairQueue(1_000_000, 10.0)
    run_link(q, 3, None, 4.0)
    assert q.interactive == 0
