"""CPU steal: read from /proc/stat's format, recorded per trial, and a tTest trial that the
hypervisor spoilt is repeated (within a budget) instead of counted."""

from __future__ import annotations

import csv
from pathlib import Path

from measureservers import measure_servers

from longge.measure import report
from longge.measure.cpu import STEAL_LIMIT, StealMeter
from longge.measure.disturbance import unspoilt
from longge.measure.link import Target
from longge.measure.results import ResultsDir
from longge.measure.sweep import TTestPlan
from longge.measure.ttest import TTest


def _stat(path: Path, user: int, idle: int, steal: int) -> None:
    # cpu  user nice system idle iowait irq softirq steal guest guest_nice
    path.write_text(f"cpu  {user} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")


def test_steal_share_is_the_stolen_part_of_all_cpu_time(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    _stat(stat, 100, 100, 0)
    meter = StealMeter(str(stat))
    _stat(stat, 160, 120, 20)  # 60 + 20 + 20 = 100 ticks, 20 stolen
    assert abs(meter.share() - 0.2) < 1e-9
    meter.restart()
    assert meter.share() == 0.0  # nothing happened since


def test_unreadable_or_garbage_stat_reads_as_no_steal(tmp_path: Path) -> None:
    assert StealMeter(str(tmp_path / "missing")).share() == 0.0
    bad = tmp_path / "bad"
    bad.write_text("cpu  a b c\n")
    assert StealMeter(str(bad)).share() == 0.0
    short = tmp_path / "short"
    short.write_text("cpu  1 2 3\n")
    assert StealMeter(str(short)).share() == 0.0


def test_this_kernels_proc_stat_is_understood() -> None:
    """The meter reads the real /proc/stat (a format change would silently give 0.0 steal)."""
    from longge.measure.cpu import _read

    fields = _read("/proc/stat")
    assert fields is not None and len(fields) >= 8


class _Stolen(StealMeter):
    """The first ``n`` trials see heavy steal, the rest none (a shared countdown)."""

    left = 0

    def share(self) -> float:
        _Stolen.left -= 1
        return 0.4 if _Stolen.left >= 0 else 0.0


def _ttest(tmp_path: Path, stolen: int) -> tuple[dict[str, object], list[dict[str, str]]]:
    _Stolen.left = stolen
    with measure_servers() as (iperf_port, rtt_port):
        out = ResultsDir(tmp_path / f"run{stolen}")
        plan = TTestPlan(duration=1, repeats=2, start_bps=50_000, max_bps=50_000)
        target = Target("127.0.0.1", iperf_port, rtt_port)
        summary = TTest(target, plan, out, steal_meter=_Stolen).run()
        with open(out.path / "trials.csv") as f:
            rows = list(csv.DictReader(f))
    return summary, rows


def test_a_stolen_trial_is_repeated_and_not_counted(tmp_path: Path) -> None:
    summary, rows = _ttest(tmp_path, stolen=1)
    assert len(rows) == 3  # one spoilt, two counted
    assert rows[0]["error"].startswith("CPU steal 40 %")
    assert float(rows[0]["cpu_steal"]) == 0.4
    assert [r["error"] for r in rows[1:]] == ["", ""]
    point = summary["points"][0]  # type: ignore[index]
    assert point["trials"] == 3 and point["failed_trials"] == 1
    assert summary["cpu_steal"] == {"limit": STEAL_LIMIT, "max": 0.4, "trials_repeated": 1}
    assert "1 trial(s) repeated" in report.summary_text(summary)


def test_repeats_for_steal_are_bounded(tmp_path: Path) -> None:
    summary, rows = _ttest(tmp_path, stolen=100)
    # two repeats budgeted for two trials: after that a stolen trial counts (and says so)
    assert len(rows) == 4
    assert sum(r["error"].startswith("CPU steal") for r in rows) == 2
    assert summary["cpu_steal"]["trials_repeated"] == 2  # type: ignore[index]


def test_unspoilt_repeats_a_spoilt_measurement_once_then_keeps_it() -> None:
    calls: list[str] = []

    def measure() -> int:
        calls.append("m")
        return len(calls)

    _Stolen.left = 1  # the first measurement sees steal, the second none
    result, disturbed, repeated = unspoilt(
        measure, between=lambda: calls.append("b"), meter=_Stolen
    )
    assert (result, disturbed.steal, repeated) == (3, 0.0, 1) and calls == ["m", "b", "m"]
    _Stolen.left = 100  # always spoilt: measured twice, the second kept and said so
    calls.clear()
    result, disturbed, repeated = unspoilt(measure, meter=_Stolen)
    assert (result, disturbed.steal, repeated) == (2, 0.4, 1)
    assert disturbed.reason is not None and "CPU steal 40 %" in disturbed.reason
