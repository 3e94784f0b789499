"""lTest --quick end to end, as a new user runs it: no radio, so it brings up the testbed,
measures the capacity (a quick tTest) and the RTT under load from lg-mobile against the
servers in lg-base, writes the results folder and plots, and takes the testbed down."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from fielddoc import assert_folder_documented
from test_testbed import pytestmark  # noqa: F401  (same root/tool requirements)

from longge import testbed


def test_ltest_quick_from_nothing(tmp_path: Path) -> None:
    testbed.down()
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "longge", "lTest", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "bringing up the emulated testbed" in r.stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["kind"] == "lTest" and not s.get("error")
    t = s["ttest"]
    model = s["context"]["model_capacity_bps"]
    # Never above the model by more than 5 % (it is the air's bound: more is a wrong model or
    # a wrong capacity), and not far below it (issue 39: once anything within ±50 % passed).
    # Per second the emulated air ran, where the machine held it back through the saturated
    # trials (tTest's own figure for that, measure/emulator.py). What the scheduler may still
    # take is a timing figure (benchmarks: docs/measurements.md); seen here: 0.947 of the model
    # beside the suite's other worker, 0.98-0.99 on a quiet machine.
    capacity = t["capacity_running_bps"] or t["capacity_bps"]
    assert 0.85 * model <= capacity <= 1.05 * model, (capacity, model)
    assert s["baseline_rtt_ms"] > 0
    assert s["levels"][0]["rho"] == 0.0
    assert all(lv["probes_sent"] > 0 for lv in s["levels"])
    for lv in s["levels"]:  # user-space stamps include the wake-ups the kernel's exclude
        assert lv["app_rtt_median_ms"] >= lv["rtt_median_ms"] > 0
        assert 0.0 <= lv["cpu_steal"] <= 1.0
    assert set(s["cpu_steal"]) == {"limit", "max", "levels_over_limit"}
    with open(out / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert all(0.0 <= float(r["cpu_steal"]) <= 1.0 for r in rows)
    assert len(rows) >= len(s["levels"]) + len(t["points"])
    for name in ("ltest.png", "ltest.svg", "ttest.png", "context.json"):
        assert (out / name).stat().st_size > 500
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "lg-" not in left  # it took down what it brought up
    assert s["schema"] >= 1
    assert_folder_documented(out)  # every field it wrote is in docs/results.md
