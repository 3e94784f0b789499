"""Sealed packets: what authenticates is delivered once; nothing else is, whatever the air or
an attacker does. Sans-IO: sealer, opener and reassembler, no radio."""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longge.errors import ConfigError
from longge.protocol import DropReason, Fragmenter, Reassembler
from longge.protocol.secure import (
    COUNTER_SPACE,
    OVERHEAD,
    WINDOW,
    EpochStore,
    Opener,
    Sealer,
    SecureDrop,
    SecurityError,
    check_state_dir,
    direction_key,
    generate_key,
    parse_key,
)

PSK = bytes.fromhex(generate_key())
UP = direction_key(PSK, "mobile")  # mobile -> base
DOWN = direction_key(PSK, "base")


def counter_epochs(start: int = 0) -> object:
    n = iter(range(start + 1, start + 1000))
    return lambda: next(n)


def pair(tmp_path: Path | None = None) -> tuple[Sealer, Opener]:
    epochs = EpochStore(tmp_path / "epoch").next if tmp_path else counter_epochs()
    return Sealer(UP, epochs), Opener([UP])  # type: ignore[arg-type]


def test_round_trip_costs_24_bytes_per_packet() -> None:
    s, o = pair()
    for size in (0, 1, 100, 1500):
        packet = os.urandom(size)
        sealed = s.seal(packet)
        assert len(sealed) == size + OVERHEAD == size + 24
        # encrypted, not just signed (a packet of a few bytes may turn up by chance: a 1-byte
        # packet is somewhere in its 25 sealed bytes 1 time in 11)
        assert size < 16 or packet not in sealed
        assert o.open(sealed) == packet
    assert o.opened == 4 and not o.drops


def test_every_single_bit_flip_is_refused() -> None:
    s, o = pair()
    sealed = s.seal(b"a packet worth protecting")
    for bit in range(len(sealed) * 8):
        bad = bytearray(sealed)
        bad[bit // 8] ^= 1 << (bit % 8)
        assert o.open(bytes(bad)) is None
    assert sum(o.drops.values()) == len(sealed) * 8 and o.opened == 0
    assert o.open(sealed) == b"a packet worth protecting"  # the genuine one still opens


def test_wrong_key_other_direction_and_short_input_are_refused() -> None:
    _, o = pair()
    other = Sealer(direction_key(bytes.fromhex(generate_key()), "mobile"), counter_epochs())  # type: ignore[arg-type]
    reflected = Sealer(DOWN, counter_epochs())  # type: ignore[arg-type]
    assert o.open(other.seal(b"x")) is None
    assert o.open(reflected.seal(b"x")) is None  # base->mobile traffic sent back to the base
    assert o.open(b"short") is None
    assert o.drops == {SecureDrop.AUTH: 2, SecureDrop.SHORT: 1}


def test_replays_are_refused_and_late_packets_accepted_once() -> None:
    s, o = pair()
    sealed = [s.seal(bytes([i])) for i in range(WINDOW + 10)]
    assert o.open(sealed[5]) == bytes([5])
    assert o.open(sealed[5]) is None  # replay
    assert o.open(sealed[3]) == bytes([3])  # late but within the window, unseen
    assert o.open(sealed[WINDOW + 9]) == bytes([WINDOW + 9])
    assert o.open(sealed[3]) is None  # now older than the window
    assert o.open(sealed[20]) == bytes([20])
    assert o.open(sealed[20]) is None
    assert o.drops[SecureDrop.REPLAY] == 3


def test_a_restarted_sender_never_reuses_a_nonce(tmp_path: Path) -> None:
    opener = Opener([UP])
    seen = set()
    for _ in range(3):  # three "boots" of the sender, same key, same state file
        s = Sealer(UP, EpochStore(tmp_path / "epoch").next)
        for i in range(5):
            sealed = s.seal(b"p")
            assert sealed[:8] not in seen
            seen.add(sealed[:8])
            assert opener.open(sealed) == b"p", i
    assert (tmp_path / "epoch").read_text().strip() == "3"


def test_counter_wrap_moves_to_a_new_epoch() -> None:
    epochs = counter_epochs()
    s = Sealer(UP, epochs)  # type: ignore[arg-type]
    s._counter = COUNTER_SPACE - 1  # 4e9 packets take too long
    o = Opener([UP])
    a, b = s.seal(b"last of epoch 1"), s.seal(b"first of epoch 2")
    assert int.from_bytes(a[:4], "big") == 1 and int.from_bytes(b[:4], "big") == 2
    assert int.from_bytes(b[4:8], "big") == 0
    assert o.open(a) and o.open(b) and o.open(a) is None


def test_a_restarted_receiver_still_refuses_what_it_accepted(tmp_path: Path) -> None:
    s = Sealer(UP, counter_epochs())  # type: ignore[arg-type]
    sealed = [s.seal(bytes([i])) for i in range(10)]
    first = Opener([UP], tmp_path / "mark")
    for p in sealed[:6]:
        assert first.open(p) is not None
    first.flush()
    again = Opener([UP], tmp_path / "mark")
    assert all(again.open(p) is None for p in sealed[:6])
    assert [again.open(p) for p in sealed[6:]] == [bytes([i]) for i in range(6, 10)]


def test_the_replay_mark_is_written_at_most_once_a_second_as_the_daemon_runs_it(
    tmp_path: Path,
) -> None:
    """With a clock (as the daemon builds it) the receiver writes its mark at most once per
    SAVE_EVERY_S, and tick() writes a mark that waited; a crash loses at most that second."""
    from longge.protocol.secure import SAVE_EVERY_S

    now = [100.0]
    s = Sealer(UP, counter_epochs())  # type: ignore[arg-type]
    mark = tmp_path / "mark"
    o = Opener([UP], mark, clock=lambda: now[0])
    writes = []
    for i in range(50):
        assert o.open(s.seal(bytes([i]))) is not None
        if mark.exists():
            writes.append(int(mark.read_text()))
        now[0] += SAVE_EVERY_S / 10  # 10 packets a second
    # the first packet is written at once (a new epoch), then about once a second
    assert 5 <= len(set(writes)) <= 7, sorted(set(writes))
    before = int(mark.read_text())
    assert before < o.highest  # the newest packets wait for the next second ...
    o.tick()  # ... not even a tick writes them early
    assert int(mark.read_text()) == before
    now[0] += SAVE_EVERY_S
    o.tick()  # a second later it does
    assert int(mark.read_text()) == o.highest


def test_key_rotation_accepts_the_previous_key_too() -> None:
    new_psk = bytes.fromhex(generate_key())
    new = direction_key(new_psk, "mobile")
    o = Opener([new, UP])
    assert o.open(Sealer(UP, counter_epochs()).seal(b"old"))  # type: ignore[arg-type]
    assert o.open(Sealer(new, counter_epochs(10)).seal(b"new"))  # type: ignore[arg-type]


def test_keys_and_state_dirs_are_checked(tmp_path: Path) -> None:
    assert parse_key(" " + "ab" * 16 + "\n" + "cd" * 16 + "\n") == bytes.fromhex(
        "ab" * 16 + "cd" * 16
    )
    for bad in ("", "ab" * 31, "ab" * 33, "xy" * 32, "00" * 32):
        with pytest.raises(ConfigError):
            parse_key(bad)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match=r"security\.state_dir"):
        check_state_dir(blocker / "state")
    with pytest.raises(SecurityError):
        EpochStore(blocker / "epoch").next()
    (tmp_path / "garbled").write_text("twelve\n")
    with pytest.raises(SecurityError):
        EpochStore(tmp_path / "garbled").next()


@pytest.mark.parametrize("text", ["", "\n", "-3\n", str(1 << 32) + "\n", "\xff\xfe"])
def test_an_epoch_or_mark_file_that_is_not_one_never_starts_over(tmp_path: Path, text: str) -> None:
    """An empty epoch file once read as 0: the next epoch was 1 again, the same nonces under
    the same key; -3 gave epoch -2 and an OverflowError at the first packet. A missing file is
    a first start; one that is there must hold a number in range, or nothing starts."""
    store = EpochStore(tmp_path / "epoch")
    assert [store.next(), store.next()] == [1, 2]
    (tmp_path / "epoch").write_text(text)
    with pytest.raises(SecurityError, match="remove it only together with the key"):
        store.next()
    (tmp_path / "mark").write_text(text)
    if not text.strip():  # the mark, written unsynced once a second, may come back empty
        assert Opener([UP], state=tmp_path / "mark").highest == 0
    elif text.strip() != str(1 << 32):  # (a mark may be that large: it is 64 bits)
        with pytest.raises(SecurityError):
            Opener([UP], state=tmp_path / "mark")


def test_two_daemons_check_one_state_dir_at_once(tmp_path: Path) -> None:
    """The testbed's base and mobile start together and share a state directory: neither may
    take the other's write probe for a failure (one probe name for both failed a start)."""
    errors: list[BaseException] = []

    def check() -> None:
        try:
            for _ in range(300):
                check_state_dir(tmp_path / "security")
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    workers = [threading.Thread(target=check) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert list((tmp_path / "security").iterdir()) == []


def secured_link() -> tuple[Fragmenter, Sealer, Reassembler, Opener]:
    sealer, opener = pair()
    return (
        Fragmenter(32, 1500 + OVERHEAD),
        sealer,
        Reassembler(1500 + OVERHEAD, authenticate=opener.open),
        opener,
    )


def test_forged_packets_with_good_crc_do_not_disturb_the_real_ones() -> None:
    frag, sealer, rx, opener = secured_link()
    forger = Fragmenter(32, 1500 + OVERHEAD, first_number=40000)  # valid frames, CRC, no key
    now = 0.0
    got = []
    for i in range(20):
        for frame in forger.fragment(os.urandom(60)):  # plain packet, no tag
            now += 0.001
            assert rx.receive(frame, now) is None
        for frame in frag.fragment(sealer.seal(bytes([i]) * 50)):
            now += 0.001
            out = rx.receive(frame, now)
            if out is not None:
                got.append(out)
    assert got == [bytes([i]) * 50 for i in range(20)]
    assert rx.drops[DropReason.REJECTED] == 20 and opener.drops[SecureDrop.AUTH] == 20


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(
    junk=st.lists(st.binary(min_size=0, max_size=32), max_size=40),
    plan=st.lists(st.integers(0, 3), min_size=1, max_size=60),
    seed=st.integers(0, 2**32 - 1),
)
def test_fuzz_frames_never_deliver_anything_but_genuine_packets_once(
    junk: list[bytes], plan: list[int], seed: int
) -> None:
    """Genuine frames interleaved with arbitrary bytes, replays of genuine frames, and
    forged-but-well-formed frames: every delivered packet is a genuine one, delivered at most
    once, and nothing raises."""
    rng = random.Random(seed)
    frag, sealer, rx, _ = secured_link()
    genuine = [rng.randbytes(rng.randrange(0, 200)) for _ in range(8)]
    genuine_frames = [frag.fragment(sealer.seal(p)) for p in genuine]
    forger = Fragmenter(32, 1500 + OVERHEAD)
    now = 0.0
    delivered = []
    sent = 0
    for step in plan:
        if step == 0 and sent < len(genuine):
            frames = genuine_frames[sent]
            sent += 1
        elif step == 1 and junk:
            frames = [junk[rng.randrange(len(junk))]]
        elif step == 2 and sent:
            frames = genuine_frames[rng.randrange(sent)]  # replay a whole genuine packet
        else:
            frames = forger.fragment(rng.randbytes(rng.randrange(1, 120)))
        for f in frames:
            now += rng.choice((0.0005, 0.002, 1.5))
            out = rx.receive(f, now)
            if out is not None:
                delivered.append(out)
    allowed = Counter(genuine[:sent])
    assert all(n <= allowed[p] for p, n in Counter(delivered).items()), "forged or replayed"
