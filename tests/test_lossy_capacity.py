"""Capacity on a lossy link (measure/floor.py): a link that loses a share of its packets at
every load, as ESB with few retries does on a real channel, carries min((1 − p₀)·offered, C).
tTest's search and verdict judged it as if loss meant overload: "no capacity: points contradict
C" with the capacity plain in its own table. On synthetic links with binomial losses (seeded)
the search finds C, the floor's interval holds the true floor, NDR and PDR say "none" with the
reason, and the progress never passes 100 %. The refusals of points that really contradict
each other stay (tests/test_ttest_search.py)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from fielddoc import assert_documented

from longge.measure import floor
from longge.measure.iperf import TrialResult
from longge.measure.link import Target
from longge.measure.model import datagram_frames, lossy_model
from longge.measure.report import summary_text
from longge.measure.results import ResultsDir
from longge.measure.sweep import QUICK_TTEST, PointResult, TTestPlan
from longge.measure.ttest import TTest
from longge.protocol.secure import OVERHEAD  # (the testbed is secured)
from longge.radio.options import RadioOptions

OPTS = RadioOptions()
# ESB, ARD 250 µs, ARC 2 at 5 % frame error (data and ACK): the figures in issue 38
C5, FLOOR5 = lossy_model(OPTS, 0.05, 0.05, 1.0, 1400, OVERHEAD)


def frames(length: int) -> int:
    return datagram_frames(OPTS, length, OVERHEAD)


class LossyLink(TTest):
    """TTest whose trials come from a model of a lossy link: each datagram of F frames is lost
    with 1 − (1 − r)^F; past C the excess is lost too (queue drops)."""

    def __init__(self, tmp: Path, r: float, c: float, seed: int, plan: TTestPlan = QUICK_TTEST):
        super().__init__(Target("192.0.2.1"), plan, ResultsDir(tmp), frames=frames)
        self.r, self.c = r, c
        self.rng = random.Random(seed)
        self.shown: list[float] = []
        self.progress = lambda message, done: self.shown.append(done)

    def measure(self, offered: float) -> PointResult:
        point = self.points.setdefault(offered, PointResult(offered))
        length = self.plan.datagram(offered)
        secs = self.plan.duration
        p0 = 1 - (1 - self.r) ** frames(length)
        for _ in range(self.plan.repeats):
            sent = max(1, round(offered * secs / 8 / length))
            floor_lost = sum(self.rng.random() < p0 for _ in range(sent))
            through = sent - floor_lost
            fits = int(self.c * secs / 8 / length)  # what the link carries in the trial
            got = min(through, fits)
            received = got * length * 8 / secs
            point.trials.append(TrialResult(offered, offered, received, sent, sent - got))
        return point


def per_frame(per: float, arc: int = 2) -> float:
    """ESB's residual frame loss at frame error ``per`` on data and ACK."""
    return (1 - (1 - per) ** 2) ** (arc + 1)


@pytest.mark.parametrize("seed", range(5))
def test_a_link_with_a_loss_floor_gets_its_capacity_and_floor(tmp_path: Path, seed: int) -> None:
    """Issue 38's case: 5 % frame error, ARD 250 µs, ARC 2: 4.35 % of 1400-byte datagrams lost
    at every load, C = 453.8 kbit/s. Five seeds: a capacity each time, within 3 %."""
    t = LossyLink(tmp_path, per_frame(0.05), C5, seed)
    s = t.run()
    assert s["capacity_bps"] == pytest.approx(C5, rel=0.03), s["capacity_reason"]
    lo, hi = s["loss_floor_ci95"]
    assert lo < s["loss_floor"] < hi and lo > 0.0
    assert s["loss_floor"] == pytest.approx(FLOOR5, abs=3 * (hi - lo))
    assert s["ndr_bps"] is None and "loses" in s["ndr_reason"] and "every load" in s["ndr_reason"]
    assert s["pdr_bps"] is None and "PDR: none" in s["pdr_reason"]
    text = summary_text(s)
    assert "loss floor p0 = " in text and "NDR: none" in text
    assert all(0.0 <= x <= 1.0 for x in t.shown)  # once 111 %, 122 %, 133 %, 144 %
    assert t.shown == sorted(t.shown) and t.shown[-1] == 1.0  # and never back
    assert_documented(s, "tTest summary.json")


def test_the_floors_interval_holds_the_true_floor_most_times(tmp_path: Path) -> None:
    """A 95 % interval: over 20 runs, the true 4.35 % lies inside it in at least 16."""
    inside = 0
    for seed in range(20):
        s = LossyLink(tmp_path / str(seed), per_frame(0.05), C5, 100 + seed).run()
        lo, hi = s["loss_floor_ci95"]
        inside += lo <= FLOOR5 <= hi
    assert inside >= 16


@pytest.mark.parametrize(("per", "arc"), [(0.1, 2), (0.1, 15), (0.0, 2)])
def test_capacity_at_other_floors(tmp_path: Path, per: float, arc: int) -> None:
    """28 % lost at every load (10 %, ARC 2), none (ARC 15), and a loss-free link, whose NDR
    is its capacity within the search's resolution."""
    opts = RadioOptions(arc=arc)
    c, p0 = lossy_model(opts, per, per, 1.0, 1400, OVERHEAD)
    s = LossyLink(tmp_path, per_frame(per, arc), c, 3).run()
    assert s["capacity_bps"] == pytest.approx(c, rel=0.03)
    if p0 > 0.01:
        assert s["loss_floor_ci95"][0] <= p0 <= s["loss_floor_ci95"][1]
        assert s["ndr_bps"] is None and s["pdr_bps"] is None
    else:
        # bisection steps of 2^(1/8) between the last carried and the first saturated load
        assert s["ndr_bps"] == pytest.approx(c, rel=0.1) and s["ndr_bps"] <= c
        assert s["pdr_bps"] == pytest.approx(c, rel=0.1)


def test_the_floor_holds_across_datagram_sizes() -> None:
    """r from datagrams of 4 and 48 frames alike: 5000 of each, r = 1e-3."""
    r = 1e-3
    samples = []
    for f in (4, 48):
        p = 1 - (1 - r) ** f
        samples.append(floor.Sample(1e5, 1e5, 5000, round(5000 * p), f))
    est = floor.estimate_floor(samples)
    assert est.r == pytest.approx(r, rel=0.1)
    assert est.r_ci95[0] < r < est.r_ci95[1]
    assert est.loss(48) == pytest.approx(1 - (1 - r) ** 48, rel=0.1)


def test_no_loss_seen_gives_an_upper_bound_only() -> None:
    est = floor.estimate_floor([floor.Sample(1e5, 1e5, 1000, 0, 48)])
    assert est.r == 0.0 and est.r_ci95[0] == 0.0
    # the likelihood-ratio bound of zero events in n·F frames: 1.92 / (n·F)
    assert est.r_ci95[1] == pytest.approx(-math.expm1(-1.92 / 48_000), rel=0.01)


def test_a_point_that_loses_far_more_than_the_floor_below_c_still_contradicts() -> None:
    """The rule that C must not be contradicted by its own points stays: a load at half C that
    lost 30 % (a stall), with the floor at 4 %, is saturated below C."""
    p = 0.04
    rows = [(100e3, 0.96), (200e3, 0.7), (300e3, 0.96), (400e3, 0.96), (600e3, 450 / 600)]
    samples = [
        floor.Sample(o, o * share, 500, round(500 * (1 - share)) if share < 0.9 else 20, 48)
        for o, share in rows
    ]
    v = floor.judge_lossy(samples)
    assert v.verdict.capacity_bps is None
    assert 200e3 in v.verdict.contradicting
    assert v.floor.loss(48) == pytest.approx(p, abs=0.02)


def test_bad_pdr_loss_is_refused_naming_the_option() -> None:
    from longge.errors import ConfigError

    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="--pdr-loss"):
            TTestPlan(pdr_loss=bad)  # type: ignore[arg-type]
