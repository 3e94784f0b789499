"""Property tests: whatever the air does, every delivered packet is one that was sent, whole,
in order, at most once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from linkpair import Pair

packets = st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=12)

# One impairment per frame position: keep, drop, duplicate, flip a bit, swap with the next.
impairment = st.sampled_from(["keep"] * 6 + ["drop", "dup", "flip", "swap", "trunc", "junk"])


def apply(frames: list[bytes], ops: list[str], flips: list[int]) -> list[bytes]:
    out: list[bytes] = []
    i = 0
    while i < len(frames):
        op = ops[i % len(ops)]
        f = frames[i]
        if op == "keep":
            out.append(f)
        elif op == "dup":
            out += [f, f]
        elif op == "flip":
            pos = flips[i % len(flips)] % (len(f) * 8)
            b = bytearray(f)
            b[pos // 8] ^= 1 << (pos % 8)
            out.append(bytes(b))
        elif op == "swap" and i + 1 < len(frames):
            out += [frames[i + 1], f]
            i += 1
        elif op == "trunc":
            out.append(f[: max(0, len(f) // 2)])
        elif op == "junk":
            out += [f, bytes(x % 256 for x in flips[: 1 + i % 31])]
        i += 1
    return out


def is_ordered_subsequence(got: list[bytes], sent: list[bytes]) -> bool:
    it = iter(sent)
    return all(any(g == s for s in it) for g in got)


@settings(max_examples=300, deadline=None)
@given(packets, st.integers(0, 0xFFFF), st.sampled_from([3, 8, 17, 32]))
def test_clean_air_delivers_everything(sent: list[bytes], first: int, size: int) -> None:
    pair = Pair(payload_size=size, first_number=first)
    assert pair.send(*sent) == sent


@settings(max_examples=500, deadline=None)
@given(
    packets,
    st.lists(impairment, min_size=1, max_size=40),
    st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    st.integers(0, 0xFFFF),
    st.sampled_from([3, 8, 32]),
)
def test_impaired_air_never_delivers_a_wrong_packet(
    sent: list[bytes], ops: list[str], flips: list[int], first: int, size: int
) -> None:
    pair = Pair(payload_size=size, first_number=first)
    got = pair.feed(apply(pair.frames(*sent), ops, flips))
    assert is_ordered_subsequence(got, sent), "delivered a packet not sent, or out of order"
    assert len(got) <= len(sent)
    # Memory stays bounded: at most 8 packets in progress (one per number mod 8).
    assert pair.rx.in_progress <= 8 * (pair.mtu + 6 + size)
    # The receiver's own counters agree with what came out.
    assert pair.rx.delivered == len(got)


@settings(max_examples=200, deadline=None)
@given(packets, st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_two_senders_interleaved_never_splice(a: list[bytes], na: int, nb: int) -> None:
    """Frames of two senders mixed on one receiver: each delivered packet is some sender's."""
    sa, sb = Pair(first_number=na), Pair(first_number=nb)
    b = [bytes(reversed(p)) + b"#" for p in a]
    fa, fb = sa.frames(*a), sb.frames(*b)
    mixed: list[bytes] = []
    for i in range(max(len(fa), len(fb))):
        mixed += fa[i : i + 1] + fb[i : i + 1]
    rx = Pair()
    got = rx.feed(mixed)
    assert all(g in a or g in b for g in got)


def interleave(bulk: list[list[bytes]], urgent: list[list[bytes]], cuts: list[int]) -> list[bytes]:
    """A sender's frames with lanes: each lane's packets in order, each packet's frames in
    order, and an urgent (lane-1) packet starting between any two frames of the bulk lane
    (where ``cuts`` say), its frames all sent before the bulk lane goes on (as the pumps do)."""
    flat = [f for p in bulk for f in p]
    out: list[bytes] = []
    at = 0
    for k, packet in enumerate(urgent):
        cut = min(len(flat), at + cuts[k % len(cuts)])
        out += flat[at:cut] + packet
        at = cut
    return out + flat[at:]


@settings(max_examples=500, deadline=None)
@given(
    packets,
    packets,
    st.lists(st.integers(0, 40), min_size=1, max_size=6),
    st.lists(impairment, min_size=1, max_size=40),
    st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    st.integers(0, 0xFFFF),
    st.sampled_from([3, 8, 32]),
)
def test_interleaved_lanes_never_deliver_a_damaged_reordered_or_repeated_packet(
    bulk: list[bytes],
    urgent: list[bytes],
    cuts: list[int],
    ops: list[str],
    flips: list[int],
    first: int,
    size: int,
) -> None:
    """Frame-level preemption (frame.py, "Lanes"): urgent packets' frames between a bulk
    packet's, on clean and impaired air. Every packet delivered is one sent, whole, at most
    once, in order within its lane; on clean air every packet arrives."""
    bulk, urgent = [b"b" + p for p in bulk], [b"u" + p for p in urgent]  # (told apart)
    pair = Pair(payload_size=size, first_number=first)
    bulk_frames = [pair.tx.fragment(p) for p in bulk]
    urgent_frames = [pair.tx.fragment(p, lane=1) for p in urgent]
    frames = interleave(bulk_frames, urgent_frames, cuts)
    clean = Pair(payload_size=size).rx
    got_clean = [p for f in frames if (p := clean.receive(f, 0.0)) is not None]
    assert sorted(got_clean) == sorted(bulk + urgent)
    got = pair.feed(apply(frames, ops, flips))
    lane0 = [g for g in got if not g.startswith(b"u")]
    lane1 = [g for g in got if g.startswith(b"u")]
    assert is_ordered_subsequence(lane0, bulk), "a bulk packet damaged, repeated or reordered"
    assert is_ordered_subsequence(lane1, urgent), "an urgent packet damaged, repeated or reordered"
    assert pair.rx.in_progress <= 8 * (pair.mtu + 6 + size)
