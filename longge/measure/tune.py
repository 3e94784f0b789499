"""Retry tuning: sweep ARD × ARC live on the running link, measure, compare with the model,
recommend. Each grid point is applied to both daemons through their control sockets (the
interface stays up), then measured: capacity (a short search around the model's prediction),
RTT p95 at ρ ≈ 0.5 and 0.9 (probes over background load), datagram loss at ρ ≈ 0.9, and the
per-attempt failure rate q from the radio's own counters (retransmissions / frames).

Results go to ``grid.csv`` as each point ends, so an interrupted tune resumes where it stopped.
"""

from __future__ import annotations

import csv
import itertools
import math
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from longge.daemon.control import request
from longge.measure import analysis
from longge.measure.iperf import TrialSpec, parse_result, run_trial
from longge.measure.model import udp_goodput_bps
from longge.measure.results import ResultsDir
from longge.measure.sweep import Progress, Target, drain, probe_in
from longge.radio.options import RadioOptions

GRID_FIELDS = [
    "ard_us",
    "arc",
    "capacity_bps",
    "model_capacity_bps",
    "q_measured",
    "rtt_p95_05_ms",
    "rtt_p95_09_ms",
    "loss_09",
    "model_residual_loss",
    "error",
]


@dataclass(frozen=True)
class TunePlan:
    ard_us: tuple[int, ...] = (250, 500, 1000, 2500)
    arc: tuple[int, ...] = (0, 1, 2, 3, 5, 10, 15)
    trial_s: int = 5
    probe_s: int = 5
    max_loss: float = 0.001
    max_rtt_factor: float = 2.0


QUICK_TUNE = TunePlan(ard_us=(250, 2500), arc=(2, 15), trial_s=3, probe_s=3)


def model_capacity(opts: RadioOptions, q: float, length: int = 1400) -> float:
    """UDP payload rate the model expects at per-attempt failure q (packets whose frames all
    got through; a frame lost after ARC+1 attempts loses its packet)."""
    t = opts.timing()
    no_loss = udp_goodput_bps(opts, length)
    frames = math.ceil((length + 34) / (opts.payload - 1))
    slow = t.expected_service_ns(q) / t.expected_service_ns(0.0)
    return no_loss / slow * (1 - t.residual_loss(q)) ** frames


def set_radio(target: Target, options: dict[str, Any]) -> None:
    for path in target.controls:
        reply = request(path, {"cmd": "set", "options": options})
        if "error" in reply:
            raise RuntimeError(f"{path}: {reply['error']}")


def tx_counters(target: Target) -> tuple[int, int]:
    """(frames sent, retransmissions) summed over the nodes' TX radios."""
    frames = retrans = 0
    for path in target.controls:
        tx = request(path, {"cmd": "status"}).get("tx", {})
        frames += tx.get("frames_sent", 0)
        retrans += tx.get("retransmissions") or 0
    return frames, retrans


class Tune:
    def __init__(
        self,
        target: Target,
        base: RadioOptions,
        plan: TunePlan,
        out: ResultsDir,
        q_hint: float,
        progress: Progress = lambda m, f: None,
    ) -> None:
        self.target = target
        self.base = base
        self.plan = plan
        self.out = out
        self.q_hint = q_hint
        self.progress = progress
        self.grid_csv = out.path / "grid.csv"
        self.rows = self._load()
        self.idle_rtt_ms = math.nan

    def _load(self) -> list[dict[str, Any]]:
        if not self.grid_csv.exists():
            with open(self.grid_csv, "w", newline="") as f:
                csv.DictWriter(f, GRID_FIELDS).writeheader()
            return []
        with open(self.grid_csv) as f:
            return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]

    def _trial(self, rate: float, seconds: int) -> Any:
        spec = TrialSpec(
            host=self.target.host,
            port=self.target.iperf_port,
            rate_bps=int(rate),
            duration=seconds,
            length=1400,
        )
        return parse_result(spec, run_trial(spec, self.target.netns))

    def _rtt_p95(self, rate: float) -> float:
        count = int(self.plan.probe_s / 0.05)
        box: dict[str, Any] = {}
        load = threading.Thread(
            target=lambda: box.update(r=self._trial(rate, self.plan.probe_s + 3))
        )
        load.start()
        time.sleep(1.5)
        probes = probe_in(self.target, count, 0.05)
        load.join()
        rtts = [r["rtt_ms"] for r in probes.get("records", []) if r["rtt_ms"] is not None]
        drain(self.target)
        return analysis.percentile(rtts, 0.95)

    def point(self, ard: int, arc: int) -> dict[str, Any]:
        opts = replace(self.base, ard_us=ard, arc=arc)
        set_radio(self.target, {"ard_us": ard, "arc": arc})
        drain(self.target)
        predicted = model_capacity(opts, self.q_hint)
        f0, r0 = tx_counters(self.target)
        pts = []
        loss = math.nan
        for factor in (0.6, 0.9, 1.05, 1.3):
            res = self._trial(factor * predicted, self.plan.trial_s)
            pts.append(analysis.Point(factor * predicted, res.received_bps))
            if factor == 0.9:
                loss = res.lost_packets / res.packets if res.packets else math.nan
            drain(self.target)
        f1, r1 = tx_counters(self.target)
        capacity = analysis.fit_capacity(pts)
        frames = max(1, f1 - f0)
        attempts = frames + (r1 - r0)
        q = (r1 - r0) / attempts  # failed attempts among all attempts (lower bound: MAX_RT)
        return {
            "ard_us": ard,
            "arc": arc,
            "capacity_bps": capacity,
            "model_capacity_bps": model_capacity(opts, q),
            "q_measured": q,
            "rtt_p95_05_ms": self._rtt_p95(0.5 * capacity),
            "rtt_p95_09_ms": self._rtt_p95(0.9 * capacity),
            "loss_09": loss,
            "model_residual_loss": opts.timing().residual_loss(q),
            "error": "",
        }

    def run(self) -> dict[str, Any]:
        self.progress("idle RTT", 0.0)
        probes = probe_in(self.target, 40, 0.05)
        self.idle_rtt_ms = analysis.percentile(
            [r["rtt_ms"] for r in probes.get("records", []) if r["rtt_ms"] is not None], 0.5
        )
        done = {(int(r["ard_us"]), int(r["arc"])) for r in self.rows}
        grid = list(itertools.product(self.plan.ard_us, self.plan.arc))
        for i, (ard, arc) in enumerate(grid):
            if (ard, arc) in done:
                continue
            self.progress(f"ARD {ard} µs ARC {arc}", i / len(grid))
            try:
                row = self.point(ard, arc)
            except Exception as exc:  # record and go on: one bad point must not cost the grid
                row = {"ard_us": ard, "arc": arc, "error": f"{type(exc).__name__}: {exc}"}
            self.rows.append(row)
            with open(self.grid_csv, "a", newline="") as f:
                csv.DictWriter(f, GRID_FIELDS, extrasaction="ignore").writerow(row)
        set_radio(self.target, {"ard_us": self.base.ard_us, "arc": self.base.arc})
        self.progress("done", 1.0)
        return self.summary()

    def summary(self) -> dict[str, Any]:
        ok = [r for r in self.rows if not r.get("error")]
        limit = self.plan.max_rtt_factor * self.idle_rtt_ms
        good = [
            r
            for r in ok
            if (r["loss_09"] or 0) <= self.plan.max_loss
            and r["rtt_p95_09_ms"] <= max(limit, self.idle_rtt_ms + 25)
        ]
        best = max(good or ok, key=lambda r: r["capacity_bps"], default=None)
        rule = (
            f"highest capacity with datagram loss at ρ 0.9 <= {self.plan.max_loss:.1%} and "
            f"RTT p95 at ρ 0.9 <= max({self.plan.max_rtt_factor:g} × idle, idle + 25 ms)"
        )
        return {
            "kind": "tune",
            "idle_rtt_ms": self.idle_rtt_ms,
            "q_hint": self.q_hint,
            "grid": self.rows,
            "recommendation": best,
            "rule": rule,
            "rule_met": bool(good),
            "apply": None
            if best is None
            else (
                f"./run.sh radio set --ard-us {int(best['ard_us'])} --arc {int(best['arc'])}  "
                f"(permanently: ard_us = {int(best['ard_us'])}, arc = {int(best['arc'])} in the "
                "[radio] section of both nodes' longge.toml)"
            ),
        }


def _num(v: str) -> Any:
    if v == "":
        return ""
    try:
        return float(v)
    except ValueError:
        return v


def plot_tune(summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in summary["grid"] if not r.get("error")]
    ards = sorted({int(r["ard_us"]) for r in rows})
    arcs = sorted({int(r["arc"]) for r in rows})
    panels = [
        ("capacity_bps", "capacity (kbit/s)", 1e-3),
        ("rtt_p95_09_ms", "RTT p95 at ρ 0.9 (ms)", 1),
        ("loss_09", "datagram loss at ρ 0.9 (%)", 100),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, (key, title, scale) in zip(axes, panels, strict=True):
        grid = [[math.nan] * len(ards) for _ in arcs]
        for r in rows:
            grid[arcs.index(int(r["arc"]))][ards.index(int(r["ard_us"]))] = float(r[key]) * scale
        im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(ards)), [str(a) for a in ards])
        ax.set_yticks(range(len(arcs)), [str(a) for a in arcs])
        ax.set(xlabel="ARD (µs)", ylabel="ARC", title=title)
        vals = [v for row in grid for v in row if v == v]
        lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
        for yi in range(len(arcs)):
            for xi in range(len(ards)):
                v = grid[yi][xi]
                if v == v:  # not NaN
                    bright = hi > lo and (v - lo) / (hi - lo) > 0.6
                    ax.text(
                        xi,
                        yi,
                        f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}",
                        ha="center",
                        va="center",
                        color="black" if bright else "white",
                        fontsize=9,
                    )
        fig.colorbar(im, ax=ax)
    best = summary.get("recommendation")
    if best:
        fig.suptitle(f"recommended: ARD {int(best['ard_us'])} µs, ARC {int(best['arc'])}", y=1.05)
    paths = [out / "tune.png", out / "tune.svg"]
    for p in paths:
        fig.savefig(p, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return paths
