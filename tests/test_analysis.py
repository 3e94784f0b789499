"""Analysis on synthetic data whose answer is known by construction."""

from __future__ import annotations

import math
import random

import pytest

from longge.measure.analysis import (
    Level,
    Point,
    fit_capacity,
    fit_capacity_lossy,
    histogram_percentile,
    jain_index,
    latency_knee,
    percentile,
    quantile_interval,
    wilson_interval,
)


def hockey(capacity: float, loads: list[float], noise: float = 0.0, seed: int = 1) -> list[Point]:
    rng = random.Random(seed)
    return [Point(x, min(x, capacity) * (1 + rng.uniform(-noise, noise))) for x in loads]


LOADS = [2e3, 2e4, 2e5, 4e5, 5e5, 5.5e5, 6e5, 8e5, 1.6e6]


@pytest.mark.parametrize("capacity", [120e3, 519e3, 1.2e6])
def test_capacity_fit_recovers_the_knee(capacity: float) -> None:
    assert fit_capacity(hockey(capacity, LOADS, noise=0.02)) == pytest.approx(capacity, rel=0.03)


def test_capacity_fit_of_an_unsaturated_sweep_is_at_least_the_top() -> None:
    pts = hockey(10e6, LOADS)
    assert fit_capacity(pts) >= 1.6e6


def test_jain_index_bounds() -> None:
    assert jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([3, 1]) == pytest.approx(16 / 20)


def test_wilson_interval_covers_and_handles_zero() -> None:
    lo, hi = wilson_interval(0, 100)
    assert lo == 0.0 and 0.02 < hi < 0.05
    lo, hi = wilson_interval(10, 100)
    assert lo < 0.1 < hi
    # coverage: the interval holds the true p in about 95 % of simulated trials
    rng = random.Random(3)
    hits = 0
    for _ in range(2000):
        lost = sum(rng.random() < 0.05 for _ in range(200))
        lo, hi = wilson_interval(lost, 200)
        hits += lo <= 0.05 <= hi
    assert 0.92 < hits / 2000 < 0.98


def test_median_interval_covers_a_bimodal_median() -> None:
    # RTT at rho 0.5: half the probes find the link idle (3 ms), the others wait out a packet
    # in service (uniform 0..21 ms more). True median: just above 3 ms... computed by sampling.
    def draw(rng: random.Random) -> float:
        return 3.0 + (rng.uniform(0, 21) if rng.random() < 0.55 else rng.uniform(0, 0.2))

    rng = random.Random(5)
    truth = percentile([draw(rng) for _ in range(200_000)], 0.5)
    hits = 0
    for _ in range(400):
        xs = [draw(rng) for _ in range(200)]
        lo, hi = quantile_interval(xs, 0.5)
        assert lo <= percentile(xs, 0.5) <= hi
        hits += lo <= truth <= hi
    assert 0.92 < hits / 400 <= 1.0
    assert all(math.isnan(x) for x in quantile_interval([], 0.5))  # no data, no interval


def test_percentile_interpolates() -> None:
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile([7], 0.99) == 7
    assert percentile(list(range(101)), 0.95) == 95


def test_latency_knee_is_where_rtt_leaves_the_baseline() -> None:
    levels = [
        Level(r, m, m * 1.2)
        for r, m in [(0.2, 3.5), (0.5, 4.0), (0.8, 6.0), (0.95, 9.0), (1.05, 60.0), (1.3, 120.0)]
    ]
    knee = latency_knee(levels, baseline_ms=3.3)
    assert knee is not None and knee.rho == 1.05
    assert latency_knee(levels[:4], baseline_ms=3.3) is None


def test_histogram_percentile_reads_binned_delays() -> None:
    edges = (1, 2, 5, 10, 20, 50, 100)
    # all bytes waited between 50 and 100 ms: the median is inside that bin
    assert 50 < histogram_percentile([0, 0, 0, 0, 0, 0, 1000, 0], edges, 0.5) < 100
    # 70 % waited < 1 ms (sparse flows), 30 % about 100 ms: median small, p95 large
    counts = [700, 0, 0, 0, 0, 0, 300, 0]
    assert histogram_percentile(counts, edges, 0.5) < 1
    assert histogram_percentile(counts, edges, 0.95) > 50
    assert histogram_percentile([0, 0, 0, 0, 0, 0, 0, 5], edges, 0.5) == 100  # open last bin
    assert math.isnan(histogram_percentile([0] * 8, edges, 0.5))


def test_capacity_fit_on_a_link_that_loses_at_every_load() -> None:
    """received = min(0.6·offered, C): the plain fit reads the loss as saturation, the lossy
    fit finds C; on a loss-free link both agree."""
    offered = [190e3, 290e3, 340e3, 420e3]
    lossy = [Point(x, min(0.6 * x, 190e3)) for x in offered]
    assert fit_capacity_lossy(lossy) == pytest.approx(190e3, rel=0.02)
    assert fit_capacity(lossy) < 170e3
    clean = hockey(300e3, offered)
    assert fit_capacity_lossy(clean) == pytest.approx(fit_capacity(clean))
