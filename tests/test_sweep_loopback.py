"""tTest against servers on loopback (any link works; no root needed): it sweeps, writes its
results folder as it goes, and an interrupted run keeps what it measured."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fielddoc import assert_folder_documented
from measureservers import measure_servers


def _offered_loads(trials_csv: Path) -> set[str]:
    """The loads with at least one trial written so far (a row still being written, its
    last fields missing, does not count)."""
    if not trials_csv.exists():
        return set()
    with open(trials_csv) as f:
        return {row["offered_bps"] for row in csv.DictReader(f) if None not in row.values()}


def test_interrupted_ttest_keeps_its_trials(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with measure_servers() as (iperf_port, rtt_port):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "longge",
                "tTest",
                "--host",
                "127.0.0.1",
                "-p",
                str(iperf_port),
                "--rtt-port",
                str(rtt_port),
                "-t",
                "1",
                "--repeats",
                "1",
                "--out",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until three loads have trials on disk
            if len(_offered_loads(out / "trials.csv")) >= 3:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert "interrupted" in stdout
    with open(out / "trials.csv") as f:
        trials = list(csv.DictReader(f))
    assert len(trials) >= 3
    assert all(float(t["received_bps"]) > 0 for t in trials if not t["error"])
    # a trial the machine spoilt is measured again at the same load: a point per load
    assert len(summary["points"]) == len(_offered_loads(out / "trials.csv")) >= 3
    assert summary["capacity_reached"] is False  # loopback never saturates at these loads
    assert (out / "ttest.png").exists()


def test_each_direction_is_measured_and_named(tmp_path: Path) -> None:
    """-R offers the load from the server's side, --bidir from both at once; the summary, the
    trial rows, the report and the plot say which direction each figure is."""
    from longge.measure import plots, report
    from longge.measure.link import Target
    from longge.measure.results import SCHEMA, ResultsDir
    from longge.measure.sweep import TTestPlan
    from longge.measure.ttest import TTest

    with measure_servers() as (iperf_port, rtt_port):
        for direction in ("down", "both"):
            out = ResultsDir(tmp_path / direction)
            plan = TTestPlan(
                duration=1, repeats=1, start_bps=200_000, max_bps=200_000, direction=direction
            )
            summary = TTest(Target("127.0.0.1", iperf_port, rtt_port), plan, out).run()
            out.write_summary(summary)
            assert summary["direction"] == direction
            ways = [summary] + ([summary["reverse"]] if direction == "both" else [])
            assert ("reverse" in summary) is (direction == "both")
            for way in ways:
                (point,) = way["points"]  # one load, however often the machine made it repeat
                assert point["received_bps"] == pytest.approx(200_000, rel=0.2)
                assert point["packets"] > 10
            with open(out.path / "trials.csv") as f:
                rows = list(csv.DictReader(f))
            assert rows and all(r["direction"] == direction for r in rows)
            assert all(bool(r["reverse_received_bps"]) is (direction == "both") for r in rows)
            text = report.summary_text(summary)
            assert "base -> mobile" in text
            assert ("mobile -> base" in text) is (direction == "both")
            assert plots.plot_runs([out.path])
            saved = json.loads((out.path / "summary.json").read_text())
            assert saved["schema"] == SCHEMA
            assert_folder_documented(out.path)
