"""Sealed packets: what authenticates is delivered once; nothing else is, whatever the air or
an attacker does. Sans-IO: sealer, opener and reassembler, no radio."""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longge.daemon.keystate import EpochStore, MarkStore, check_state_dir, floor_file
from longge.errors import ConfigError
from longge.protocol import DropReason, Fragmenter, Reassembler
from longge.protocol.secure import (
    COUNTER_SPACE,
    FIRST_HEAD,
    OVERHEAD,
    SALT_LEN,
    STAMP_LEN,
    WINDOW,
    Floor,
    Mark,
    Opener,
    Sealer,
    SecureDrop,
    SecurityError,
    direction_key,
    generate_key,
    parse_key,
)

PSK = bytes.fromhex(generate_key())
MOBILE, BASE = "10.24.0.2", "10.24.0.1"
UP = direction_key(PSK, MOBILE, BASE)  # mobile -> base
DOWN = direction_key(PSK, BASE, MOBILE)


def counter_epochs(start: int = 0) -> Any:
    """Epochs 1, 2, ... (after ``start``), as an EpochStore gives them, without a file."""
    last = [start]

    def next_epoch(at_least: int = 0) -> int:
        last[0] = max(last[0] + 1, at_least)
        return last[0]

    return next_epoch


def kept_opener(path: Path, clock: Any = None) -> Opener:
    """An opener whose mark lives in ``path`` (as the daemon's: keystate.MarkStore)."""
    store = MarkStore(path)
    return Opener([UP], store.load(), store.save, clock=clock)


def mark_seq(path: Path) -> int:
    return int(path.read_text().split()[0])


def pair(tmp_path: Path | None = None) -> tuple[Sealer, Opener]:
    epochs = EpochStore(tmp_path / "epoch").next if tmp_path else counter_epochs()
    return Sealer(UP, epochs), Opener([UP])


def test_round_trip_costs_32_bytes_per_packet() -> None:
    s, o = pair()
    for size in (0, 1, 100, 1500):
        packet = os.urandom(size)
        sealed = s.seal(packet, 0)
        assert len(sealed) == size + OVERHEAD == size + 32
        # encrypted, not just signed (a packet of a few bytes may turn up by chance: a 1-byte
        # packet is somewhere in its 29 sealed bytes 1 time in 9)
        assert size < 16 or packet not in sealed
        assert o.open(sealed) == packet
    assert o.opened == 4 and not o.drops


def test_every_single_bit_flip_is_refused() -> None:
    s, o = pair()
    sealed = s.seal(b"a packet worth protecting", 0)
    for bit in range(len(sealed) * 8):
        bad = bytearray(sealed)
        bad[bit // 8] ^= 1 << (bit % 8)
        assert o.open(bytes(bad)) is None
    assert sum(o.drops.values()) == len(sealed) * 8 and o.opened == 0
    assert o.open(sealed) == b"a packet worth protecting"  # the genuine one still opens


def test_wrong_key_other_direction_and_short_input_are_refused() -> None:
    _, o = pair()
    other = Sealer(direction_key(bytes.fromhex(generate_key()), MOBILE, BASE), counter_epochs())
    reflected = Sealer(DOWN, counter_epochs())
    assert o.open(other.seal(b"x", 0)) is None
    assert o.open(reflected.seal(b"x", 0)) is None  # base->mobile traffic sent back to the base
    assert o.open(b"short") is None
    assert o.drops == {SecureDrop.AUTH: 2, SecureDrop.SHORT: 1}


def test_replays_are_refused_and_late_packets_accepted_once() -> None:
    s, o = pair()
    sealed = [s.seal(bytes([i]), 0) for i in range(WINDOW + 10)]
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
            sealed = s.seal(b"p", 0)
            assert sealed[STAMP_LEN:FIRST_HEAD] not in seen
            seen.add(sealed[STAMP_LEN:FIRST_HEAD])
            assert opener.open(sealed) == b"p", i
    assert (tmp_path / "epoch").read_text().strip() == "3"


def test_counter_wrap_moves_to_a_new_epoch() -> None:
    epochs = counter_epochs()
    s = Sealer(UP, epochs)
    s._counter = COUNTER_SPACE - 1  # 4e9 packets take too long
    o = Opener([UP])
    a, b = s.seal(b"last of epoch 1", 0), s.seal(b"first of epoch 2", 0)
    assert int.from_bytes(a[4:8], "big") == 1 and int.from_bytes(b[4:8], "big") == 2
    assert int.from_bytes(b[8:12], "big") == 0
    assert o.open(a) and o.open(b) and o.open(a) is None


def test_a_restarted_receiver_still_refuses_what_it_accepted(tmp_path: Path) -> None:
    s = Sealer(UP, counter_epochs())
    sealed = [s.seal(bytes([i]), 0) for i in range(10)]
    first = kept_opener(tmp_path / "mark")
    for p in sealed[:6]:
        assert first.open(p) is not None
    first.flush()
    again = kept_opener(tmp_path / "mark")
    assert all(again.open(p) is None for p in sealed[:6])
    # a clean stop recorded all it accepted (whole): the same epoch goes on
    assert [again.open(p) for p in sealed[6:8]] == [bytes([6]), bytes([7])]
    # killed now (no flush): the next start takes the epoch as closed (secure.py, "A restarted
    # receiver"): what comes of it is stale, the sender told to move on, taken under its next
    third = kept_opener(tmp_path / "mark")
    assert [third.open(p) for p in sealed] == [None] * 10
    assert third.drops[SecureDrop.STALE] == 2  # (8, 9: never accepted, yet of a closed epoch)
    assert s.skip_past(third.stale_floor) and s.epoch == 2
    assert third.open(s.seal(b"next", 0)) == b"next"


def test_a_replayed_old_packet_moves_no_sender_and_a_killed_receiver_takes_no_replay(
    tmp_path: Path,
) -> None:
    """Issue 67, items 5 and 6: a stranger replays a packet of the sender's previous epoch.
    It is stale, and the floor the receiver sends back names the epoch and salt it refused:
    the genuine sender, sealing under another, does not move (it moved to a new epoch, an
    fsync, at every replay). And a receiver killed (no flush) between two writes of its mark
    refuses, once started again, every packet it had accepted, though the mark on disk lags."""
    s = Sealer(UP, counter_epochs())
    o = kept_opener(tmp_path / "mark", clock=lambda: 0.0)  # (its once-a-second writes: none)
    old = s.seal(b"epoch 1", 0)
    assert o.open(old) == b"epoch 1"
    assert s.skip_past(Floor(1, 1, s.salt)) and s.epoch == 2  # (the sender restarted)
    assert o.open(s.seal(b"epoch 2", 0)) == b"epoch 2"
    assert o.open(old) is None and o.drops[SecureDrop.STALE] == 1
    floor = o.stale_floor
    assert floor.refused == 1 and not s.skip_past(floor) and s.epoch == 2
    # killed: the mark written once (at the new epoch, synced), what came after not recorded
    sealed = [s.seal(bytes([i]), 0) for i in range(20)]
    assert all(o.open(p) is not None for p in sealed)
    again = kept_opener(tmp_path / "mark")
    assert all(again.open(p) is None for p in sealed)


def test_the_replay_mark_is_written_at_most_once_a_second_as_the_daemon_runs_it(
    tmp_path: Path,
) -> None:
    """With a clock (as the daemon builds it) the receiver writes its mark at most once per
    SAVE_EVERY_S, and tick() writes a mark that waited; a crash loses at most that second."""
    from longge.protocol.secure import SAVE_EVERY_S

    now = [100.0]
    s = Sealer(UP, counter_epochs())
    mark = tmp_path / "mark"
    o = kept_opener(mark, clock=lambda: now[0])
    writes = []
    for i in range(50):
        assert o.open(s.seal(bytes([i]), 0)) is not None
        if mark.exists():
            writes.append(mark_seq(mark))
        now[0] += SAVE_EVERY_S / 10  # 10 packets a second
    # the first packet is written at once (a new epoch), then about once a second
    assert 5 <= len(set(writes)) <= 7, sorted(set(writes))
    before = mark_seq(mark)
    assert before < o.highest  # the newest packets wait for the next second ...
    o.tick()  # ... not even a tick writes them early
    assert mark_seq(mark) == before
    now[0] += SAVE_EVERY_S
    o.tick()  # a second later it does
    assert mark_seq(mark) == o.highest


def test_key_rotation_accepts_the_previous_key_too() -> None:
    new_psk = bytes.fromhex(generate_key())
    new = direction_key(new_psk, MOBILE, BASE)
    o = Opener([new, UP])
    assert o.open(Sealer(UP, counter_epochs()).seal(b"old", 0))
    assert o.open(Sealer(new, counter_epochs(10)).seal(b"new", 0))


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


def test_a_state_dir_others_can_write_or_do_not_own_is_refused(tmp_path: Path) -> None:
    """Issue 67: whoever can write in it can roll the nonce epochs back."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    shared.chmod(0o777)
    with pytest.raises(ConfigError, match=r"security\.state_dir.*chmod 700"):
        check_state_dir(shared)
    link = tmp_path / "link"
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    link.symlink_to(own)
    with pytest.raises(ConfigError, match=r"security\.state_dir.*not a link"):
        check_state_dir(link)
    check_state_dir(own)  # (its owner's, 700: fine)
    if os.geteuid() == 0:
        os.chown(own, 65534, 65534)
        with pytest.raises(ConfigError, match=r"security\.state_dir.*chown root"):
            check_state_dir(own)


def test_a_link_planted_at_a_state_files_temporary_name_is_not_written_through(
    tmp_path: Path,
) -> None:
    """Issue 67: the epoch's file is written beside itself and renamed; a symlink planted at
    that fixed name once had the daemon (root) write through it."""
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    store = EpochStore(tmp_path / "epoch")
    (tmp_path / "epoch.tmp").symlink_to(victim)
    first = store.next()
    assert victim.read_text() == "untouched\n"
    assert (tmp_path / "epoch").read_text().strip() == str(first)
    assert not (tmp_path / "epoch.tmp").exists()


@pytest.mark.parametrize("text", ["", "\n", "-3\n", str(1 << 32) + "\n", "\xff\xfe"])
def test_an_epoch_or_mark_file_that_is_not_one_never_starts_over(tmp_path: Path, text: str) -> None:
    """An empty epoch file once read as 0: the next epoch was 1 again, the same nonces under
    the same key; -3 gave epoch -2 and an OverflowError at the first packet. A missing file is
    a first start; one that is there must hold a number in range, or nothing starts. A mark
    is a number and a salt; the unsynced mark may come back empty (then its floor holds)."""
    store = EpochStore(tmp_path / "epoch")
    assert [store.next(), store.next()] == [1, 2]
    (tmp_path / "epoch").write_text(text)
    with pytest.raises(SecurityError, match="remove it only together with the key"):
        store.next()
    (tmp_path / "mark").write_text(text)
    if not text.strip():
        assert MarkStore(tmp_path / "mark").load() is None
        floor_file(tmp_path / "mark").write_text(text)  # the synced floor is never empty
    with pytest.raises(SecurityError, match="remove it only together with the key"):
        MarkStore(tmp_path / "mark").load()


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
        Reassembler(1500 + OVERHEAD, secured=opener),
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
        for frame in frag.fragment(sealer.seal(bytes([i]) * 50, frag.number_for())):
            now += 0.001
            out = rx.receive(frame, now)
            if out is not None:
                got.append(out)
    assert got == [bytes([i]) * 50 for i in range(20)]
    # refused at their first frame already (no stamp): never a packet in progress
    assert rx.drops[DropReason.REFUSED_FIRST] == 20 and opener.drops[SecureDrop.FORGED_FIRST] == 20
    assert rx.drops[DropReason.REJECTED] == 0


def sealed_frames(frag: Fragmenter, sealer: Sealer, packet: bytes) -> list[bytes]:
    return frag.fragment(sealer.seal(packet, frag.number_for()))


def test_a_forged_first_frame_after_each_genuine_one_costs_nothing() -> None:
    """What ``experiment hostile``'s ``first`` sends (it cost every ESB packet: 0.00 of the
    goodput): after each genuine first frame, one with the same header and number and other
    bytes behind; and, once the packet is under way, the genuine first frame again (a replay
    of a real one, stamp and all). Every genuine packet is delivered; none is interrupted."""
    frag, sealer, rx, opener = secured_link()
    rng = random.Random(7)
    got, now = [], 0.0
    for i in range(30):
        frames = sealed_frames(frag, sealer, bytes([i]) * 400)
        forged = frames[0][:3] + rng.randbytes(len(frames[0]) - 3)
        for k, frame in enumerate(frames):
            now += 0.001
            out = rx.receive(frame, now)
            if k == 0:
                assert rx.receive(forged, now) is None
            if k == 5:
                assert rx.receive(frames[0], now) is None
            if out is not None:
                got.append(out)
    assert got == [bytes([i]) * 400 for i in range(30)]
    assert rx.drops[DropReason.INTERRUPTED] == 0 and rx.drops[DropReason.REFUSED_FIRST] == 60
    assert opener.drops[SecureDrop.FORGED_FIRST] == 30


def test_an_older_packets_first_frame_does_not_take_a_newer_ones_place() -> None:
    """A genuine first frame recorded 8 packets earlier (same place in the reassembler, its
    packet never completed there) comes while the newer packet is under way: refused, the
    newer one delivered. Its stamp is bound to its number: moved to another place, refused."""
    frag, sealer, rx, opener = secured_link()
    old = sealed_frames(frag, sealer, b"o" * 200)
    for k in range(7):
        sealed_frames(frag, sealer, bytes([k]) * 10)  # sent, not heard here
    new = sealed_frames(frag, sealer, b"n" * 200)
    assert old[0][0] == new[0][0]  # the same header: number mod 8, index 0
    assert rx.receive(new[0], 0.0) is None
    assert rx.receive(old[0], 0.0) is None  # no fresher than the packet in its place
    moved = bytes([old[0][0] ^ 0x08]) + old[0][1:2] + bytes([old[0][2] ^ 0x01]) + old[0][3:]
    assert rx.receive(moved, 0.0) is None  # another number: the stamp fails
    out = [rx.receive(f, 0.0) for f in new[1:]]
    assert out[-1] == b"n" * 200
    assert rx.drops[DropReason.REFUSED_FIRST] == 2 and rx.drops[DropReason.INTERRUPTED] == 0
    assert opener.drops[SecureDrop.FORGED_FIRST] == 1


def test_a_restarted_sender_still_takes_the_place_of_its_unfinished_packet() -> None:
    """A sender that restarts mid-packet (a new epoch: fresher) ends the packet in progress
    in that place and its new packet is delivered, as on an open link."""
    frag, sealer, rx, _ = secured_link()
    epochs = counter_epochs(5)
    before = sealed_frames(frag, sealer, b"b" * 200)
    restarted = Sealer(UP, epochs)
    again = Fragmenter(32, 1500 + OVERHEAD, first_number=frag.number_for() - 2)
    after = again.fragment(restarted.seal(b"a" * 200, again.number_for()))
    assert after[0][0] == before[0][0]
    for f in before[:4]:
        assert rx.receive(f, 0.0) is None
    out = [rx.receive(f, 0.0) for f in after]
    assert out[-1] == b"a" * 200 and rx.drops[DropReason.INTERRUPTED] == 1


def test_a_secured_link_refuses_frames_too_short_for_a_first_frames_proof() -> None:
    """A first frame holds number, stamp and nonce (18 bytes): a secured ESB link's frames
    are at least 19 bytes, said by key (an open link is not concerned; stream mode's are 32)."""
    from longge.config import NodeConfig, PeerConfig
    from longge.radio.options import RadioOptions

    def config(payload: int, key: bytes | None) -> NodeConfig:
        peer = PeerConfig(address="10.24.0.2", key=key)
        radio = RadioOptions(payload=payload)
        return NodeConfig(
            role="base", address="10.24.0.1/24", radio=radio, peers=(peer,), insecure=key is None
        )

    key = bytes.fromhex(generate_key())
    with pytest.raises(ConfigError) as err:
        config(18, key)
    assert err.value.key == "radio.payload" and "19..32" in str(err.value)
    assert config(19, key).radio.payload == 19
    assert config(8, None).radio.payload == 8


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
    genuine_frames = [frag.fragment(sealer.seal(p, frag.number_for())) for p in genuine]
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


def test_no_nonce_repeats_across_restarts_a_restored_state_dir_or_a_clone(tmp_path: Path) -> None:
    """Before the salt, the nonce was the epoch and the counter: a state file rolled back (an
    SD card image restored) or copied (a cloned mobile) sealed the same nonces again under the
    same key, which gives away the XOR of two plaintexts and lets a forger make tags."""
    epoch = tmp_path / "epoch"
    nonces: list[bytes] = []

    def boot() -> Sealer:
        return Sealer(UP, EpochStore(epoch).next)

    def run(s: Sealer) -> None:
        nonces.extend(s.seal(b"p", 0)[STAMP_LEN:FIRST_HEAD] for _ in range(20))

    run(boot())
    image = epoch.read_text()  # the card's image, taken here
    run(boot())
    run(boot())
    epoch.write_text(image)  # restored
    restored = boot()
    epoch.write_text(image)  # and cloned: another node with the same files, at once
    clone = boot()
    assert restored.epoch == clone.epoch == 2  # the epoch repeats ...
    run(restored)
    run(clone)
    assert len(set(nonces)) == len(nonces) == 100  # ... the nonce does not


def test_two_mobiles_sharing_a_key_seal_under_different_keys() -> None:
    """Keys from the two nodes' identities, not their roles: two mobiles given one key (or a
    base that serves two) never seal under the same direction key, and neither's packets
    open as the other's."""
    other_mobile = "10.24.0.3"
    keys = {
        direction_key(PSK, MOBILE, BASE),
        direction_key(PSK, other_mobile, BASE),
        direction_key(PSK, BASE, MOBILE),
        direction_key(PSK, BASE, other_mobile),
    }
    assert len(keys) == 4
    from_other = Sealer(direction_key(PSK, other_mobile, BASE), counter_epochs())
    opener = Opener([UP])
    assert opener.open(from_other.seal(b"x", 0)) is None
    assert opener.drops == {SecureDrop.AUTH: 1}
    with pytest.raises(ValueError):
        direction_key(PSK, MOBILE, MOBILE)


def test_a_restored_sender_is_refused_until_it_seals_past_the_floor_it_is_told() -> None:
    """A sender back at an epoch the receiver has seen (another salt) is refused as stale,
    authenticated first: the receiver names the epoch to move past; a sender told so is taken
    again. What it sent before stays refused (replays), and a forger's packets move nothing."""
    epochs = counter_epochs()
    first = Sealer(UP, epochs)
    o = Opener([UP])
    old = [first.seal(bytes([i]), 0) for i in range(5)]
    assert all(o.open(p) is not None for p in old)
    restored = Sealer(UP, counter_epochs())  # its state rolled back: epoch 1 again
    assert restored.epoch == first.epoch == 1
    assert o.open(restored.seal(b"again", 0)) is None
    assert o.drops[SecureDrop.STALE] == 1 and o.stale_floor == Floor(1, 1, restored.salt)
    forged = bytearray(restored.seal(b"forged", 0))
    forged[-1] ^= 1
    assert o.open(bytes(forged)) is None and o.drops[SecureDrop.AUTH] == 1
    assert restored.skip_past(o.stale_floor) and restored.epoch == 2
    assert not restored.skip_past(Floor(1, 1, restored.salt))  # (an old floor moves nothing)
    assert o.open(restored.seal(b"back", 0)) == b"back"
    assert all(o.open(p) is None for p in old)
    assert o.open(first.seal(b"the first incarnation, now behind", 0)) is None


def test_a_power_cut_that_empties_the_mark_falls_back_to_the_synced_floor(tmp_path: Path) -> None:
    """The mark is written unsynced once a second; a power cut may leave it empty, and an
    empty mark once read as 'nothing seen': every packet ever sent could be replayed. The
    floor, synced at each new epoch and every FLOOR_EVERY_S, holds instead."""
    from longge.protocol.secure import FLOOR_EVERY_S

    now = [0.0]
    s = Sealer(UP, counter_epochs())
    sent = []
    o = kept_opener(tmp_path / "mark", clock=lambda: now[0])
    for i in range(40):
        sent.append(s.seal(bytes([i]), 0))
        assert o.open(sent[-1]) is not None
        now[0] += FLOOR_EVERY_S / 10
    floor = MarkStore(tmp_path / "mark").load()
    assert floor is not None
    (tmp_path / "mark").write_text("")  # the power cut
    again = kept_opener(tmp_path / "mark")
    refused = [again.open(p) is None for p in sent]
    # everything up to the last synced floor stays refused (at least 30 of 40: synced at 0, 10,
    # 20 and 30); only what came after it could be taken once more
    assert all(refused[:31]), refused.index(False)
    assert again.highest & 0xFFFF_FFFF >= 30  # (the counter within epoch 1)


def test_a_mark_that_cannot_be_recorded_is_said_once_and_its_return_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The state folder stops taking writes (here the mark's temporary file is a directory,
    which refuses root too): the save fails, the log names the folder once, not once a second;
    once writes work again the mark is recorded and the log says so."""
    store = MarkStore(tmp_path / "mark")
    blocker = tmp_path / "mark.tmp"
    blocker.mkdir()
    mark = Mark(5, bytes(SALT_LEN))
    assert not store.save(mark, sync=False) and not store.save(mark, sync=True)
    said = capsys.readouterr().err
    assert said.count(str(tmp_path)) == 1 and "cannot record the replay mark" in said, said
    blocker.rmdir()
    assert store.save(mark, sync=True) and store.load() == mark
    assert "recorded in" in capsys.readouterr().err


def test_sealed_packets_that_never_came_are_counted_missing_late_ones_are_not() -> None:
    """A sealed link: the sealing numbers a later packet skipped, less those that came late
    within the window; a new epoch (a sender that started again) counts nothing."""
    s, o = pair()
    sealed = [s.seal(bytes([i]) * 10, 0) for i in range(10)]
    for i in (0, 1, 4, 5, 9):
        assert o.open(sealed[i]) is not None
    assert o.missing == 2 + 3  # 2, 3 and 6, 7, 8
    assert o.open(sealed[3]) is not None and o.missing == 4  # (late, in the window)
    before = s.epoch
    assert s.skip_past(Floor(before, before, s.salt)) and s.epoch > before  # numbers from 0
    assert o.open(s.seal(b"x", 0)) is not None and o.missing == 4
    fresh = [s.seal(bytes([i]), 0) for i in range(3)]  # its numbers 1, 2, 3
    assert o.open(fresh[2]) is not None and o.missing == 6
    assert o.open(fresh[0]) is not None and o.missing == 5  # (late, in the window)
    s.skip_past(Floor(s.epoch, s.epoch, s.salt))
    s.seal(b"lost", 0)  # the new epoch's first (number 0), lost on the way
    assert o.open(s.seal(b"y", 0)) is not None and o.missing == 6
