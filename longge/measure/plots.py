"""Plots from saved results only (summary.json): a re-plot never re-measures.

``plot_runs([dir, ...])`` draws one run, or overlays several (e.g. two retry settings).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _label(run: dict[str, Any], path: Path) -> str:
    radio = run.get("context", {}).get("radio", {})
    if radio.get("mode") == "stream":  # ARD and ARC do not apply: LongGe's ARQ retries
        return f"{path.name}: {radio.get('rate')} stream (ARQ)"
    if radio:
        return (
            f"{path.name}: {radio.get('rate')} ARD {radio.get('ard_us')} µs ARC {radio.get('arc')}"
        )
    return path.name


def _ways(run: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each measured direction of a tTest run, named (--bidir has two)."""
    if run.get("direction") == "both" and "reverse" in run:
        return [("mobile -> base", run), ("base -> mobile", run["reverse"])]
    return [(run.get("direction_label", "mobile -> base"), run)]


def _save(fig: Any, out: Path, name: str) -> list[Path]:
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    for p in paths:
        fig.savefig(p, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return paths


def plot_ttest(runs: list[tuple[Path, dict[str, Any]]], out: Path) -> list[Path]:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    top = 0.0
    flat = [(path, whole, way, run) for path, whole in runs for way, run in _ways(whole)]
    directions = sorted({way for _, _, way, _ in flat})
    for path, whole, way, run in flat:
        label = _label(whole, path) + (f" ({way})" if len(flat) > len(runs) else "")
        pts = [p for p in run["points"] if p["received_bps"]]
        x = [p["offered_bps"] / 1e3 for p in pts]
        y = [p["received_bps"] / 1e3 for p in pts]
        lo = [(p["received_bps"] - (p["received_min_bps"] or p["received_bps"])) / 1e3 for p in pts]
        hi = [((p["received_max_bps"] or p["received_bps"]) - p["received_bps"]) / 1e3 for p in pts]
        line = ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=3, label=label)
        color = line[0].get_color()
        cap = run.get("capacity_bps")
        if cap:
            ax.axhline(
                cap / 1e3,
                color=color,
                linestyle="--",
                linewidth=1,
                label=f"C = {cap / 1e3:.0f} kbit/s",
            )
        sat = run.get("saturation")
        if sat:
            ax.axvline(sat["offered_bps"] / 1e3, color=color, linestyle=":", linewidth=1)
        lx = [p["offered_bps"] / 1e3 for p in run["points"] if p["loss"] is not None]
        ly = [100 * p["loss"] for p in run["points"] if p["loss"] is not None]
        ax2.plot(lx, ly, marker="o", color=color, label=label)
        top = max([top, *x])
        _draw_floor(ax, ax2, run, color)
    ax.plot([1, top], [1, top], color="grey", linewidth=1, label="received = offered")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="offered load (kbit/s)",
        ylabel="received at the far end (kbit/s)",
        title=f"tTest: throughput, {' and '.join(directions)}",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax2.set(
        xscale="log",
        xlabel="offered load (kbit/s)",
        ylabel="datagrams lost (%)",
        title=f"tTest: loss, {' and '.join(directions)}",
    )
    ax2.grid(True, which="both", alpha=0.3)
    if ax2.get_legend_handles_labels()[0]:
        ax2.legend(fontsize=8)
    return _save(fig, out, "ttest")


def _draw_floor(ax: Any, ax2: Any, run: dict[str, Any], color: str) -> None:
    """A lossy link's floor (measure/floor.py): on the loss plot, the share of the largest
    datagrams lost at every load (its 95 % interval shaded); on the throughput plot, what the
    floor lets through, (1 − p₀)·offered, up to C."""
    p0, ci = run.get("loss_floor"), run.get("loss_floor_ci95")
    if p0 is None or not ci:  # (TCP: no datagrams counted)
        return
    xs = [p["offered_bps"] / 1e3 for p in run["points"]]
    if not xs:
        return
    lo_x, hi_x = min(xs), max(xs)
    size = run.get("loss_floor_datagram_bytes")
    ax2.axhline(
        100 * p0,
        color=color,
        linestyle="--",
        linewidth=1,
        label=f"loss floor p0 = {100 * p0:.2f} % ({size}-byte datagrams)",
    )
    ax2.axhspan(100 * ci[0], 100 * ci[1], color=color, alpha=0.12, label="p0's 95 % interval")
    cap = run.get("capacity_bps") or math.inf
    grid = [lo_x * (hi_x / lo_x) ** (i / 60) for i in range(61)] if hi_x > lo_x else [lo_x]
    ax.plot(
        grid,
        [min((1 - p0) * x, cap / 1e3) for x in grid],
        color=color,
        linestyle="-.",
        linewidth=1,
        alpha=0.8,
        label="min((1 - p0) x offered, C)",
    )


def plot_ltest(runs: list[tuple[Path, dict[str, Any]]], out: Path) -> list[Path]:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for path, run in runs:
        lv = [v for v in run["levels"] if v["rtt_median_ms"] == v["rtt_median_ms"]]
        x = [v["rho"] for v in lv]
        med = [v["rtt_median_ms"] for v in lv]
        p95 = [v["rtt_p95_ms"] for v in lv]
        line = ax.plot(x, med, marker="o", label=f"{_label(run, path)} median")
        color = line[0].get_color()
        ax.plot(x, p95, marker=".", linestyle="--", color=color, label="p95")
        q = [(v["rho"], v["queue_delay_p50_ms"]) for v in lv if "queue_delay_p50_ms" in v]
        if q:
            ax.plot(
                [r for r, _ in q],
                [max(d, 0.1) for _, d in q],
                marker="s",
                linestyle=":",
                color=color,
                alpha=0.7,
                label="load's queueing delay p50 (daemon)",
            )
        ax.axhline(
            run["baseline_rtt_ms"],
            color=color,
            linewidth=1,
            alpha=0.6,
            label=f"idle baseline {run['baseline_rtt_ms']:.1f} ms",
        )
        if run.get("knee_rho") is not None:
            ax.axvline(
                run["knee_rho"],
                color=color,
                linestyle=":",
                label=f"latency knee ρ = {run['knee_rho']:.2f}",
            )
        ax2.plot(
            x,
            [100 * v["probes_lost"] / v["probes_sent"] if v["probes_sent"] else 0 for v in lv],
            marker="o",
            color=color,
            label=_label(run, path),
        )
    ax.axvline(1.0, color="grey", linewidth=1, alpha=0.5)
    lo, hi = ax.get_ylim()
    ax.set(
        yscale="log" if lo > 0 and hi / lo > 30 else "linear",  # seconds of latency: log
        xlabel="ρ = offered / capacity",
        ylabel="RTT (ms)",
        title="lTest: round-trip time under load, "
        + runs[0][1].get("direction_label", "mobile -> base"),
    )
    if ax.get_yscale() == "linear":
        ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax2.set(xlabel="ρ = offered / capacity", ylabel="probes lost (%)", title="lTest: probe loss")
    ax2.set_ylim(bottom=0, top=max(1.0, ax2.get_ylim()[1]))
    ax2.grid(True, alpha=0.3)
    return _save(fig, out, "ltest")


def plot_runs(dirs: list[Path], out: Path | None = None) -> list[Path]:
    from longge.measure.results import read_summary

    runs = [(Path(d), read_summary(d)) for d in dirs]
    out = out or Path(dirs[0])
    out.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    tt = [(p, r) for p, r in runs if r.get("kind") == "tTest" and r.get("points")]
    tt += [
        (p, r["ttest"])
        for p, r in runs
        if r.get("kind") == "lTest" and r.get("ttest") and len(runs) == 1
    ]
    lt = [(p, r) for p, r in runs if r.get("kind") == "lTest" and r.get("levels")]
    if tt:
        made += plot_ttest(tt, out)
    if lt:
        made += plot_ltest(lt, out)
    for path, run in runs:  # one folder's own plots, drawn again from its files
        if run.get("kind") == "tune" and run.get("grid"):
            made += replot_tune(run, out if len(runs) == 1 else path)
        if run.get("kind") == "experiments":
            made += [p for _, _, ps in rejudge_experiments(path) for p in ps]
    return made


def replot_tune(summary: dict[str, Any], out: Path) -> list[Path]:
    """A tune folder's heatmaps and load curves from its summary.json alone."""
    from longge.measure.tune_plots import plot_tune, plot_tune_curves
    from longge.radio.options import RadioOptions

    made = plot_tune(summary, out)
    if summary.get("options"):  # folders before schema 1 lack them: no model curves then
        made += plot_tune_curves(summary, RadioOptions.from_saved(summary["options"]), out)
    return made


def rejudge_experiments(folder: Path, draw: bool = True) -> list[tuple[str, str, list[Path]]]:
    """Each experiment of a battery folder judged (and plotted) again from its NAME.json:
    (name, verdict, plots). The definition is the code's (EXPERIMENTS), the rows the file's."""
    import json

    from longge.measure.experiment_plans import EXPERIMENTS
    from longge.measure.experiment_report import plot, verdict

    out = []
    for name, exp in EXPERIMENTS.items():
        p = folder / f"{name}.json"
        if not p.exists():
            continue
        data = json.loads(p.read_text())
        if not data.get("rows"):
            continue
        out.append((name, verdict(exp, data), plot(exp, data, folder) if draw else []))
    from longge.measure import own_testbeds

    for own in own_testbeds.modules():  # (testbeds of their own)
        p = folder / f"{own.NAME}.json"
        if p.exists():
            data = json.loads(p.read_text())
            if data.get("rows"):
                drawn = own.plot(data, folder) if draw else []
                out.append((own.NAME, own.verdict(data), drawn))
    return out
