"""A node's picture of the band (protocol/band.py), on a fake clock: readings become busy
shares that age, a peer's levels count at their end, and a move's target is the quietest
channel at both ends, away from the failing ones."""

from __future__ import annotations

import random

import pytest

from longge.protocol.band import (
    LEVELS_BYTES,
    MEMORY_S,
    UNKNOWN,
    UNKNOWN_SHARE,
    WIFI_HALF_WIDTH,
    Band,
    parse_levels,
)

ISM = tuple(range(84))


def read(band: Band, channel: int, duty: float, n: int, now: float, rng: random.Random) -> None:
    for _ in range(n):
        band.reading(channel, rng.random() < duty, now)


def test_a_channel_s_share_is_the_share_of_its_readings_that_were_busy() -> None:
    band, rng = Band(ISM), random.Random(1)
    assert band.share(40, 0.0) is None  # (never read: unknown)
    read(band, 40, 0.5, 400, 0.0, rng)
    read(band, 10, 0.0, 400, 0.0, rng)
    assert band.share(40, 0.0) == pytest.approx(0.5, abs=0.06)
    assert band.share(10, 0.0) == 0.0
    assert band.score(10, 0.0) == UNKNOWN_SHARE  # (the peer has said nothing of it)


def test_old_readings_weigh_less_so_a_network_that_left_is_forgotten() -> None:
    band = Band(ISM)
    for _ in range(20):
        band.reading(40, True, 0.0)
    for _ in range(20):
        band.reading(40, False, 4 * MEMORY_S)
    # 20 busy readings at a sixteenth of their weight against 20 quiet ones
    assert band.share(40, 4 * MEMORY_S) == pytest.approx(1 / 17)
    assert band.share(40, 20 * MEMORY_S) is None  # (too little weight left: unknown again)


def test_the_peer_s_levels_count_at_its_end_for_as_long_as_they_are_believed() -> None:
    """Wi-Fi beside the peer only: our readings are quiet, its levels say busy, and the
    channel's score is the worse of the two."""
    mine, theirs, rng = Band(ISM), Band(ISM), random.Random(2)
    for c in ISM:
        read(mine, c, 0.0, 10, 0.0, rng)
        read(theirs, c, 0.6 if 61 <= c <= 83 else 0.0, 30, 0.0, rng)
    levels = theirs.levels(0.0)
    assert len(levels) == LEVELS_BYTES
    mine.peer_levels(levels, 0.0)
    assert mine.score(70, 1.0) >= 0.5 and mine.score(20, 1.0) == 0.0
    assert mine.best(1.0, failing=(76,), keep_apart=(81,)) <= 76 - WIFI_HALF_WIDTH - 1
    read(mine, 70, 0.0, 10, 60.0, rng)
    assert mine.score(70, 60.0) == UNKNOWN_SHARE  # (a report a minute old: not believed)


def test_a_move_goes_far_from_the_failing_channels_to_the_quietest_and_keeps_apart() -> None:
    band, rng = Band(ISM), random.Random(3)
    for c in ISM:
        read(band, c, 0.5 if 26 <= c <= 48 else 0.0, 10, 0.0, rng)  # Wi-Fi 6 beside us
    to = band.best(0.0, failing=(76, 81), keep_apart=(76,))
    assert to is not None
    assert not 26 <= to <= 48  # (not into the network we hear)
    assert min(abs(to - 76), abs(to - 81)) > WIFI_HALF_WIDTH
    # only the failing channels' neighbourhood allowed: the farthest of it, never theirs
    near = Band(range(70, 84))
    assert near.best(0.0, failing=(76, 81), keep_apart=(81,)) == 70
    assert Band((76, 81)).best(0.0, failing=(76, 81)) is None


def test_the_sweep_reads_every_allowed_channel_and_the_link_s_neighbourhood_most() -> None:
    """Never the link's channels or the next two (its own frames are heard there); every
    other reading beside them, where Wi-Fi over the link would show."""
    band = Band(ISM)
    seen = [band.next_channel(own=(76, 81)) for _ in range(400)]
    assert set(seen) == set(ISM) - set(range(74, 84))
    near = set(range(65, 74))
    assert band.neighbourhood((76, 81)) == sorted(near)
    assert sum(c in near for c in seen) >= 200
    assert Band((5,)).next_channel(own=(5,)) is None


def test_near_tells_wifi_over_the_link_from_a_weak_path() -> None:
    band, rng = Band(ISM), random.Random(4)
    for t in range(200):
        c = band.next_channel(own=(76, 81))
        assert c is not None
        band.reading(c, 61 <= c <= 83 and rng.random() < 0.5, t * 0.01)  # Wi-Fi 13
    busy, total = band.near((76, 81), since=1.0)
    assert total >= 50 and busy >= 0.3 * total
    assert band.near((10, 15), since=1.0)[0] == 0  # (no Wi-Fi beside channels 10 and 15)


def test_levels_round_trip_two_bits_a_channel() -> None:
    band = Band(ISM)
    for _ in range(10):
        band.reading(0, True, 0.0)
        band.reading(83, False, 0.0)
    levels = parse_levels(band.levels(0.0))
    assert levels[0] == 3 and levels[83] == 1 and levels[40] == UNKNOWN
    with pytest.raises(ValueError):
        parse_levels(b"\x00" * 3)
