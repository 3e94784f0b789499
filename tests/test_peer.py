"""The peer and its table (longge/protocol/peer.py), sans I/O: which peer a frame or a packet
belongs to, what a peer's halves count, and the node's status summed over its peers."""

from __future__ import annotations

import itertools
import struct

import pytest
from daemonlink import ip_packet

from longge.daemon.peers import GoFirst, summed
from longge.protocol import Fragmenter, Reassembler, secure
from longge.protocol.peer import Networks, PeerReceiver, PeerSender, PeerTable, multicast


def v4(src: str, dst: str, size: int = 40) -> bytes:
    """An IPv4 header (and padding) from ``src`` to ``dst``."""
    s, d = (bytes(int(x) for x in a.split(".")) for a in (src, dst))
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, size, 0, 0, 64, 17, 0, s, d).ljust(size, b"\0")


def v6(src: bytes, dst: bytes) -> bytes:
    return bytes([0x60]) + bytes(7) + src.ljust(16, b"\0") + dst.ljust(16, b"\0")


def sender(name: str, nets: tuple[str, ...]) -> PeerSender:
    return PeerSender(name, b"addr" + name[:1].encode(), Networks(nets), Fragmenter(32), None)


def receiver(nets: tuple[str, ...], opener: secure.Opener | None = None) -> PeerReceiver:
    size = 1500 + (secure.OVERHEAD if opener else 0)
    return PeerReceiver("p", b"addrp", Networks(nets), Reassembler(size, secured=opener), opener)


def test_networks_find_the_longest_prefix_of_a_source_or_destination() -> None:
    nets = Networks(("10.24.0.0/24", "10.24.0.2/32", "fe80::/10"))
    assert nets.prefix_of(v4("10.24.0.2", "1.1.1.1"), source=True) == 32
    assert nets.prefix_of(v4("1.1.1.1", "10.24.0.9"), source=False) == 24
    assert nets.prefix_of(v4("10.25.0.2", "10.25.0.2"), source=True) == -1
    assert nets.prefix_of(v6(b"\xfe\x80", b"\xff\x02"), source=True) == 10
    assert nets.prefix_of(v6(b"\x20\x01", b"\xff\x02"), source=True) == -1
    assert nets.prefix_of(b"\x00\x01", source=True) == -1  # no IP packet
    assert nets.prefix_of(v4("10.24.0.2", "1.1.1.1")[:19], source=True) == -1  # cut short
    anywhere = Networks(("0.0.0.0/0", "::/0"))
    assert anywhere.allows_source(v4("8.8.8.8", "10.24.0.2"))
    assert anywhere.allows_source(v6(b"\x20\x01", b"\x20\x01"))


def test_one_peer_is_a_point_to_point_link_and_several_are_routed_by_destination() -> None:
    only = PeerTable([sender("base", ("10.24.0.1/32",))])
    # (the kernel routed it to the link: the one peer's, whatever its destination)
    assert only.route(v4("10.24.0.2", "192.0.2.7")) == only.peers
    a, b = sender("a", ("10.24.0.2/32", "10.99.0.0/16")), sender("b", ("10.24.0.3/32",))
    table = PeerTable([a, b])
    assert table.route(v4("10.24.0.1", "10.24.0.3")) == (b,)
    assert table.route(v4("10.24.0.1", "10.99.3.4")) == (a,)
    assert table.route(v4("10.24.0.1", "10.24.0.77")) == ()  # nobody's: dropped, counted
    assert table.route(v4("10.24.0.1", "224.0.0.251")) == (a, b)  # multicast: everybody's
    assert table.route(v6(b"\xfe\x80", b"\xff\x02")) == (a, b)
    assert multicast(v4("1.2.3.4", "255.255.255.255")) and not multicast(v4("1.2.3.4", "9.9.9.9"))
    assert [table.by_pipe(p) for p in range(7)] == [None, a, b, None, None, None, None]
    with pytest.raises(ValueError):
        PeerTable([sender(str(i), ("10.0.0.0/8",)) for i in range(6)])  # pipes 1..5


def test_a_sender_gives_up_the_rest_of_a_packet_on_max_rt_and_counts_it() -> None:
    peer = sender("m", ("0.0.0.0/0",))
    peer.load(ip_packet(200, 1), 0.0)
    assert len(peer.frames) > 1
    peer.frames.popleft()
    peer.max_rt()
    peer.max_rt()  # (nothing left to abort: a keepalive's MAX_RT)
    c = peer.counters
    assert (c.packets_sent, c.max_rt, c.packets_aborted, len(peer.frames)) == (1, 2, 1, 0)


def test_link_control_seals_past_a_refused_epoch_and_sends_a_floor_message() -> None:
    key = bytes(range(32))
    epochs = itertools.count(1)
    peer = sender("m", ("0.0.0.0/0",))
    peer.sealer = secure.Sealer(key, lambda at_least: max(next(epochs), at_least))
    peer.fragmenter = Fragmenter(32, 1500 + secure.OVERHEAD)
    own = secure.Floor(7, peer.sealer.epoch, peer.sealer.salt)
    peer.link_control(skip_past=own._replace(refused=own.refused + 1), floor=None)
    assert peer.sealer.epoch == 1 and not peer.counters.epoch_skips  # (not ours: a replay)
    peer.link_control(skip_past=own, floor=None)
    assert peer.sealer.epoch > 7 and peer.counters.epoch_skips == 1 and not peer.frames
    told = secure.Floor(3, 2, b"salt")
    peer.link_control(skip_past=None, floor=told)
    assert peer.counters.floors_sent == 1 and peer.frames
    opener = secure.Opener([key], None, lambda mark, sync: True, clock=lambda: 0.0)
    rx = receiver(("0.0.0.0/0",), opener)
    for f in peer.frames:
        assert rx.receive(f, 1.0) is None  # a link-control packet: never to the TUN
    assert rx.take_floor() == told and rx.take_floor() is None
    assert rx.last_heard == 1.0


def test_a_floor_goes_between_the_frames_of_a_packet_on_its_way() -> None:
    """A loaded sender always has a packet on its way (stream mode: the ARQ takes its frames
    as they go): the floor message waited for none and was never sent; a restarted receiver
    (its epoch closed: secure.py) never heard its peer again. It goes on lane 1 now."""
    key = bytes(range(32))
    peer = sender("m", ("0.0.0.0/0",))
    peer.sealer = secure.Sealer(key, lambda at_least: max(1, at_least))
    peer.fragmenter = Fragmenter(32, 1500 + secure.OVERHEAD)
    peer.load(b"\x45" + bytes(1399), 0.0)
    bulk = len(peer.frames)
    peer.next_frame()
    told = secure.Floor(3, 2, b"salt")
    peer.link_control(skip_past=None, floor=told)
    assert peer.urgent and len(peer.frames) == bulk - 1
    opener = secure.Opener([key], None, lambda mark, sync: True, clock=lambda: 0.0)
    rx = receiver(("0.0.0.0/0",), opener)
    while peer.frames:
        rx.receive(peer.next_frame(), 1.0)
    assert rx.take_floor() == told


def test_a_receiver_moves_only_on_whole_packets_from_sources_its_peer_may_use() -> None:
    rx = receiver(("10.24.0.2/32",))
    cut = Fragmenter(32)
    for f in cut.fragment(v4("10.24.0.9", "10.24.0.1", 200)):  # another host's source
        assert rx.receive(f, 2.0) is None
    assert rx.counters.source_not_allowed == 1 and rx.last_heard == 2.0
    assert rx.receive(b"\x07", 3.0) is None and rx.last_heard == 2.0  # a stray frame: nothing
    frames = cut.fragment(v4("10.24.0.2", "10.24.0.1", 200))
    got = [rx.receive(f, 4.0) for f in frames]
    assert got[-1] == v4("10.24.0.2", "10.24.0.1", 200) and got[:-1] == [None] * (len(got) - 1)


def test_a_nodes_status_is_its_peers_summed() -> None:
    a = {"max_rt": 2, "drops": {"crc": 1}, "epoch": 4, "peer_last_heard_s": 0.5, "sealed": None}
    b = {"max_rt": 3, "drops": {"crc": 2, "late": 1}, "epoch": 9, "peer_last_heard_s": None}
    b["sealed"] = None
    assert summed([a, b]) == {
        "max_rt": 5,
        "drops": {"crc": 3, "late": 1},
        "epoch": 9,
        "peer_last_heard_s": 0.5,
        "sealed": None,
    }
    assert summed([a]) == a


def test_frames_that_go_first_go_only_till_theirs_have_gone_the_newest_first() -> None:
    """ESB's TX process: a ping's answer was cut in for mobile c, then a grant for mobile a
    (whose 1400-byte packet was on its way) was queued. The grant's two frames go first, then
    the answer's, then the queues' order: before, the grant took the answer's place (it went
    behind another mobile's rest) and kept the first place for a's rest too."""
    a, c = sender("a", ("10.0.0.2/32",)), sender("c", ("10.0.0.4/32",))
    a.load(bytes(1400), 0.0)
    for _ in range(3):
        a.next_frame()
    first = GoFirst()
    c.load(bytes(84), 0.0)  # (the answer, cut in)
    first.add(c)
    a.uplink(b"grant", 0.0)  # (lane 1, before the rest of a's packet)
    first.add(a)
    order = []
    while (peer := first.peer()) is not None:
        order.append(peer.name)
        peer.next_frame()
    answer = len(Fragmenter(32).fragment(bytes(84)))
    assert order == ["a"] + ["c"] * answer and a.frames and not c.frames


def test_a_grant_never_overtakes_the_grant_or_revoke_queued_before_it() -> None:
    """A revoke queued for an idle mobile (lane 0), then a new grant before it had gone: the
    grant went in lane 1, ahead; the mobile heard the grant, then the revoke, and held
    nothing while the base waited for the grant's release. Behind a packet on its way, a
    grant still goes between its frames."""
    p = sender("a", ("10.0.0.2/32",))
    p.uplink(b"revoke", 0.0)
    p.uplink(b"grant", 0.0)
    assert not p.urgent and len(p.frames) == 2  # (in order, one lane)
    p.next_frame()
    p.next_frame()
    p.load(bytes(1400), 0.0)
    p.next_frame()
    p.uplink(b"grant", 0.0)
    assert len(p.urgent) == 1  # (between the packet's frames)
    p.uplink(b"revoke", 0.0)
    assert len(p.urgent) == 2  # (behind it, in its lane)


def test_a_channel_s_link_control_is_taken_only_from_an_authentic_packet() -> None:
    """MOVE, HERE and BAND move a link's radios: taken from the peer's sealed packets; a
    stranger's (another key) moves nothing (the opener drops it, counted); on a link
    without security they are refused, counted."""
    from longge.protocol import channel_control as cc

    key = bytes(range(32))
    peer = sender("b", ("0.0.0.0/0",))
    peer.sealer = secure.Sealer(key, lambda at_least: max(1, at_least))
    peer.fragmenter = Fragmenter(32, 1500 + secure.OVERHEAD)
    opener = secure.Opener([key], None, lambda mark, sync: True, clock=lambda: 0.0)
    rx = receiver(("0.0.0.0/0",), opener)
    levels = bytes(21)
    for msg in (cc.move_message(4, 20, 40, 0.1), cc.here_message(4, 20, 40, 60),
                cc.band_message(100, 7, 0.5, levels)):  # fmt: skip
        for f in peer.control_frames(msg):
            assert rx.receive(f, 2.0) is None
    assert rx.move_heard == (cc.Move(4, 20, 40, 0.1), 2.0)
    assert rx.here_heard == (cc.Here(4, 20, 40, 60), 2.0)
    assert rx.band_heard == (cc.BandReport(100, 7, 127 / 254, levels), 2.0)
    # a stranger's, sealed with another key
    stranger = sender("b", ("0.0.0.0/0",))
    stranger.sealer = secure.Sealer(bytes(32), lambda at_least: max(5, at_least))
    stranger.fragmenter = Fragmenter(32, 1500 + secure.OVERHEAD)
    rx.move_heard = None
    dropped = sum(opener.drops.values())
    for f in stranger.control_frames(cc.move_message(5, 2, 9, 0.1)):
        rx.receive(f, 3.0)
    assert rx.move_heard is None and sum(opener.drops.values()) > dropped
    # a link without security
    open_rx = receiver(("0.0.0.0/0",))
    for f in sender("b", ("0.0.0.0/0",)).control_frames(cc.move_message(6, 2, 9, 0.1)):
        open_rx.receive(f, 4.0)
    assert open_rx.move_heard is None and open_rx.counters.control_refused == 1
    # from a CHANNEL frame (stream mode: its seal checked by the ARQ's receiver), a sign of
    # life on a secured link; refused on an open one (its CRC-8 is no one's seal)
    rx.channel_frame(cc.here_message(5, 21, 41, 61), 5.0)
    assert rx.here_heard == (cc.Here(5, 21, 41, 61), 5.0) and rx.last_heard == 5.0
    open_rx.channel_frame(cc.here_message(5, 21, 41, 61), 5.0)
    assert open_rx.here_heard is None and open_rx.counters.control_refused == 2
    assert open_rx.last_heard != 5.0


def test_a_band_report_given_up_goes_again_and_a_here_does_not() -> None:
    """A MAX_RT gives up the packets on their way: a BAND is queued again whole (its counts
    would be lost), a HERE or MOVE is not (the base says them again anyway; sent again at
    once, a HERE to a mobile that was not there kept the TX radio to itself)."""
    from longge.protocol import channel_control as cc

    peer = sender("b", ("0.0.0.0/0",))
    band = cc.band_message(100, 7, 0.5, bytes(21))
    peer.say(cc.here_message(4, 20, 40, 60), 1.0)
    peer.say(band, 1.0)
    peer.next_frame()  # (the HERE's first frame went, and met MAX_RT)
    peer.max_rt()
    rx = receiver(("0.0.0.0/0",))
    while peer.frames or peer.urgent:
        rx.receive(peer.next_frame(), 2.0)
    assert rx.counters.control_refused == 1  # (the BAND, whole, on an open link: refused)
    assert peer.counters.max_rt == 1 and not peer.frames
