"""Parsing libiperf's JSON (captured from real runs in tests/data) and results folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longge.measure.iperf import TrialSpec, parse_result
from longge.measure.plots import plot_runs
from longge.measure.results import ResultsDir, read_summary

DATA = Path(__file__).parent / "data"


def load(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((DATA / name).read_text())  # type: ignore[no-any-return]


def test_udp_result_uses_the_receivers_figures() -> None:
    spec = TrialSpec(host="x", rate_bps=2_000_000, duration=2, length=1000)
    raw = load("iperf3_udp_2mbit.json")
    r = parse_result(spec, raw)
    assert r.error is None
    assert r.received_bps == raw["end"]["sum_received"]["bits_per_second"]
    assert r.offered_bps == 2_000_000  # what was asked, not what the client claims it sent
    assert r.packets == raw["end"]["sum"]["packets"] > 0
    assert len(r.interval_received_bps) == len(raw["intervals"])
    assert 0.99 < r.efficiency < 1.01


def test_tcp_result_has_per_stream_receiver_rates() -> None:
    spec = TrialSpec(host="x", protocol="tcp", rate_bps=8_000_000, duration=1, streams=2)
    raw = load("iperf3_tcp_2streams.json")
    r = parse_result(spec, raw)
    assert len(r.stream_received_bps) == 2
    assert sum(r.stream_received_bps) == pytest.approx(r.received_bps, rel=0.01)


def test_failed_trial_keeps_its_error() -> None:
    r = parse_result(TrialSpec(host="x", rate_bps=1000), load("iperf3_refused.json"))
    assert r.error is not None and "Connection refused" in r.error
    assert r.received_bps == 0


def test_garbage_json_gives_an_error_not_a_crash() -> None:
    r = parse_result(TrialSpec(host="x", rate_bps=1000), {"error": "the server is busy"})
    assert r.error == "the server is busy"
    # a result without the received figure is no measurement of a link that carried nothing
    for raw in ({"end": {"sum_received": {}}}, {"end": {}}, {"intervals": []}):
        r = parse_result(TrialSpec(host="x", rate_bps=1000), raw)
        assert r.received_bps == 0 and "no end.sum_received" in str(r.error), raw
    carried_nothing = {"end": {"sum_received": {"bits_per_second": 0.0}}}
    assert parse_result(TrialSpec(host="x", rate_bps=1000), carried_nothing).error is None


def synthetic_ttest() -> dict:  # type: ignore[type-arg]
    pts = []
    for off in [2e3, 2e4, 2e5, 4e5, 5e5, 6e5, 8e5]:
        rec = min(off, 5.2e5)
        pts.append(
            {
                "offered_bps": off,
                "received_bps": rec,
                "received_min_bps": rec * 0.99,
                "received_max_bps": rec * 1.01,
                "loss": 1 - rec / off,
                "rho": off / 5.2e5,
                "efficiency": rec / off,
            }
        )
    return {
        "kind": "tTest",
        "capacity_bps": 5.2e5,
        "points": pts,
        "saturation": {"offered_bps": 6e5, "rho": 1.15},
    }


def synthetic_ltest() -> dict:  # type: ignore[type-arg]
    levels = [
        {"rho": r, "rtt_median_ms": m, "rtt_p95_ms": m * 1.5, "probes_sent": 80, "probes_lost": 0}
        for r, m in [(0, 3.0), (0.5, 5.0), (1.0, 40.0)]
    ]
    return {"kind": "lTest", "levels": levels, "baseline_rtt_ms": 3.0, "knee_rho": 1.0}


def test_results_folder_and_replot_read_only_saved_data(tmp_path: Path) -> None:
    a, b = ResultsDir(tmp_path / "a"), ResultsDir(tmp_path / "b")
    a.add_trial({"kind": "tTest", "offered_bps": 1}, [{"interval": 1, "received_bps": 1}])
    a.write_json("summary.json", synthetic_ttest())
    b.write_json("summary.json", synthetic_ttest() | {"capacity_bps": 4e5})
    assert (tmp_path / "a" / "trials" / "001.csv").exists()
    assert "trial,kind" in (tmp_path / "a" / "trials.csv").read_text()
    made = plot_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "overlay")
    assert {p.name for p in made} == {"ttest.png", "ttest.svg"}
    assert all(p.stat().st_size > 1000 for p in made)
    c = ResultsDir(tmp_path / "c")
    c.write_json("summary.json", synthetic_ltest())
    assert {p.name for p in plot_runs([tmp_path / "c"])} == {"ltest.png", "ltest.svg"}
    assert read_summary(tmp_path / "c")["knee_rho"] == 1.0


def test_results_go_to_the_checkouts_results_folder_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from longge.measure.results import default_dir

    checkout = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)  # started from elsewhere
    monkeypatch.delenv("LONGGE_RESULTS", raising=False)
    assert default_dir("tTest").parent == checkout / "results"
    monkeypatch.setenv("LONGGE_RESULTS", str(tmp_path / "mine"))
    assert default_dir("tTest").parent == tmp_path / "mine"
