"""Results folders: what a run measured, written as it is measured, read back for analysis.

    DIR/context.json     versions, system, radio settings (daemon and emulator), command line
    DIR/trials.csv       one row per trial, appended as each trial ends
    DIR/trials/NNN.csv   the per-interval (tTest) or per-probe (lTest) records of trial NNN
    DIR/summary.json     the findings and the per-point data (written at the end, also after
                         an interruption, with "error" or "interrupted" set)
    DIR/*.png, *.svg     plots made from summary.json only

Every field, its unit and where it comes from: docs/results.md (tests/test_results_fields.py
fails on a field written that it does not list).
"""

from __future__ import annotations

import csv
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from longge import __version__
from longge.errors import LongGeError

#: The version of the results' format (docs/results.md): written into every summary.json and
#: experiment JSON; raised when a field changes meaning or goes away.
SCHEMA = 1

TRIAL_FIELDS = [
    "trial",
    "kind",
    "rho",
    "offered_bps",
    "received_bps",
    "sent_bps",
    "efficiency",
    "packets",
    "lost_packets",
    "jitter_ms",
    "retransmits",
    "streams",
    "rtt_median_ms",
    "rtt_p95_ms",
    "probes_sent",
    "probes_lost",
    "error",
    "cpu_steal",
    "air_freezes",
    "air_frozen_ms",
    "started",
    "seconds",
    "direction",
    "reverse_received_bps",
    "reverse_packets",
    "reverse_lost_packets",
]


def results_root() -> Path:
    """Where results go by default: ``LONGGE_RESULTS``, else the checkout's ``results/``
    (wherever the command was started from), else ``results/`` in the current directory."""
    chosen = os.environ.get("LONGGE_RESULTS")
    if chosen:
        return Path(chosen)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").exists() and (checkout / "run.sh").exists():
        return checkout / "results"
    return Path("results")


def default_dir(kind: str) -> Path:
    return results_root() / f"{time.strftime('%Y%m%d-%H%M%S')}-{kind}"


class ResultsError(LongGeError):
    """The results folder cannot be made or written (names it and why)."""


class ResultsDir:
    """A run's folder. One that already holds trials (``--out`` given twice, a resumed tune)
    goes on numbering after them: no trial's file is written over."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._csv = self.path / "trials.csv"
        try:
            (self.path / "trials").mkdir(parents=True, exist_ok=True)
            if not self._csv.exists():
                with open(self._csv, "w", newline="") as f:
                    csv.DictWriter(f, TRIAL_FIELDS).writeheader()
            with open(self._csv, newline="") as f:
                self._n = max((_trial_no(r) for r in csv.DictReader(f)), default=0)
        except (OSError, UnicodeDecodeError) as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> ResultsError:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return ResultsError(f"results folder {self.path}: {why} (choose another with --out)")

    def write_summary(self, summary: dict[str, Any], name: str = "summary.json") -> Path:
        """The findings, stamped with the results' format version (``schema``)."""
        return self.write_json(name, {"schema": SCHEMA, **summary})

    def write_json(self, name: str, obj: Any) -> Path:
        p = self.path / name
        tmp = p.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(obj, indent=2, default=str))
            os.replace(tmp, p)
        except OSError as exc:  # a full disk: said, not a traceback
            raise self._error(exc) from exc
        return p

    def add_trial(self, row: dict[str, Any], records: list[dict[str, Any]]) -> int:
        self._n += 1
        row = {"trial": self._n, **row}
        try:
            with open(self._csv, "a", newline="") as f:
                csv.DictWriter(f, TRIAL_FIELDS, extrasaction="ignore").writerow(row)
            if records:
                with open(self.path / "trials" / f"{self._n:03d}.csv", "w", newline="") as f:
                    w = csv.DictWriter(f, list(records[0]))
                    w.writeheader()
                    w.writerows(records)
        except OSError as exc:
            raise self._error(exc) from exc
        return self._n


def _trial_no(row: dict[str, Any]) -> int:
    try:
        return int(row.get("trial") or 0)
    except ValueError:
        return 0


def read_summary(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    data: dict[str, Any] = json.loads(p.read_text())
    return data


def system_context(argv: list[str] | None = None) -> dict[str, Any]:
    iperf_version = None
    try:
        import iperf3

        iperf_version = iperf3.Client().iperf_version
    except Exception as exc:  # the context records what it could not find
        iperf_version = f"unavailable: {exc}"
    return {
        "longge_version": __version__,
        "python": sys.version.split()[0],
        "libiperf": iperf_version,
        "system": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "command": argv if argv is not None else sys.argv,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
