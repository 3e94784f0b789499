"""Experiment multinode, its bookkeeping: the rows a trial makes from what the receivers and
the pings said, the verdict and plot from a saved summary (as `plot` redraws it), every field
documented. The trials themselves run on the testbed (tests/test_testbed_multi.py loads three
mobiles at once with the same load_all)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from fielddoc import assert_folder_documented

from longge.measure import multinode_experiment as mx
from longge.measure.multinode import Shares
from longge.measure.plots import rejudge_experiments
from longge.measure.results import ResultsDir


def fake_trial(monkeypatch: pytest.MonkeyPatch, kbps: list[float], steady: list[float]) -> None:
    """load_all and the pings as the testbed would answer them (the bookkeeping is under test:
    the numbers come from a three-mobile run)."""

    def load_all(direction: str, mobiles: int, rate: str, seconds: int) -> Shares:
        assert rate == f"{round(mx.OVERSHARE * 508_500 / mobiles / 1000)}k"
        return Shares(direction, kbps[:mobiles], [""] * mobiles, steady)

    rtts = [[5.0] * 18 + [30.0, None]]  # (the last one lost)
    monkeypatch.setattr(mx, "load_all", load_all)
    monkeypatch.setattr(mx, "_ping_later", lambda address, count: list(rtts[0]))


def test_a_trial_row_says_the_aggregate_by_one_clock_shares_and_each_mobiles_p95(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_trial(monkeypatch, [154.9, 156.6, 155.5], [472.4])
    row = mx.trial(3, "up", 10, 508_500.0)
    assert row["aggregate_bps"] == pytest.approx(472_400)
    assert row["aggregate_ratio"] == pytest.approx(472.4 / 508.5)
    assert row["receivers_sum_bps"] == pytest.approx(467_000)
    assert 0.999 < row["jain"] <= 1.0
    assert row["probes_sent"] == 60 and row["probes_lost"] == 3
    assert len(row["rtt_p95_ms"]) == 3 and 5.0 < row["rtt_p95_max_ms"] <= 30.0
    # a client that failed counts 0 and is named; no counters: no aggregate; Jain's index
    # compares the mobiles measured (its 0 is the client's, not the mobile's share), none
    # when fewer than two are left
    monkeypatch.setattr(
        mx,
        "load_all",
        lambda d, n, r, s: Shares(d, [150.0, 0.0], ["", "control connection refused"], []),
    )
    row = mx.trial(2, "down", 3, 508_500.0)
    assert row["aggregate_ratio"] is None and "mobile2: control connection" in row["error"]
    assert row["jain"] != row["jain"]  # (NaN)
    failed = ["", "unable to read from stream socket", ""]
    monkeypatch.setattr(
        mx, "load_all", lambda d, n, r, s: Shares(d, [150.0, 0.0, 50.0], failed, [210.0])
    )
    row = mx.trial(3, "down", 3, 508_500.0)
    assert row["jain"] == pytest.approx(0.8)  # (150 and 50: (200²) / (2 · 25000))


def test_summary_verdict_and_plot_from_the_saved_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ratios = {1: 0.99, 3: 0.93, 5: 0.90}

    def trial(n: int, direction: str, seconds: int, bound: float, mode: str) -> dict[str, Any]:
        assert bound == pytest.approx(mx.bound_bps(mode))
        return {
            **dict.fromkeys(
                ("offered_each_bps", "receivers_sum_bps", "aggregate_bps"), ratios[n] * bound
            ),
            "mode": mode,
            "mobiles": n,
            "direction": direction,
            "aggregate_ratio": (ratios[n] if direction == "down" else ratios[n] - 0.01)
            - (0.05 if mode == "stream" and n > 1 else 0.0),
            "per_mobile_bps": [ratios[n] * bound / n] * n,
            "jain": 1.0 if n < 5 else 0.97,
            "rtt_p95_ms": [20.0 + n] * n,
            "rtt_p95_max_ms": 20.0 + n,
            "probes_sent": 40 * n,
            "probes_lost": 0,
            "error": "",
        }

    ups: list[tuple[str, int]] = []
    monkeypatch.setattr(mx, "trial", trial)
    monkeypatch.setattr(
        mx.testbed, "up", lambda spec, **_: ups.append((spec.options.mode, spec.mobiles))
    )
    monkeypatch.setattr(mx.testbed, "down", lambda: None)
    out = ResultsDir(tmp_path / "run")
    s = mx.run(True, out, lambda m: None, lambda m, f: None)
    # a testbed of its own for each mode and N
    assert ups == [(m, n) for m in ("esb", "stream") for n in mx.QUICK_MOBILES]
    assert len(s["rows"]) == 4 * len(mx.QUICK_MOBILES)
    v = s["verdict"]
    assert "esb down: 5 mobiles carry 0.900 of one link's bound (0.91 of one mobile's)" in v
    assert "stream up: 5 mobiles carry 0.840 of one link's bound (0.86 of one mobile's)" in v
    assert "Jain >= 0.970" in v and "ping p95 <= 25 ms" in v
    for name in ("multinode.png", "multinode.svg", "multinode.csv"):
        assert (out.path / name).stat().st_size > 500
    assert_folder_documented(out.path)
    # `plot` judges and draws it again from the file alone
    (out.path / "multinode.png").unlink()
    again = dict((n, v) for n, v, _ in rejudge_experiments(out.path))
    assert again["multinode"] == s["verdict"]
    assert (out.path / "multinode.png").exists()
    saved = json.loads((out.path / "multinode.json").read_text())
    assert not any(math.isnan(r["jain"]) for r in saved["rows"])
