"""Stories of what survives the air, frame by frame (scripted drops on a virtual clock)."""

from __future__ import annotations

import pytest
from linkpair import Pair

from longge.errors import ConfigError, UsageError
from longge.protocol import DropReason, Fragmenter, Reassembler

A = bytes(range(100))  # 4 frames
B = b"B" * 200  # 7 frames
C = b"c" * 10  # 1 frame


def test_clean_link_delivers_every_packet_in_order() -> None:
    pair = Pair()
    assert pair.send(A, B, C) == [A, B, C]
    assert pair.rx.drops == {}


def test_lost_middle_frame_drops_only_that_packet() -> None:
    pair = Pair()
    frames = pair.frames(A, B)
    del frames[2]  # third frame of A
    assert pair.feed(frames) == [B]
    assert pair.rx.drops == {DropReason.ORPHAN: 1}  # A's last frame fits nothing
    pair.rx.expire(pair.now + 1.5)  # A's head is given up after the timeout
    assert pair.rx.drops[DropReason.TIMEOUT] == 1 and pair.rx.in_progress == 0


def test_lost_last_frame_is_noticed_when_its_number_comes_round_again() -> None:
    pair = Pair()
    packets = [bytes([i]) * 50 for i in range(10)]
    frames = pair.frames(*packets)
    del frames[1]  # last frame of packet 0 (56-byte stream: 2 frames)
    assert pair.feed(frames) == packets[1:]
    assert pair.rx.drops == {DropReason.INTERRUPTED: 1}  # packet 8 reused its slot


def test_foreign_frames_between_a_packets_frames_do_not_cost_it() -> None:
    """Another radio's frames (whole packets, even packet starts) land inside packet B."""
    pair = Pair()
    other = Pair(first_number=65532)  # numbers 4, 5 mod 8 (never B's 1), and older than ours
    frames = pair.frames(A, B)
    foreign = other.frames(bytes(70), bytes(40))  # 3 + 2 frames
    mixed = frames[:5] + foreign[:2] + frames[5:7] + foreign[2:] + frames[7:] + [b"\x07junk"]
    assert pair.feed(mixed) == [A, B]
    assert pair.rx.drops == {DropReason.STALE: 2, DropReason.ORPHAN: 1}


def test_lost_first_frame_makes_the_rest_orphans() -> None:
    pair = Pair()
    frames = pair.frames(A, C)
    del frames[0]
    assert pair.feed(frames) == [C]
    assert pair.rx.drops[DropReason.ORPHAN] == 3


def test_repeated_frame_is_harmless() -> None:
    pair = Pair()
    frames = pair.frames(A)
    frames.insert(2, frames[1])
    assert pair.feed(frames) == [A]
    assert pair.rx.drops[DropReason.DUPLICATE_FRAME] == 1


def test_loss_of_exactly_eight_frames_is_caught_by_the_crc() -> None:
    """The 3-bit index wraps; the CRC-32 still refuses the shortened packet."""
    pair = Pair()
    packet = bytes(range(256)) * 2  # 518-byte stream: 17 frames
    frames = pair.frames(packet)
    del frames[4:12]
    assert pair.feed(frames) == []
    assert pair.rx.drops[DropReason.CHECKSUM] == 1


def test_spliced_packet_is_never_delivered() -> None:
    """Head of one packet + tail of another with the same seq and index pattern."""
    a = Pair(first_number=0)
    b = Pair(first_number=0)
    fa = a.frames(bytes(100))
    fb = b.frames(bytes([1]) * 100)
    spliced = fa[:2] + fb[2:]
    rx = Pair()
    assert rx.feed(spliced) == []
    assert rx.rx.drops[DropReason.CHECKSUM] == 1


def test_bit_flip_in_payload_is_caught() -> None:
    pair = Pair()
    frames = pair.frames(A)
    frames[1] = frames[1][:5] + bytes([frames[1][5] ^ 0x10]) + frames[1][6:]
    assert pair.feed(frames) == []
    assert pair.rx.drops[DropReason.CHECKSUM] == 1


def test_replayed_packet_is_stale() -> None:
    pair = Pair()
    frames = pair.frames(A, C)
    assert pair.feed(frames + frames[:4]) == [A, C]
    assert pair.rx.drops[DropReason.STALE] == 1


def test_sender_restart_mid_packet() -> None:
    """The sender dies halfway through B and comes back numbering from scratch."""
    rx = Pair(first_number=1000)
    frames = rx.frames(A, B)[:7]  # A whole, B cut short
    assert rx.feed(frames) == [A]
    restarted = Pair(first_number=4)  # "older" numbers than 1000, in its lane (even)
    fresh = [bytes([i]) * 40 for i in range(5)]
    got = rx.feed(restarted.frames(*fresh))
    # B is dropped; the receiver follows the new sender after RESYNC_AFTER packets.
    assert got == fresh[2:]
    assert rx.rx.drops[DropReason.STALE] == 2
    rx.rx.expire(rx.now + 1.5)
    # (B's slot is one of its lane's four: the fresh packets take it, or B times out)
    assert rx.rx.drops[DropReason.TIMEOUT] + rx.rx.drops[DropReason.INTERRUPTED] == 1


def test_packets_sent_again_are_repeats_not_a_restarted_sender() -> None:
    """A stream-mode ARQ that begins a new session sends its unacknowledged frames again:
    packets delivered already come back with their old numbers, several in a row. They are
    repeats (same number, same CRC-32), not a new sender to follow: none is delivered twice,
    and what comes next is."""
    pair = Pair(first_number=500)
    packets = [bytes([i]) * 20 for i in range(6)]
    frames = pair.frames(*packets)  # one frame each
    assert pair.feed(frames) == packets
    assert pair.feed(frames[1:]) == []
    assert pair.rx.drops == {DropReason.STALE: 5}
    assert pair.send(C) == [C]


def test_a_packet_that_came_early_is_not_repeated_and_order_is_kept() -> None:
    """A stream-mode frame whose sequence number was damaged can deliver a copy of a later
    one-frame packet early (G into C's place): what was skipped over comes late and is
    dropped (never taken for a restarted sender after 3), and the real G is a repeat."""
    pair = Pair(first_number=40, late_guard=64)
    packets = [bytes([i]) * 20 for i in range(7)]  # A..G, one frame each
    f = pair.frames(*packets)
    got = pair.feed([f[0], f[1], f[6], f[3], f[4], f[5], f[6]])
    assert got == [packets[0], packets[1], packets[6]]
    assert pair.rx.drops == {DropReason.STALE: 4}
    assert pair.send(C) == [C]


def test_a_stray_packet_ahead_costs_two_packets_or_with_the_late_guard_at_most_the_gap() -> None:
    """A valid packet from elsewhere (an open link) lands 49 places ahead of the genuine
    sender. Without the guard (ESB: no ARQ, no phantoms) the receiver follows the genuine
    numbers after RESYNC_AFTER; with it (stream mode) what it skipped is late: dropped, until
    the genuine numbers pass the stray one. Never a packet twice or out of order."""
    stray = Pair(first_number=1100).frames(b"stray" * 4)  # (lane 0's places: every 2nd number)
    packets = [bytes([i]) * 20 for i in range(60)]
    for guard, lost in ((0, 2), (64, 49)):
        pair = Pair(first_number=1000, late_guard=guard)
        frames = pair.frames(*packets)
        got = pair.feed(frames[:2] + stray + frames[2:])
        assert got == [*packets[:2], b"stray" * 4, *packets[2 + lost :]], guard


def test_partial_packet_times_out_and_memory_is_released() -> None:
    pair = Pair()
    frames = pair.frames(B)
    pair.feed(frames[:3])
    assert pair.rx.in_progress > 0
    pair.rx.expire(pair.now + 0.5)
    assert pair.rx.in_progress > 0
    pair.rx.expire(pair.now + 1.5)
    assert pair.rx.in_progress == 0
    assert pair.rx.drops[DropReason.TIMEOUT] == 1
    # The tail that arrives late is orphaned, not glued onto anything.
    pair.now += 2
    assert pair.feed(frames[3:]) == []


def test_oversize_packet_is_dropped_by_a_receiver_with_a_smaller_mtu() -> None:
    tx = Fragmenter(mtu=1500, first_number=0)
    rx = Reassembler(mtu=100)
    for f in tx.fragment(bytes(400)):
        assert rx.receive(f, 0.0) is None
    assert rx.drops[DropReason.OVERSIZE] == 1
    assert rx.in_progress == 0


def test_small_frames_for_experiments() -> None:
    pair = Pair(payload_size=8)
    frames = pair.frames(A)
    assert all(len(f) <= 8 for f in frames)
    assert pair.feed(frames) == [A]


def test_garbage_frames_never_deliver_and_never_raise() -> None:
    rx = Reassembler()
    junk = [b"", b"\x00", b"\xff" * 32, b"\xc0", b"\xc0\x00", b"\xc0\x00\x00" + b"\x00" * 4]
    for f in junk:
        assert rx.receive(f, 0.0) is None
    assert sum(rx.drops.values()) >= len(junk)


def test_caller_mistakes_are_usage_errors() -> None:
    tx = Fragmenter(mtu=100)
    with pytest.raises(UsageError):
        tx.fragment(b"")
    with pytest.raises(UsageError, match="exceeds the MTU"):
        tx.fragment(bytes(101))


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"payload_size": 2}, "payload_size"),
        ({"payload_size": 33}, "payload_size"),
        ({"mtu": 0}, "mtu"),
    ],
)
def test_bad_sizes_are_config_errors_naming_the_key(kwargs: dict[str, int], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        Fragmenter(**kwargs)
    assert err.value.key == key
    assert key in str(err.value)


def test_keepalive_is_one_frame_that_comes_back_empty_and_keeps_order() -> None:
    pair = Pair()
    frames = pair.frames(A)
    ka = pair.tx.keepalive()
    assert len(ka) == 1 and len(ka[0]) == 7
    frames += ka + pair.frames(C)
    assert pair.feed(frames) == [A, b"", C]
    assert pair.rx.keepalives == 1 and pair.rx.delivered == 2


def test_an_urgent_packet_between_a_bulk_packets_frames_is_delivered_first_and_both_whole() -> None:
    """Frame-level preemption (frame.py, "Lanes"): a ping's frames go between the frames of a
    1400-byte packet already on its way. The receiver rebuilds both apart, delivers the ping
    when its last frame lands (not after the bulk packet's) and the bulk packet whole after it;
    the next packets of each lane follow as usual. Reordered within a lane is still stale."""
    pair = Pair(first_number=65533)  # (both lanes' numbers wrap past 65535 here)
    bulk, ping = bytes(range(256)) * 5 + bytes(120), b"ping" * 21
    frames_bulk = pair.tx.fragment(bulk)
    frames_ping = pair.tx.fragment(ping, lane=1)
    mixed = frames_bulk[:10] + frames_ping + frames_bulk[10:]
    assert pair.feed(mixed) == [ping, bulk]
    after = [pair.tx.fragment(b"next bulk"), pair.tx.fragment(b"next ping", lane=1)]
    assert pair.feed(after[1] + after[0]) == [b"next ping", b"next bulk"]
    assert not pair.rx.drops
    older = Pair(first_number=65533)
    older_frames = [older.tx.fragment(p, lane=1) for p in (b"one", b"two")]
    assert pair.feed(older_frames[1] + older_frames[0]) == []  # (older than "next ping")
    assert pair.rx.drops[DropReason.STALE] == 2


def test_packets_that_never_came_are_counted_missing_a_restarted_sender_is_not() -> None:
    """An open link: the numbers a later packet skipped are packets lost on the way (a
    one-frame packet lost whole leaves no other trace at the receiver); a sender that starts
    over elsewhere in the number space is not counted as loss."""
    pair = Pair(first_number=100)
    packets = [bytes([i]) * 20 for i in range(8)]  # one frame each
    frames = pair.frames(*packets)
    kept = [f for i, f in enumerate(frames) if i not in (2, 5, 6)]
    assert pair.feed(kept) == [p for i, p in enumerate(packets) if i not in (2, 5, 6)]
    assert pair.rx.missing == 3 and pair.rx.drops == {}
    far = Pair(first_number=100 + 2 * 3000)  # (same lane, far ahead: a sender started over)
    assert pair.feed(far.frames(C)) == [C]
    assert pair.rx.missing == 3
