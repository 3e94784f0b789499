"""tTest's search for the knee on a synthetic link (received = min(offered, C), the excess
lost), with the flukes seen on the testbed: a load read low by the server's clock with nothing
lost, a stall that lost a few datagrams well below capacity, the 2026-11 run whose reported C
its own points contradicted. Whatever the flukes, a capacity is reported only if saturation
lies above it and no carried load does; otherwise none, with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from fielddoc import assert_documented

from longge.measure.iperf import TrialResult
from longge.measure.link import Target
from longge.measure.report import summary_text
from longge.measure.results import ResultsDir
from longge.measure.sweep import PointResult, TTestPlan
from longge.measure.ttest import TTest

C = 500_000.0


class SyntheticLink(TTest):
    """TTest whose trials come from a formula instead of iperf3 (the search is under test)."""

    def __init__(
        self,
        tmp: Path,
        flukes: dict[int, tuple[float, int]],
        tcp: bool = False,
        times: int = 1,
    ):
        plan = TTestPlan(protocol="tcp" if tcp else "udp", duration=3, repeats=2, bisect_steps=3)
        super().__init__(Target("192.0.2.1"), plan, ResultsDir(tmp))
        self.flukes = flukes  # offered load -> (received share, datagrams lost) at that load
        self.tcp = tcp
        self.times = times  # how many measurements of that load the fluke spoils
        self.seen: dict[int, int] = {}

    def measure(self, offered: float) -> PointResult:
        point = self.points.setdefault(offered, PointResult(offered))
        packets = 0 if self.tcp else max(50, int(offered * 3 / 8 / 1400))
        key = round(offered)
        self.seen[key] = self.seen.get(key, 0) + 1
        share, lost = (1.0, 0)
        if key in self.flukes and self.seen[key] <= self.times:
            share, lost = self.flukes[key]
        received = min(offered * share, C)
        if not self.tcp and offered > C:
            lost = max(lost, int(packets * (1 - C / offered)))
        for _ in range(self.plan.repeats):
            point.trials.append(TrialResult(offered, offered, received, packets, lost))
        return point


def assert_consistent(s: dict[str, object]) -> None:
    """The report's own rule: C is bracketed by saturation above and no point contradicts it."""
    cap = s["capacity_bps"]
    assert isinstance(cap, float)
    rows = list(s["points"])  # type: ignore[call-overload]
    saturated = [
        p for p in rows if p["efficiency"] < 0.97 and (p["lost_packets"] or not p["packets"])
    ]
    assert any(p["offered_bps"] > cap for p in saturated)
    assert all(p["offered_bps"] >= 0.97 * cap for p in saturated), saturated
    carried = [p for p in rows if p not in saturated]
    assert all(p["received_bps"] <= 1.03 * cap for p in carried), carried


def test_a_clean_link_is_found(tmp_path: Path) -> None:
    s = SyntheticLink(tmp_path, {}).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.02)
    assert s["saturation"]["offered_bps"] > C


def test_a_load_read_low_without_loss_is_not_saturation(tmp_path: Path) -> None:
    # the server's interval ran long: 200 kbit/s read as 185, not a datagram lost
    s = SyntheticLink(tmp_path, {200_000: (0.925, 0)}).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.02)
    assert s["saturation"]["offered_bps"] > C


def test_a_stall_that_lost_datagrams_below_capacity_is_searched_past(tmp_path: Path) -> None:
    # a stall lost datagrams at 200 kbit/s; 1.5x that is fine, so the search goes on upwards
    s = SyntheticLink(tmp_path, {200_000: (0.9, 3)}).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.03)
    assert_consistent(s)


def test_the_2026_11_run_is_never_reported_as_its_capacity(tmp_path: Path) -> None:
    """Points 2/20/63/112/150/200/300 kbit/s received 2.0/20.0/62.9/110.7/150.3/171.2/289.8 and
    the run said C = 289.8 with saturation at 200: both contradicted by its own points."""
    from longge.measure.analysis import Judged, judge_capacity

    offered = [2, 20, 63, 112, 150, 200, 300]
    received = [2.0, 20.0, 62.9, 110.7, 150.3, 171.2, 289.8]
    pts = [Judged(o * 1e3, r * 1e3, r / o < 0.97) for o, r in zip(offered, received, strict=True)]
    v = judge_capacity(pts)
    assert v.capacity_bps is None and 200_000 in v.contradicting and v.needs_load_above
    # tTest with the same flukes measures the contradicting points again and goes on upwards
    flukes = {200_000: (171.2 / 200, 5), 300_000: (289.8 / 300, 2)}
    s = SyntheticLink(tmp_path, flukes).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.03)
    assert_consistent(s)


def test_the_first_load_saturated_by_a_stall(tmp_path: Path) -> None:
    s = SyntheticLink(tmp_path, {2_000: (0.5, 20)}).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.03)
    assert_consistent(s)


def test_two_flukes(tmp_path: Path) -> None:
    s = SyntheticLink(tmp_path, {20_000: (0.8, 4), 400_000: (0.9, 9)}).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.03)
    assert_consistent(s)


def test_repeats_that_keep_disagreeing_give_no_capacity(tmp_path: Path) -> None:
    """A load that loses datagrams below capacity every time it is measured: the run cannot
    be made clean, so it says so instead of reporting a C its points contradict."""
    s = SyntheticLink(tmp_path, {200_000: (0.8, 9)}, times=99).run()
    assert s["capacity_bps"] is None
    assert "200.0 kbit/s saturated below" in str(s["capacity_reason"])


def test_a_load_that_got_nothing_through_counts_as_saturated(tmp_path: Path) -> None:
    """Once such a point (every trial received 0, no error) was left out of the verdict: C was
    printed beside a row at 0.4 C that carried nothing. Now it contradicts C: measured again,
    and while it stays at 0 there is no capacity."""
    s = SyntheticLink(tmp_path, {200_000: (0.0, 50)}, times=99).run()
    assert s["capacity_bps"] is None
    assert "200.0 kbit/s saturated below" in str(s["capacity_reason"])
    s = SyntheticLink(tmp_path / "once", {200_000: (0.0, 50)}).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.03)
    assert_consistent(s)


def test_a_saturated_load_that_carried_more_than_c_contradicts_it() -> None:
    from longge.measure.analysis import Judged, judge_capacity

    pts = [
        Judged(20e3, 20e3, False),
        Judged(40e3, 40e3, False),
        Judged(80e3, 45e3, True),
        Judged(120e3, 75e3, True),
    ]
    v = judge_capacity(pts)
    assert v.capacity_bps is None and 120e3 in v.contradicting
    assert "carried 75.0, above" in str(v.reason)


def test_only_saturated_loads_give_no_capacity() -> None:
    """A first load that saturated twice at 300 bit/s was reported as C = 300 bit/s (and an
    lTest on it would probe once every half hour): without a load carried whole, no C."""
    from longge.measure.analysis import Judged, judge_capacity

    v = judge_capacity([Judged(2000, 300, True), Judged(2000, 310, True)])
    assert v.capacity_bps is None and "every load was saturated" in str(v.reason)


def test_tcp_is_judged_by_rate_alone(tmp_path: Path) -> None:
    s = SyntheticLink(tmp_path, {}, tcp=True).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.02)
    assert s["saturation"] is not None


def test_a_load_just_above_c_carried_by_the_queues_is_no_contradiction() -> None:
    """From a testbed run: 518.7 kbit/s offered for 3 s was received at 507.5 with nothing lost
    (the daemon's queue absorbed the excess); what the link carried, not what was offered,
    decides whether a point contradicts C."""
    from longge.measure.analysis import Judged, judge_capacity

    rows = [(2.0, 2.0, 0), (20.0, 20.0, 0), (200.0, 201.4, 0), (400.0, 400.3, 0)]
    rows += [(475.7, 475.3, 0), (518.7, 507.5, 0), (565.7, 483.1, 40), (800.0, 505.6, 80)]
    rows += [(1200.0, 505.8, 200)]
    pts = [Judged(o * 1e3, r * 1e3, r / o < 0.97 and lost > 0) for o, r, lost in rows]
    v = judge_capacity(pts)
    assert v.capacity_bps is not None and 0.97 * 505e3 <= v.capacity_bps <= 1.03 * 505e3


def test_saturated_loads_a_busy_machine_spread_give_the_most_carried() -> None:
    """From the CI run of stop 49 (lTest --quick, two test workers on two cores): saturated
    loads carried 441.6-484.3 kbit/s, their mean (461.6) was contradicted by 800 kbit/s carrying
    484.3, measured again three times, and lTest stopped with "no capacity". A busy machine
    carries less than the link can, never more: C is the most carried, confirmed by a second
    point, and it explains every point."""
    from longge.measure.analysis import Judged, judge_capacity

    rows = [(2.0, 2.0, 0), (20.0, 20.0, 0), (200.0, 201.2, 0), (400.0, 397.6, 0)]
    rows += [(475.7, 471.3, 0), (518.7, 449.0, 40), (565.7, 461.9, 70), (800.0, 484.3, 200)]
    rows += [(1200.0, 441.6, 400)]
    pts = [Judged(o * 1e3, r * 1e3, r / o < 0.97 and lost > 0) for o, r, lost in rows]
    v = judge_capacity(pts)
    assert v.capacity_bps == pytest.approx(484.3e3)
    assert "441.6–484.3" in str(v.reason) and "461.6" in str(v.reason)
    # one point alone above the rest confirms nothing: 800 kbit/s read 560 is contradicted
    lone = [p if p.offered_bps != 800e3 else Judged(800e3, 560e3, True) for p in pts]
    v = judge_capacity(lone)
    assert v.capacity_bps is None and 800e3 in v.contradicting
    # nor do saturated loads spread further than a busy machine explains
    wide = [p if p.offered_bps != 1200e3 else Judged(1200e3, 300e3, True) for p in pts]
    assert judge_capacity(wide).capacity_bps is None


class HeldAir(SyntheticLink):
    """An emulated link whose air stood still ``held`` of each trial's time once the load
    saturated it (the air waits for radio processes the machine runs late): per second the
    air ran the link carries C, per second of the trial C * (1 - held)."""

    def __init__(self, tmp: Path, held: float) -> None:
        super().__init__(tmp, {})
        self.target = Target("192.0.2.1", air="/nonexistent/air.sock")
        self.held = held

    def measure(self, offered: float) -> PointResult:
        point = self.points.setdefault(offered, PointResult(offered))
        packets = max(50, int(offered * 3 / 8 / 1400))
        held = self.held if offered > C * (1 - self.held) else 0.0
        carried = C * (1 - held)
        lost = max(0, int(packets * (1 - carried / offered))) if offered > carried else 0
        for _ in range(self.plan.repeats):
            trial = TrialResult(offered, offered, min(offered, carried), packets, lost)
            trial.air_frozen_ms = held * self.plan.duration * 1000
            point.trials.append(trial)
        return point


def test_a_capacity_the_air_stood_still_through_says_so(tmp_path: Path) -> None:
    s = HeldAir(tmp_path, held=0.2).run()
    assert s["capacity_bps"] == pytest.approx(0.8 * C, rel=0.03)
    assert s["capacity_air_still_share"] == pytest.approx(0.2)
    assert s["capacity_running_bps"] == pytest.approx(C, rel=0.03)
    text = summary_text(s)
    assert "stood still 20 %" in text and "per second the air ran" in text
    assert_documented(s, "tTest summary.json")


def test_a_capacity_the_air_ran_through_has_no_running_figure(tmp_path: Path) -> None:
    s = HeldAir(tmp_path, held=0.0).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.02)
    assert s["capacity_air_still_share"] == 0.0
    assert s["capacity_running_bps"] is None
    assert "per second the air ran" not in summary_text(s)
