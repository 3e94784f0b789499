"""Who is below their fair share (protocol/fair_share.py): the water level over the keys'
rates, a young key's rate, the drain rate, the bound on keys tracked."""

from __future__ import annotations

import math

import pytest

from longge.protocol.fair_share import (
    ACTIVE_S,
    BELOW_SHARE,
    RESWEEP_S,
    FairShare,
    key_rate,
    water_level,
)


def test_the_water_level_gives_small_keys_their_own_and_splits_the_rest() -> None:
    # a call (10) beside three bulk flows asking more than they can get: (100 - 10) / 3
    assert water_level([10.0, 50.0, 60.0, 70.0], 100.0) == pytest.approx(30.0)
    # all ask for less than the link: the level is the largest's own, which is not below it
    assert water_level([5.0, 10.0, 20.0], 100.0) == 20.0
    # one-packet flows barely move it
    assert water_level([0.1] * 50 + [80.0, 80.0], 100.0) == pytest.approx((100 - 5) / 2)
    assert water_level([], 100.0) == 100.0


def test_a_young_keys_rate_is_its_bytes_over_its_age_and_its_first_reads_infinite() -> None:
    assert key_rate([500.0, 3.0, 3.0], 3.0) == math.inf
    # 200 bytes every 20 ms for 5 s: 10 kB/s (the EWMA's young bias corrected)
    share, t = FairShare(16), 0.0
    while t < 5.0:
        share.asked(b"call", 200, t)
        t += 0.02
    assert key_rate(share.rates[b"call"], t) == pytest.approx(10_000, rel=0.03)
    share2, t = FairShare(16), 0.0
    while t < 0.2:  # (young: a fifth of a second seen)
        share2.asked(b"call", 200, t)
        t += 0.02
    assert key_rate(share2.rates[b"call"], t) == pytest.approx(10_000, rel=0.15)


def drain(share: FairShare, rate: float, seconds: float, start: float = 0.0) -> float:
    """The link drains ``rate`` bytes a second in 1000-byte packets with more waiting."""
    t = start
    while t < start + seconds:
        share.departed(1000, t, waiting=True)
        t += 1000 / rate
    return t


def test_below_needs_the_drain_known_and_a_rate_under_the_level() -> None:
    share = FairShare(16)
    assert not share.asked(b"call", 200, 0.0) and share.drain_rate is None
    t = drain(share, 60_000.0, 1.0)
    assert share.drain_rate == pytest.approx(60_000.0, rel=0.01)
    # three bulk keys asking 30 kB/s each, a call 10 kB/s: the level is (60 - 10) / 3
    # (new keys make the level again within RESWEEP_S: their first asks may meet the old)
    now, seen = t, {b"call": 0, b"bulk": 0}
    while now < t + 4.0:
        share.departed(600, now, waiting=True)  # (60 kB/s)
        for k in (b"b1", b"b2", b"b3"):
            below = share.asked(k, 300, now)
            seen[b"bulk"] += below and now > t + RESWEEP_S + 0.01
        if round(now * 100) % 2 == 0:
            seen[b"call"] += share.asked(b"call", 200, now)
        now += 0.01
    assert share.level == pytest.approx(50_000 / 3, rel=0.05)
    assert seen[b"bulk"] == 0 and seen[b"call"] > 150
    assert key_rate(share.rates[b"call"], now) < BELOW_SHARE * share.level


def test_keys_not_heard_go_and_a_flood_of_new_ones_is_not_tracked() -> None:
    share = FairShare(4)
    for i in range(10):
        share.asked(bytes([i]), 100, 0.0)
    assert len(share.rates) == 4
    share.asked(b"late", 100, ACTIVE_S + 1.0)  # (the sweep forgets the silent four)
    assert set(share.rates) == {b"late"}
