"""The emulated Wi-Fi (longge/air/interferer.py): the spec's forms, and the ``traffic``
model's bursts, gaps and changing load against what it promises (its busy share over time
is DUTY, its bursts 0.1-4 ms, its load different from one quarter second to the next)."""

from __future__ import annotations

import itertools
import statistics

import pytest

from longge.air.interferer import (
    EPOCH_NS,
    TXOP_MIN_NS,
    TXOP_SPAN_NS,
    Interferer,
    WifiSpec,
    epoch_bursts,
    epoch_duty_ppm,
    parse_interferer,
)
from longge.errors import ConfigError


def test_the_spec_keeps_its_old_meaning_and_takes_a_model() -> None:
    assert parse_interferer("wifi:6") == WifiSpec(6, 0.3, "slots")
    assert parse_interferer("wifi:13:0.5") == WifiSpec(13, 0.5, "slots")
    assert parse_interferer("wifi:13:0.5:traffic") == WifiSpec(13, 0.5, "traffic")
    for bad in ("wifi:14", "wifi:6:0", "wifi:6:0.3:jam", "wlan:6", "wifi:6:0.3:traffic:x"):
        with pytest.raises(ConfigError, match="--interferer"):
            parse_interferer(bad)


@pytest.mark.parametrize("duty", [0.1, 0.3, 0.5, 0.9])
def test_traffic_is_busy_its_duty_of_the_time_in_bursts_and_gaps(duty: float) -> None:
    busy, lengths, shares = 0, [], []
    epochs = 40
    for epoch in range(epochs):
        bursts = epoch_bursts(72, duty, epoch)
        share = sum(b - a for a, b in bursts) / EPOCH_NS
        shares.append(share)
        busy += sum(b - a for a, b in bursts)
        lengths += [b - a for a, b in bursts[:-1]]  # (the last one may be cut at the end)
        assert all(a < b for a, b in bursts)
        assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(bursts))
    assert busy / (epochs * EPOCH_NS) == pytest.approx(duty, rel=0.15)
    assert min(lengths) >= TXOP_MIN_NS and max(lengths) <= TXOP_MIN_NS + TXOP_SPAN_NS
    if duty <= 0.5:  # (a load that changes: quarter seconds apart by a fifth or more)
        assert statistics.pstdev(shares) > 0.1 * duty


def test_an_epoch_s_load_is_half_to_one_and_a_half_its_duty_and_never_over_one() -> None:
    for epoch in range(200):
        d = epoch_duty_ppm(37, 0.4, epoch)
        assert 200_000 <= d <= 600_000
        assert epoch_duty_ppm(37, 0.9, epoch) <= 1_000_000


def test_active_answers_as_the_bursts_say() -> None:
    w = Interferer(72, duty=0.3, model="traffic")
    bursts = epoch_bursts(72, 0.3, 2)
    (a, b), (c, _) = bursts[3], bursts[4]
    assert w.active(a, a) and w.active(b - 1, b - 1) and w.active(a - 10, a)
    assert not w.active(b, c - 1)  # (the gap between two bursts)
    assert w.active(b, c)
    # an interval across an epoch's end
    first_next = epoch_bursts(72, 0.3, 3)[0][0]
    assert w.active(3 * EPOCH_NS - 1, first_next)


def test_an_interferer_near_one_node_is_heard_by_its_radios_only() -> None:
    w = Interferer(72, duty=1.0, near="base")
    assert w.heard_by("base-rx") and w.heard_by("base-tx")
    assert not w.heard_by("mobile-rx") and not w.heard_by("basement-rx")
    assert Interferer(72).heard_by("mobile-rx")
