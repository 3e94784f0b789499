"""tTest's search for the knee on a synthetic link (received = min(offered, C), the excess
lost), with the flukes seen on the testbed: a load read low by the server's clock with nothing
lost, and a stall that lost a few datagrams well below capacity."""

from __future__ import annotations

from pathlib import Path

import pytest

from longge.measure.iperf import TrialResult
from longge.measure.results import ResultsDir
from longge.measure.sweep import PointResult, Target, TTest, TTestPlan

C = 500_000.0


class SyntheticLink(TTest):
    """TTest whose trials come from a formula instead of iperf3 (the search is under test)."""

    def __init__(self, tmp: Path, flukes: dict[int, tuple[float, int]], tcp: bool = False):
        plan = TTestPlan(protocol="tcp" if tcp else "udp", duration=3, repeats=2, bisect_steps=3)
        super().__init__(Target("192.0.2.1"), plan, ResultsDir(tmp))
        self.flukes = flukes  # offered load -> (received share, datagrams lost) at that load
        self.tcp = tcp

    def measure(self, offered: float) -> PointResult:
        point = self.points.setdefault(offered, PointResult(offered))
        packets = 0 if self.tcp else max(50, int(offered * 3 / 8 / 1400))
        share, lost = self.flukes.get(round(offered), (1.0, 0))
        received = min(offered * share, C)
        if not self.tcp and offered > C:
            lost = int(packets * (1 - C / offered))
        for _ in range(self.plan.repeats):
            point.trials.append(TrialResult(offered, offered, received, packets, lost))
        return point


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
    assert s["capacity_bps"] == pytest.approx(C, rel=0.05)
    assert max(p["offered_bps"] for p in s["points"]) > C


def test_tcp_is_judged_by_rate_alone(tmp_path: Path) -> None:
    s = SyntheticLink(tmp_path, {}, tcp=True).run()
    assert s["capacity_bps"] == pytest.approx(C, rel=0.02)
    assert s["saturation"] is not None
