"""Between peers (a base's mobiles): the backlogged peer served the fewest bytes goes next; a
peer back from idle goes next without saved credit; a peer that stopped answering waits."""

from __future__ import annotations

import pytest

from longge.daemon.fairqueue import FairQueue
from longge.daemon.peerqueues import PeerQueues


def pkt(peer: int, size: int, tag: int) -> bytes:
    head = bytes([0x45, 0, 0, 0, tag & 0xFF, 0, 0, 0, 64, 17]) + bytes(2)
    return (head + bytes([10, 0, 0, peer, 10, 0, 0, 1]) + bytes([0, 1, 0, 2])).ljust(size, b"\0")


def queues(n: int) -> PeerQueues:
    return PeerQueues([FairQueue(1_000_000, 10.0) for _ in range(n)])


def test_busy_peers_take_turns_by_bytes_served() -> None:
    q = queues(2)
    for k in range(10):
        q.push(0, pkt(0, 1400, k), 0)
        q.push(1, pkt(1, 700, k), 0)
    order = []
    for _ in range(12):
        i = q.next_peer(0)
        assert i is not None and q.pop(i, 0) is not None
        order.append(i)
    assert order.count(1) == 2 * order.count(0)  # twice as many of the half-size packets


def test_a_peer_back_from_idle_goes_next_ahead_of_the_busy_ones() -> None:
    # a ping for the last of three mobiles waited for a packet of each busy one (a tie of
    # bytes served went to the lower index): 44 ms beside two loaded mobiles
    q = queues(3)
    for k in range(20):
        q.push(0, pkt(0, 1400, k), 0)
        q.push(1, pkt(1, 1400, k), 0)
    for _ in range(6):
        i = q.next_peer(0)
        assert i is not None
        q.pop(i, 0)
    q.push(2, pkt(2, 84, 0), 0)
    assert q.next_peer(0) == 2
    q.pop(2, 0)
    # and it saved no credit: back among the busy ones, it gets its share, not more
    for k in range(10):
        q.push(2, pkt(2, 1400, 100 + k), 0)
    served = {0: 0, 1: 0, 2: 0}
    for _ in range(9):
        i = q.next_peer(0)
        assert i is not None
        served[i] += 1
        q.pop(i, 0)
    assert max(served.values()) - min(served.values()) <= 1, served


def test_a_peer_served_alone_earlier_is_not_kept_waiting_once_the_others_come_back() -> None:
    """From the three-mobile testbed: the base pinged mobile 3 for 10 s while the others were
    idle (67 kB served to it alone), then loaded mobiles 1 and 2. They came back from idle
    with nothing busy to be levelled with and kept their low counts: mobile 3's pings waited
    until they had caught up 67 kB (a second of air), and 23 of its next 28 expired. A peer
    that starts a busy period starts level with the most served (the clock stood there)."""
    q = queues(3)
    for k in range(800):  # mobile 3 alone: pings
        q.push(2, pkt(2, 84, k), 0)
        assert q.next_peer(0) == 2 and q.pop(2, 0) is not None
    for k in range(20):
        q.push(0, pkt(0, 1400, k), 0)
        q.push(1, pkt(1, 1400, k), 0)
    for _ in range(4):
        i = q.next_peer(0)
        assert i is not None and q.pop(i, 0) is not None
    q.push(2, pkt(2, 84, 900), 0)
    assert q.next_peer(0) == 2  # (it waited 48 packets of theirs before)
    assert q.pop(2, 0) is not None
    served = {0: 0, 1: 0}
    for _ in range(10):  # and the two share as before
        i = q.next_peer(0)
        assert i in served and q.pop(i, 0) is not None
        served[i] += 1
    assert served == {0: 5, 1: 5}


def test_a_peer_that_stopped_answering_waits_while_others_have_packets() -> None:
    q = queues(2)
    q.push(0, pkt(0, 100, 1), 0)
    q.push(1, pkt(1, 100, 1), 0)
    q.max_rt(0, 0.0)
    assert q.next_peer(0.001) == 1
    q.pop(1, 0.001)
    assert q.next_peer(0.002) == 0  # alone: tried as before
    assert q.sendable(0.002) and q.wake_at(0.002) is None  # (nothing waits for its time)


def test_a_peer_alone_that_keeps_meeting_max_rt_waits_for_its_backoff() -> None:
    """Alone, a second MAX_RT in a row and the peer waits as it would beside others (before,
    each of its packets went at once and met MAX_RT: a 0.2-s stall of its receiver lost every
    packet queued); the loop sleeps until the backoff ends; a frame acknowledged ends it."""
    q = queues(3)
    for k in range(3):
        q.push(2, pkt(2, 100, k), 0)
    q.max_rt(2, 0.0)  # first: 10 ms
    q.max_rt(2, 0.005)  # second in a row: 20 ms, from 5 ms
    assert q.next_peer(0.006) is None and not q.sendable(0.006)
    assert q.wake_at(0.006) == pytest.approx(0.025)
    assert q.next_peer(0.025) == 2 and q.wake_at(0.025) is None
    q.push(0, pkt(0, 100, 9), 0.026)  # another peer comes: it goes, 2 still waits
    q.max_rt(2, 0.026)
    assert q.next_peer(0.027) == 0
    q.delivered(2)
    assert q.next_peer(0.027) in (0, 2) and q.sendable(0.027)
    q.pop(0, 0.027)
    assert q.next_peer(0.028) == 2
