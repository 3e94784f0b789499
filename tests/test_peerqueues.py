"""Between peers (a base's mobiles): the backlogged peer served the fewest bytes goes next; a
peer back from idle goes next without saved credit; a peer that stopped answering waits."""

from __future__ import annotations

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


def test_a_peer_that_stopped_answering_waits_while_others_have_packets() -> None:
    q = queues(2)
    q.push(0, pkt(0, 100, 1), 0)
    q.push(1, pkt(1, 100, 1), 0)
    q.max_rt(0, 0.0)
    assert q.next_peer(0.001) == 1
    q.pop(1, 0.001)
    assert q.next_peer(0.002) == 0  # alone: tried as before
