"""The one skeleton every measurement runs in (measure.runner._measure): a results folder with
its context, and the part measured kept whatever stops the job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from longge.measure import runner
from longge.measure.link import Target
from longge.measure.results import ResultsDir


class _Job:
    def __init__(self, stop: BaseException | None) -> None:
        self.stop = stop
        self.points: list[int] = []

    def run(self) -> dict[str, Any]:
        for i in range(3):
            if i == 2 and self.stop is not None:
                raise self.stop
            self.points.append(i)
        return {"kind": "x", "points": self.points}

    def partial(self) -> dict[str, Any]:
        return {"kind": "x", "points": list(self.points)}


@pytest.mark.parametrize(
    ("stop", "mark"),
    [(None, None), (KeyboardInterrupt(), "interrupted"), (RuntimeError("iperf3 died"), "error")],
)
def test_what_was_measured_is_kept_whatever_stops_the_job(
    tmp_path: Path, stop: BaseException | None, mark: str | None
) -> None:
    said: list[str] = []
    jobs: list[_Job] = []

    def start(results: ResultsDir, context: dict[str, Any]) -> _Job:
        assert (results.path / "context.json").exists()  # the context comes first
        jobs.append(_Job(stop))
        return jobs[0]

    target = Target("192.0.2.1")  # a real link's target: no daemons, no air
    results = ResultsDir(tmp_path / "out")
    summary = runner._measure(target, results, said.append, start)
    assert summary["points"] == ([0, 1, 2] if stop is None else [0, 1])
    assert summary["context"]["target"] == {"host": "192.0.2.1", "netns": None}
    assert json.loads((results.path / "context.json").read_text())["target"]["host"]
    if mark == "interrupted":
        assert summary["interrupted"] is True
    elif mark == "error":
        assert summary["error"] == "RuntimeError: iperf3 died"
        assert any("iperf3 died" in s for s in said)
    else:
        assert "error" not in summary and "interrupted" not in summary


def test_a_results_folder_given_twice_keeps_both_runs_trials(tmp_path: Path) -> None:
    """Once the second run numbered its trials from 1 again and wrote over trials/001.csv."""
    first = ResultsDir(tmp_path)
    first.add_trial({"offered_bps": 1}, [{"t": 1}])
    first.add_trial({"offered_bps": 2}, [{"t": 2}])
    again = ResultsDir(tmp_path)
    assert again.add_trial({"offered_bps": 3}, [{"t": 3}]) == 3
    assert (tmp_path / "trials" / "001.csv").read_text().splitlines()[1] == "1"


def test_a_results_folder_that_cannot_be_one_is_named(tmp_path: Path) -> None:
    """--out naming a file: once a NotADirectoryError traceback."""
    from longge.measure.results import ResultsError

    a_file = tmp_path / "afile"
    a_file.write_text("x")
    with pytest.raises(ResultsError, match=r"afile.*choose another with --out"):
        ResultsDir(a_file)


def test_a_folder_the_job_refuses_keeps_its_context(tmp_path: Path) -> None:
    """A tune resumed onto another link's grid is refused; the folder's context.json must
    still describe that grid's link, not the refused run's."""
    from longge.errors import ConfigError
    from longge.measure.tune import check_resume, tune_link
    from longge.radio.options import RadioOptions

    out = ResultsDir(tmp_path / "out")
    (out.path / "context.json").write_text('{"mine": true}')
    (out.path / "grid.csv").write_text("ard_us,arc,capacity_bps,error\n250,2,450000,\n")
    out.write_json("tune_link.json", tune_link(RadioOptions(), 0.1, 28))

    def check(results: ResultsDir, context: dict[str, Any]) -> None:
        check_resume(results, RadioOptions(rate="1M"), 0.1, 28)

    def start(results: ResultsDir, context: dict[str, Any]) -> _Job:
        raise AssertionError("started on a refused folder")

    with pytest.raises(ConfigError, match="rate '2M' there, '1M' here"):
        runner._measure(Target("192.0.2.1"), out, lambda s: None, start, check=check)
    assert json.loads((out.path / "context.json").read_text()) == {"mine": True}
