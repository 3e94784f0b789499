"""tTest --mobiles: the chosen mobiles share each load equally, their trials run at once and
count as one (the aggregate by the receivers' counters, datagrams summed, each mobile's rate
kept); the search and the capacity verdict are tTest's; the summary says each mobile's share
of the saturated loads and Jain's index. The trials here come from a formula (the
bookkeeping and the search are under test; the testbed runs the real ones by hand: docs/
measurements.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fielddoc import assert_documented

from longge.errors import ConfigError
from longge.measure import mobiles_ttest as mt
from longge.measure.iperf import TrialSpec
from longge.measure.link import Target
from longge.measure.report import summary_text
from longge.measure.results import ResultsDir
from longge.measure.sweep import QUICK_TTEST

C = 450_000.0


def test_the_mobiles_named_and_refused() -> None:
    assert mt.choose("all", 3) == [0, 1, 2]
    assert mt.choose("1,3", 3) == [0, 2]
    for bad in ("0", "4", "x", "1,1", ""):
        with pytest.raises(ConfigError, match="--mobiles"):
            mt.choose(bad, 3)
    assert mt.wanted("all") == 3 and mt.wanted("2,5") == 5
    with pytest.raises(ConfigError, match="--mobiles"):
        mt.wanted("two")


class Server:
    def kill(self) -> None:
        pass

    def wait(self) -> int:
        return 0


def fake_link(monkeypatch: pytest.MonkeyPatch, weights: dict[int, float]) -> list[TrialSpec]:
    """A link of capacity C shared by the mobiles (by index) in proportion to ``weights`` (up
    to what each offers), the excess lost."""
    seen: list[TrialSpec] = []
    monkeypatch.setattr(mt.testbed, "recorded_mobiles", lambda: ["mobile1", "mobile2", "mobile3"])
    monkeypatch.setattr(mt.subprocess, "Popen", lambda *a, **k: Server())
    monkeypatch.setattr(mt.time, "sleep", lambda s: None)
    monkeypatch.setattr(Target, "drain", lambda self, max_wait_s=5.0: None)

    def share(spec: TrialSpec) -> float:
        i = spec.port - mt.PORT
        total = spec.rate_bps * len(weights)
        if total <= C:
            return float(spec.rate_bps)
        return min(float(spec.rate_bps), C * weights[i] / sum(weights.values()))

    def run_trial(spec: TrialSpec, netns: str | None = None) -> dict[str, Any]:
        seen.append(spec)
        got = share(spec)
        packets = max(50, int(spec.rate_bps * spec.duration / 8 / spec.length))
        lost = round(packets * (1 - got / spec.rate_bps))
        return {
            "end": {
                "sum_sent": {"bits_per_second": spec.rate_bps},
                "sum_received": {"bits_per_second": got},
                "sum": {"packets": packets, "lost_packets": lost},
                "streams": [],
            }
        }

    monkeypatch.setattr(mt, "run_trial", run_trial)
    # (no TUN here: the receivers' sum stands in for the counters' aggregate)
    monkeypatch.setattr(mt, "_steady_bps", lambda receivers, duration, share: None)
    return seen


def run(tmp_path: Path, mobiles: list[int]) -> dict[str, Any]:
    t = mt.MobilesTTest(Target("192.0.2.1"), QUICK_TTEST, ResultsDir(tmp_path), mobiles=mobiles)
    return t.run()


def test_three_mobiles_share_each_load_and_the_verdict_is_on_their_sum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = fake_link(monkeypatch, {0: 1, 1: 1, 2: 1})
    s = run(tmp_path, [0, 1, 2])
    assert s["capacity_bps"] == pytest.approx(C, rel=0.03)
    assert s["mobiles"] == ["mobile1", "mobile2", "mobile3"]
    assert s["mobile_shares"] == pytest.approx([1 / 3] * 3, abs=0.01)
    assert s["mobiles_jain"] == pytest.approx(1.0, abs=0.001)
    # each trial: an equal part of the load from each mobile, to its own server, 6 s or more
    assert {sp.port for sp in seen} == {mt.PORT, mt.PORT + 1, mt.PORT + 2}
    assert all(sp.duration >= mt.MIN_DURATION_S for sp in seen)
    for p in s["points"]:
        assert len(p["mobiles_bps"]) == 3
        assert sum(p["mobiles_bps"]) == pytest.approx(p["received_bps"], rel=0.01)
    text = summary_text(s)
    assert "3 mobiles at once (mobile1, mobile2, mobile3)" in text
    assert "shares of the saturated loads" in text
    assert_documented(s, "summary.json")


def test_a_mobile_that_gets_less_shows_in_its_share_and_jains_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_link(monkeypatch, {0: 1, 1: 1, 2: 0.25})
    s = run(tmp_path, [0, 1, 2])
    assert s["mobile_shares"][2] < 0.2 < s["mobile_shares"][0]
    assert s["mobiles_jain"] < 0.9
    # each mobile's loss in each row: the one that gets less loses more of what it offers
    over = [p for p in s["points"] if p["saturated"]]
    assert over and all(p["mobiles_loss"][2] > p["mobiles_loss"][0] for p in over)
    quiet = min(s["points"], key=lambda p: p["offered_bps"])
    assert quiet["mobiles_loss"] == pytest.approx([0, 0, 0], abs=0.01)
    assert "loss 0.0 / 0.0 / 0.0 %" in summary_text(s)


def test_two_of_three_mobiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = fake_link(monkeypatch, {0: 1, 2: 1})
    s = run(tmp_path, [0, 2])
    assert s["mobiles"] == ["mobile1", "mobile3"]
    assert {sp.port for sp in seen} == {mt.PORT, mt.PORT + 2}
    assert s["capacity_bps"] == pytest.approx(C, rel=0.03)


def test_ltest_from_several_mobiles_probes_from_each_and_loads_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lTest --mobiles: each level's load from every mobile at once (run_split), RTT probes
    from each mobile's namespace at once, pooled for the level's figures, each mobile's p95
    kept; a given capacity skips the quick tTest."""
    from dataclasses import replace

    from longge.measure.sweep import QUICK_LTEST

    monkeypatch.setattr(mt.testbed, "recorded_mobiles", lambda: ["mobile1", "mobile2", "mobile3"])
    monkeypatch.setattr(mt.subprocess, "Popen", lambda *a, **k: Server())
    monkeypatch.setattr(mt.time, "sleep", lambda s: None)
    monkeypatch.setattr(Target, "drain", lambda self, max_wait_s=5.0: None)
    loads: list[tuple[int, list[int]]] = []
    probed: list[str | None] = []

    def run_split(spec: TrialSpec, mobiles: list[int], names: list[str]) -> Any:
        loads.append((spec.rate_bps, mobiles))
        return mt.combine(
            spec,
            names,
            [mt.TrialResult(spec.rate_bps / 2, 0, spec.rate_bps / 2)] * 2,
            spec.rate_bps,
        )

    def probe_in(target: Target, count: int, interval: float, size: int) -> dict[str, Any]:
        probed.append(target.netns)
        slow = 10.0 if target.netns == "lg-mobile3" else 1.0
        records = [{"rtt_ms": slow * (1 + k / count), "app_rtt_ms": None} for k in range(count)]
        return {"sent": count, "received": count, "records": records}

    monkeypatch.setattr(mt, "run_split", run_split)
    monkeypatch.setattr(mt, "probe_in", probe_in)
    plan = replace(QUICK_LTEST, rhos=(0.0, 0.5, 1.1), capacity_bps=400_000.0, seconds=2)
    t = mt.MobilesLTest(Target("192.0.2.1"), plan, ResultsDir(tmp_path), mobiles=[0, 2])
    s = t.run()
    assert s["mobiles"] == ["mobile1", "mobile3"]
    assert [r for r, _ in loads] == [200_000, 440_000] and all(m == [0, 2] for _, m in loads)
    assert set(probed) == {"lg-mobile1", "lg-mobile3"} and len(probed) == 2 * 3
    for lv in s["levels"]:
        lo, hi = lv["mobiles_rtt_p95_ms"]
        assert lo < 2.0 < 10.0 < hi  # each mobile's own
        assert lv["probes_sent"] >= 20 and lv["probes_sent"] % 2 == 0  # both mobiles' pooled
    assert "2 mobiles at once (mobile1, mobile3)" in summary_text(s)
    assert_documented(s, "summary.json")
