"""Experiment ``adaptive-stream``: experiment ``adaptive``'s schedule (adaptive_experiment.py)
in stream mode, where the adaptation chooses the rate only (the chips send without
acknowledgements: no retries; the rate is judged on the ARQ's frames and agreed through it,
docs/design.md §5, "Stream mode"), against each fixed rate; the load is above what 1 Mbit/s
carries in stream mode. The same figures, targets, summary and plot; its files are
``adaptive-stream.json``, ``.csv``, ``.png``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from longge.measure import adaptive_experiment as ax
from longge.measure.results import ResultsDir

NAME = f"{ax.NAME}-stream"
QUESTION = (
    "In stream mode, does a link that chooses its own rate (--adapt) carry what the best "
    "fixed rate does as the channel changes, and how fast does it settle?"
)


def run(
    quick: bool,
    out: ResultsDir,
    say: Callable[[str], None],
    progress: Callable[[str, float], None],
    values: str | None = None,
    seconds: int | None = None,
) -> dict[str, Any]:
    return ax.run(quick, out, say, progress, "stream", values, seconds)


def check_values(values: str) -> tuple[str, ...]:
    return ax.check_values(values, "stream")


def verdict(summary: dict[str, Any]) -> str:
    return ax.verdict(summary)


def plot(summary: dict[str, Any], out: Path) -> list[Path]:
    return ax.plot(summary, out)
