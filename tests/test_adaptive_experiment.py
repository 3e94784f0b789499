"""Experiment adaptive, its bookkeeping: a phase's figures from the counter's samples and the
mobile's status, the best fixed setting and adaptation's targets, the summary, CSV and plot
from the saved rows (as `plot` redraws them), every field documented. The schedule itself
runs on the testbed (`./run.sh experiment adaptive`; figures in docs/measurements.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fielddoc import assert_folder_documented

from longge.measure import adaptive_experiment as ax
from longge.measure import adaptive_stream_experiment
from longge.measure.plots import rejudge_experiments
from longge.measure.results import ResultsDir
from longge.radio.options import RadioOptions


class Watch:
    """What _Watch gathers, made up: the base's counter every 0.5 s (``bps`` per slice) and
    the mobile's sent/aborted counts."""

    def __init__(self, t0: float, bps: list[float], sent: int, aborted: int) -> None:
        self.samples = [(t0, 0)]
        for r in bps:
            t, b = self.samples[-1]
            self.samples.append((t + ax.SLICE_S, b + round(r * ax.SLICE_S / 8)))
        end = self.samples[-1][0]
        self.tx: list[tuple[float, dict[str, Any]]] = [
            (t0, {"packets_sent": 100, "packets_aborted": 5}),
            (end, {"packets_sent": 100 + sent, "packets_aborted": 5 + aborted}),
        ]


def test_a_phase_settles_where_every_2_s_mean_stays_near_its_final_rate() -> None:
    # dead for 1.5 s, then 400 kbit/s with a dip, one slice, still within the 2-s means
    bps = [0.0] * 3 + [400e3] * 10 + [360e3] + [400e3] * 26
    w = Watch(100.0, bps, sent=1000, aborted=3)
    rtts = [(100.0 + 0.1 * k, 5.0 + (k % 20)) for k in range(200)] + [(200.0, 999.0)]
    f = ax.phase_figures(100.0, w.samples[-1][0], w, rtts)  # type: ignore[arg-type]
    assert f["final_bps"] == pytest.approx(400e3, rel=0.01)
    assert f["settle_s"] == pytest.approx(1.5)
    assert f["goodput_bps"] == pytest.approx(sum(bps[4:]) / len(bps[4:]), rel=0.01)
    assert f["link_loss"] == pytest.approx(0.003) and f["packets_sent"] == 1000
    assert f["up"] and f["pings"] == 200 and 20.0 <= f["ping_p95_ms"] <= 24.0
    # a gap of 2 s after the first 2 s: down; a rate that climbs for 6 s settles once its
    # 2-s mean reaches 95 % of where it ends (a later dip is goodput, not settling); one that
    # starts above where it ends has no shortfall to settle
    gap = [300e3] * 8 + [0.0] * 4 + [300e3] * 28
    assert not ax.phase_figures(0.0, 20.0, Watch(0.0, gap, 10, 0), [])["up"]  # type: ignore[arg-type]
    climbing = [50e3 * k for k in range(12)] + [400e3] * 10 + [0.0] + [400e3] * 17
    late = ax.phase_figures(0.0, 20.0, Watch(0.0, climbing, 10, 0), [])  # type: ignore[arg-type]
    assert late["settle_s"] is not None and 3.5 <= late["settle_s"] <= 5.0, late
    falling = [800e3 - 40e3 * k for k in range(10)] + [400e3] * 30
    assert ax.phase_figures(0.0, 20.0, Watch(0.0, falling, 10, 0), [])["settle_s"] == 0.0  # type: ignore[arg-type]


def rows(adapt: dict[str, float], fixed: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """Rows of one phase: adaptation's and each fixed setting's figures."""
    base = {"phase": "far", "final_bps": 0.0, "packets_sent": 100, "pings": 10, "phase_s": 40.0}
    out = []
    for setting, f in [("adapt", adapt), *fixed.items()]:
        out.append(
            {
                **base,
                "setting": setting,
                "goodput_bps": f["bps"],
                "link_loss": f["loss"],
                "settle_s": f.get("settle", 0.5),
                "up": f["bps"] > 0,
                "ping_p95_ms": 20.0,
            }
        )
    return out


def test_each_phase_is_judged_against_its_best_fixed_setting() -> None:
    fixed = {
        "2M/15": {"bps": 0.0, "loss": 1.0},
        "250k/15": {"bps": 120e3, "loss": 0.001},
    }
    (j,) = ax.judge(rows({"bps": 116e3, "loss": 0.004, "settle": 1.2}, fixed))
    assert j["best_fixed"] == "250k/15" and j["share"] == pytest.approx(116 / 120)
    assert j["share_met"] and j["loss_met"] and j["settle_met"] and j["up_met"]
    (j,) = ax.judge(rows({"bps": 100e3, "loss": 0.11, "settle": 3.0}, fixed))
    assert not (j["share_met"] or j["loss_met"] or j["settle_met"])
    # no fixed setting kept its loss low: adaptation's is not held to it either
    lossy = {"2M/15": {"bps": 50e3, "loss": 0.02}}
    (j,) = ax.judge(rows({"bps": 50e3, "loss": 0.03}, lossy))
    assert j["loss_met"]
    (j,) = ax.judge(rows({"bps": 0.0, "loss": 1.0}, fixed))
    assert not j["up_met"]
    text = ax.verdict({"rows": rows({"bps": 100e3, "loss": 0.11, "settle": 3.0}, fixed)})
    assert text.startswith("adapt / best fixed (40-s phases): far 0.833; missed: far: share")
    assert "far: loss 11.00 %" in text and "far: settled 3.0 s" in text


def test_summary_csv_and_plot_from_the_saved_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[tuple[str, float, str, float]] = []

    def run_setting(setting: str, phase_s: float, mode: str, offer_bps: float) -> dict[str, Any]:
        ran.append((setting, phase_s, mode, offer_bps))
        share = 0.97 if setting == "adapt" else 1.0 if setting in ("2M/15", "2M") else 0.5
        out = []
        for k, (phase, _, _) in enumerate(ax.PHASES):
            out += [
                {**r, "phase": phase}
                for r in rows({"bps": 400e3 * share, "loss": 0.0}, {})
                if r["setting"] == "adapt"
            ]
            out[-1]["setting"] = setting
            out[-1]["settle_s"] = 0.5 + 0.1 * k
        t = [0.5 * (k + 1) for k in range(6 * 30)]
        return {
            "rows": out,
            "series": {
                "setting": setting,
                "t_s": t,
                "bps": [400e3 * share] * len(t),
                "decisions": [[1.0, "ARC 14"], [31.0, "trial 1M"], [31.1, "rate 1M"]]
                if setting == "adapt"
                else [],
                "phases": [[p[0], 15.0 * k] for k, p in enumerate(ax.PHASES)],
            },
        }

    monkeypatch.setattr(ax, "run_setting", run_setting)
    out = ResultsDir(tmp_path / "run")
    s = ax.run(True, out, lambda m: None, lambda m, f: None)
    q = ax.QUICK_PHASE_S
    assert ran == [(name, q, "esb", ax.OFFER_BPS) for name in ax.QUICK_SETTINGS]
    assert len(s["judged"]) == len(ax.PHASES)
    assert all(
        j["best_fixed"] == "2M/15" and j["share"] == pytest.approx(0.97) for j in s["judged"]
    )
    assert s["verdict"].endswith("all targets met")
    for name in ("adaptive.png", "adaptive.svg", "adaptive.csv"):
        assert (out.path / name).stat().st_size > 500
    assert_folder_documented(out.path)
    (out.path / "adaptive.png").unlink()
    again = dict((n, v) for n, v, _ in rejudge_experiments(out.path))
    assert again["adaptive"] == s["verdict"]
    assert (out.path / "adaptive.png").exists()
    saved = json.loads((out.path / "adaptive.json").read_text())
    assert saved["series"][0]["decisions"][1] == [31.0, "trial 1M"]
    # the same schedule in stream mode: its settings and load, files of its own
    ran.clear()
    st = adaptive_stream_experiment.run(True, out, lambda m: None, lambda m, f: None)
    assert ran == [(n, q, "stream", ax.STREAM_OFFER_BPS) for n in ax.STREAM_SETTINGS]
    assert st["mode"] == "stream" and all(j["best_fixed"] == "2M" for j in st["judged"])
    assert (out.path / "adaptive-stream.png").stat().st_size > 500
    assert_folder_documented(out.path)
    again = dict((n, v) for n, v, _ in rejudge_experiments(out.path))
    assert again["adaptive-stream"] == st["verdict"] and again["adaptive"] == s["verdict"]
    assert ax.options("1M", "stream") == RadioOptions(mode="stream", rate="1M")
    assert ax.options("adapt", "stream").adapt and ax.options("adapt").mode == "esb"
