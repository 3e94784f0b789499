"""tune's plots, drawn from a saved summary (run time and `./run.sh plot DIR` call the same
functions): heatmaps of the ARD x ARC grid, and the load curves of the best and the worst
setting (and of stream mode, after --vs-stream) over the model's."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from longge.measure.tune import mode_capacity, model_rtt_ms
from longge.radio.options import RadioOptions


def curve_of(row: dict[str, Any]) -> dict[str, Any]:
    """A grid row's load curve (stored as JSON text in grid.csv)."""
    c = row.get("curve")
    if isinstance(c, dict):
        return c
    try:
        parsed = json.loads(c) if isinstance(c, str) and c else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def best_and_worst(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The recommended setting and the one with the lowest capacity (if they differ)."""
    rows = [r for r in summary["grid"] if not r.get("error")]
    if not rows:
        return []
    best = summary.get("recommendation") or max(rows, key=lambda r: r["capacity_bps"])
    worst = min(rows, key=lambda r: r["capacity_bps"])
    out = [("recommended", best)]
    if (worst["ard_us"], worst["arc"]) != (best["ard_us"], best["arc"]):
        out.append(("lowest capacity", worst))
    return out


def plot_tune_curves(summary: dict[str, Any], base: RadioOptions, out: Path) -> list[Path]:
    """Load curves of the best and the worst setting, measured (points) over the model
    (lines): received vs offered, and probe RTT (median, p95) vs ρ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    idle = float(summary.get("idle_rtt_ms", math.nan))
    top = 0.0
    shown = best_and_worst(summary)
    stream = summary.get("stream")
    if stream and not stream.get("error"):
        shown.append(("stream mode", stream))
    for (label, row), colour in zip(shown, ("tab:green", "tab:red", "tab:blue"), strict=False):
        q = float(row["q_measured"])
        if row.get("mode") == "stream":
            opts = replace(base, mode="stream")
            name = f"stream mode, LongGe's ARQ (q {q:.3f})"
        else:
            opts = replace(base, ard_us=int(row["ard_us"]), arc=int(row["arc"]))
            name = f"{label}: ARD {int(row['ard_us'])} µs, ARC {int(row['arc'])} (q {q:.3f})"
        curve = curve_of(row)
        load = curve.get("load", [])
        xs = [o / 1e3 for o, _ in load]
        ax1.plot(xs, [r / 1e3 for _, r in load], "o", color=colour, label=f"{name}, measured")
        overhead = int(summary.get("security_overhead") or 0)
        model_c = mode_capacity(opts, q, overhead)
        top = max([top, *xs, model_c / 1e3 * 1.4])
        grid_x = [model_c / 1e3 * f / 50 for f in range(0, 71)]
        ax1.plot(
            grid_x,
            [min(x, model_c / 1e3) for x in grid_x],
            "--",
            color=colour,
            alpha=0.7,
            label=f"model C {model_c / 1e3:.0f} kbit/s",
        )
        rtt = curve.get("rtt", [])
        # the idle RTT was measured in the link's own mode: not stream mode's starting point
        at_idle = [] if row.get("mode") == "stream" else [idle]
        rhos = [0.0][: len(at_idle)] + [lv[0] for lv in rtt]
        ax2.plot(rhos, at_idle + [lv[1] for lv in rtt], "o-", color=colour, label=f"{name}, median")
        ax2.plot(rhos, at_idle + [lv[2] for lv in rtt], "s:", color=colour, alpha=0.8, label="p95")
        fine = [i / 100 for i in range(0, 101)]
        ax2.plot(
            fine,
            [model_rtt_ms(opts, q, r, idle, base, overhead=overhead) for r in fine],
            "--",
            color=colour,
            alpha=0.5,
            label="model p95 (probe waits for the datagram in service)",
        )
    if top:
        ax1.plot([0, top], [0, top], color="grey", lw=0.8, label="received = offered")
    ax1.set(xlabel="offered (kbit/s)", ylabel="received (kbit/s)", title="throughput")
    ax2.axhline(idle, color="grey", lw=0.8, label=f"idle RTT {idle:.1f} ms")
    ax2.set(xlabel="ρ = offered / measured capacity", ylabel="probe RTT (ms)", title="latency")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
        "retry settings: best vs worst"
        + (" vs stream mode" if len(shown) > 2 or (shown and shown[-1][0] == "stream mode") else "")
        + " (points measured, dashed lines model)"
    )
    paths = [out / "tune_curves.png", out / "tune_curves.svg"]
    for p in paths:
        fig.savefig(p, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return paths


def plot_tune(summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in summary["grid"] if not r.get("error")]
    if not rows:
        return []  # no point measured: nothing to draw (the report says why)
    ards = sorted({int(r["ard_us"]) for r in rows})
    arcs = sorted({int(r["arc"]) for r in rows})
    panels = [
        ("capacity_bps", "capacity (kbit/s)", 1e-3),
        ("rtt_p95_09_ms", "RTT p95 at ρ 0.9 (ms)", 1),
        ("loss_09", "datagram loss at ρ 0.9 (%)", 100),
    ]
    if any(isinstance(r.get("loss_floor"), int | float) for r in rows):
        panels.append(("loss_floor", "loss floor p0: lost at every load (%)", 100))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2))
    for ax, (key, title, scale) in zip(axes, panels, strict=True):
        grid = [[math.nan] * len(ards) for _ in arcs]
        for r in rows:
            v = r.get(key)
            cell = float(v) * scale if isinstance(v, int | float) else math.nan
            grid[arcs.index(int(r["arc"]))][ards.index(int(r["ard_us"]))] = cell
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
