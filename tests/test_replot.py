"""Results re-plot and re-judge from disk: a tune folder and an experiment folder made earlier
give their plots again (also after their PNGs were deleted), and the verdict printed from the
saved rows is the one the run printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fielddoc import assert_folder_documented

from longge.cli import main
from longge.measure.experiment_plans import EXPERIMENTS
from longge.measure.experiment_report import verdict
from longge.measure.link import Target
from longge.measure.plots import plot_runs
from longge.measure.results import ResultsDir
from longge.measure.tune import Tune
from longge.measure.tune_plan import TunePlan
from longge.radio.options import RadioOptions


def _tune_row(ard: int, arc: int, cap: float) -> dict[str, object]:
    curve = {
        "load": [[0.6 * cap, 0.6 * cap], [0.9 * cap, 0.9 * cap], [1.3 * cap, cap]],
        "rtt": [[0.5, 4.6, 23.0], [0.9, 14.3, 24.3]],
    }
    return {
        "ard_us": ard,
        "arc": arc,
        "capacity_bps": cap,
        "model_capacity_bps": 508_900.0,
        "q_measured": 0.0,
        "rtt_p95_05_ms": 23.0,
        "rtt_p95_09_ms": 24.3,
        "model_rtt_p95_05_ms": 23.8,
        "model_rtt_p95_09_ms": 24.8,
        "rtt_median_05_ms": 4.6,
        "rtt_median_09_ms": 14.3,
        "loss_09": 0.0,
        "model_residual_loss": 0.0,
        "curve": json.dumps(curve),
        "cpu_steal": 0.0,
        "error": "",
    }


def test_a_tune_folder_replots_from_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ResultsDir(tmp_path / "tune")
    tune = Tune(Target("127.0.0.1"), RadioOptions(rate="2M"), TunePlan(), out, 0.0)
    tune.rows = [
        _tune_row(a, c, cap)
        for (a, c), cap in {(250, 2): 503e3, (250, 15): 507e3, (2500, 2): 480e3}.items()
    ]
    tune.idle_rtt_ms = 4.0
    # --vs-stream: stream mode's row, drawn beside the grid's best and worst, and judged
    row = _tune_row(250, 2, 1310e3)
    tune.stream = {"mode": "stream", **{k: v for k, v in row.items() if k not in ("ard_us", "arc")}}
    out.write_summary(tune.summary())
    made = plot_runs([out.path])
    assert {"tune.png", "tune_curves.png"} <= {p.name for p in made}
    for p in made:
        p.unlink()
    assert main(["plot", str(out.path)]) == 0
    assert all(p.exists() and p.stat().st_size > 1000 for p in made)
    # the grid and the recommendation, from disk: the highest capacity meeting the rule
    said = capsys.readouterr().out
    assert "recommended: ARD 250 µs, ARC 15" in said
    assert "stream mode carries 1310 kbit/s = 2.58x the best ESB setting's 507" in said
    assert_folder_documented(out.path)


def test_an_experiment_folder_is_judged_again_from_its_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = EXPERIMENTS["tcp-vs-udp"]
    out = ResultsDir(tmp_path / "battery")
    rows = [
        {"experiment": exp.name, "series": "default", "x": proto, "error": "", "received_bps": v}
        for proto, v in (("udp", 500e3), ("tcp", 400e3))
    ]
    summary = {"kind": "experiment", "quick": True, "rows": rows, "bound_bps": {"udp_1400": 509e3}}
    said = verdict(exp, summary)  # what the run printed
    out.write_summary({**summary, "verdict": said}, f"{exp.name}.json")
    out.write_summary({"kind": "experiments", "seconds": 1.0, "verdicts": {exp.name: said}})
    assert main(["plot", str(out.path)]) == 0
    printed = capsys.readouterr().out
    assert f"{exp.name}: {said}" in printed
    pngs = list(out.path.glob("*.png"))
    assert pngs
    for p in pngs:
        p.unlink()
    assert main(["plot", str(out.path)]) == 0
    assert sorted(out.path.glob("*.png")) == sorted(pngs)
    assert_folder_documented(out.path)


@pytest.mark.parametrize(
    "text",
    [
        "",  # cut short
        "[1]",  # not an object
        '{"kind": "tTest", "points": [{"offered_bps": 1000}]}',  # a point without its figures
        '{"kind": "lTest", "levels": [{"rho": 0.5}]}',
        '{"kind": "tTest"}',  # nothing to draw
    ],
)
def test_plot_of_a_summary_that_is_not_a_runs_says_so(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once a KeyError, JSONDecodeError or AttributeError traceback, or exit 1 in silence."""
    (tmp_path / "summary.json").write_text(text)
    assert main(["plot", str(tmp_path)]) in (1, 2)
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "Traceback" not in err, err
