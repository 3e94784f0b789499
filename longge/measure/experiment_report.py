"""The experiment battery's verdicts and plots, computed from a saved summary (the rows and
bounds an experiment wrote), never from memory: run time and `./run.sh plot DIR` call the
same functions (docs/results.md)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longge.measure.experiment_plans import Experiment

# -- verdicts ---------------------------------------------------------------------------------


def _by_series(
    rows: Sequence[dict[str, Any]], key: str = "received_bps"
) -> dict[str, dict[Any, float]]:
    out: dict[str, dict[Any, float]] = {}
    for r in rows:
        if not r.get("error") and r.get(key) is not None and r[key] == r[key]:
            out.setdefault(r["series"], {})[r["x"]] = float(r[key])
    return out


def verdict(exp: Experiment, summary: dict[str, Any]) -> str:
    """The experiment's one sentence, from the points the machine did not spoil (a point still
    disturbed after its repeat is kept in the rows and the plot, and said, not judged)."""
    counted = [r for r in summary["rows"] if not r.get("disturbed")]
    text = _verdict(exp, {**summary, "rows": counted})
    left_out = len(summary["rows"]) - len(counted)
    if left_out:
        text += f" ({left_out} of {len(summary['rows'])} points not counted: disturbed)"
    return text


def _verdict(exp: Experiment, summary: dict[str, Any]) -> str:
    rows = summary["rows"]
    s = _by_series(rows)
    kb = 1e3
    try:
        if exp.name == "tcp-vs-udp":
            d = s["default"]
            bound = summary["bound_bps"]["udp_1400"]
            return (
                f"TCP gets {d['tcp'] / kb:.0f} kbit/s = {d['tcp'] / d['udp']:.2f}x UDP's "
                f"{d['udp'] / kb:.0f} kbit/s (frame-level bound for 1400-byte datagrams: "
                f"{bound / kb:.0f})"
            )
        if exp.name == "loss":
            worst = max(exp.quick_values if summary["quick"] else exp.values)
            model = {
                (r["series"], r["x"]): r["model_goodput_bps"]
                for r in rows
                if r.get("model_goodput_bps")
            }

            def kept(label: str, v: dict[Any, float]) -> str:
                """Its share, and the lossy model's (UDP) beside it."""
                m0, m = model.get((label, 0.0)), model.get((label, worst))
                return f"{label}: {v[worst] / v[0.0]:.0%}" + (
                    f" (the lossy model: {m / m0:.0%})" if m and m0 else ""
                )

            parts = [kept(label, v) for label, v in s.items() if 0.0 in v and worst in v and v[0.0]]
            if not parts:
                raise ValueError("no series with both ends of the loss range")
            return f"at {worst:.0%} frame error, share of loss-free goodput kept: " + "; ".join(
                parts
            )
        if exp.name == "window":
            d = s["default"]
            top = max(d.values())
            if not top > 0:
                raise ValueError("no goodput at any buffer size")
            enough = min(x for x, v in d.items() if v >= 0.9 * top)
            r = {
                x: v
                for x, v in _by_series(rows, "rtt_median_ms")["default"].items()
                if math.isfinite(v)
            }
            if len(r) < 2:
                raise ValueError("an RTT at fewer than two buffer sizes")
            return (
                f"goodput reaches 90 % of its best ({top / kb:.0f} kbit/s) from a {enough}-byte "
                f"buffer; RTT {r[min(r)]:.0f} ms at {min(r)} bytes, {r[max(r)]:.0f} ms at "
                f"{max(r)} bytes ("
                + (
                    "a bigger window only fills the queue)"
                    if r[max(r)] > 1.5 * r[min(r)]
                    else "the fair queue keeps the ping's RTT flat)"
                )
            )
        if exp.name == "parallel":
            j = _by_series(rows, "jain")["default"]
            d = s["default"]
            return "; ".join(
                f"{n} flows: {d[n] / kb:.0f} kbit/s, Jain {j[n]:.3f}" for n in sorted(j)
            )
        if exp.name == "multiplex":  # the ping in ESB ("default") first, then what else ran
            medians, p95s = _by_series(rows, "rtt_median_ms"), _by_series(rows, "rtt_p95_ms")
            if "default" not in medians:
                raise KeyError("default")  # (no verdict without the ping in ESB)
            # (the grid's series: those that say which way the bulk flows go)
            grid = {
                s.label: s.conditions["mode"] for s in exp.series if "direction" in s.conditions
            }
            pings = {k: r for k, r in medians.items() if k not in grid}
            return (
                "RTT median (p95): "
                + "; ".join(
                    ("" if label == "default" else f"{label}: ")
                    + ", ".join(
                        f"{n} bulk flows {r[n]:.0f} ({p95s[label][n]:.0f}) ms" for n in sorted(r)
                    )
                    for label, r in sorted(pings.items(), key=lambda kv: kv[0] != "default")
                )
                + _grid_verdict(grid, medians, p95s)
            )
        if exp.name == "cc":
            worst = max(exp.quick_values if summary["quick"] else exp.values)
            parts = []
            for delay in ("", ", +50 ms"):
                reno = s.get(f"reno{delay}", {}).get(worst)
                for cc in ("cubic", "bbr"):
                    v = s.get(f"{cc}{delay}", {}).get(worst)
                    if reno and v is not None:
                        parts.append(
                            f"{cc.upper() if cc == 'bbr' else 'CUBIC'}{delay} {v / reno:.2f}x Reno"
                        )
            if not parts:
                raise ValueError("no Reno point to compare with")
            return f"at {worst:.0%} frame error: " + "; ".join(parts)
        if exp.name == "mode":
            return _mode_verdict(s, _by_series(rows, "rtt_median_ms"), summary)
    except (KeyError, ValueError, ZeroDivisionError) as exc:
        return f"not enough points for a verdict ({type(exc).__name__}: {exc})"
    return ""


def _grid_verdict(
    grid: dict[str, str],
    medians: dict[str, dict[Any, float]],
    p95s: dict[str, dict[Any, float]],
) -> str:
    """multiplex's interactive grid (``grid``: its series' labels, each with its mode), each
    mode: the most its flows' RTT rose beside the most bulk flows run, over their idle
    figures (0 bulk flows), median and p95, and where."""
    parts = []
    for mode in ("esb", "stream"):
        rises: list[tuple[float, float, str]] = []
        most = 0
        for label, r in medians.items():
            if grid.get(label) != mode or 0 not in r:
                continue
            n = max(r)
            p = p95s.get(label, {})
            if n == 0 or 0 not in p or n not in p:
                continue
            most = max(most, n)
            rises.append((r[n] - r[0], p[n] - p[0], label.removesuffix(f", {mode}")))
        if rises:
            med, p95 = max(rises), max(rises, key=lambda t: t[1])
            parts.append(
                f"{mode}: {len(rises)} flows beside up to {most} bulk, their RTT rose at most "
                f"{med[0]:+.1f} ms in the median ({med[2]}), {p95[1]:+.1f} ms at p95 ({p95[2]})"
            )
    return "; interactive grid over idle: " + "; ".join(parts) if parts else ""


def _mode_verdict(
    s: dict[str, dict[Any, float]], rtt: dict[str, dict[Any, float]], summary: dict[str, Any]
) -> str:
    """ESB against stream: goodput and RTT under load without loss, what each keeps at the
    worst loss, and where (if anywhere) ESB carries more."""
    parts = []
    for proto in ("UDP", "TCP"):
        esb, stream = s[f"{proto}, esb"], s[f"{proto}, stream"]
        worst = max(set(esb) & set(stream))
        r_esb, r_stream = rtt[f"{proto}, esb"], rtt[f"{proto}, stream"]
        esb_wins = sorted(x for x in set(esb) & set(stream) if esb[x] > stream[x])
        parts.append(
            f"{proto}: stream {stream[0.0] / 1e3:.0f} kbit/s = {stream[0.0] / esb[0.0]:.2f}x "
            f"ESB's {esb[0.0] / 1e3:.0f}, RTT under load {r_stream[0.0]:.0f} vs "
            f"{r_esb[0.0]:.0f} ms; at {worst:.0%} frame error stream keeps "
            f"{stream[worst] / stream[0.0]:.0%}, ESB {esb[worst] / esb[0.0]:.0%}; "
            + (
                "stream carries more at every loss rate"
                if not esb_wins
                else "ESB carries more at " + ", ".join(f"{x:.0%}" for x in esb_wins)
            )
        )
    bounds = summary["bound_bps"]
    return (
        "; ".join(parts)
        + f" (bounds for 1400-byte UDP: stream {bounds['udp_1400_stream'] / 1e3:.0f}, ESB "
        f"{bounds['udp_1400_esb'] / 1e3:.0f} kbit/s)"
    )


# -- plots ------------------------------------------------------------------------------------


def plot(exp: Experiment, summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    second = {
        "goodput+ping": ("rtt_median_ms", "RTT median (ms)"),
        "flows": ("jain", "Jain's fairness index"),
        "ping": ("rtt_median_ms", "RTT median (ms)"),
    }.get(exp.measure)
    fig, axes = plt.subplots(
        1, 2 if second else 1, figsize=(13 if second else 7.5, 4.4), squeeze=False
    )
    ax = axes[0][0]
    kb = 1e3
    if exp.vary == "protocol":
        d = _by_series(rows).get("default", {})
        xs = [x for x in exp.values if x in d]
        ax.bar(xs, [d[x] / kb for x in xs], color=["tab:blue", "tab:orange"][: len(xs)])
        ax.axhline(
            summary["bound_bps"]["udp_1400"] / kb,
            color="grey",
            ls="--",
            label="frame-level bound, 1400-byte UDP",
        )
        ax.legend(fontsize=8)
    else:
        for label, d in _by_series(rows).items():
            xs = sorted(d)
            ax.plot(xs, [d[x] / kb for x in xs], "o-", label=label)
        if exp.log_x:
            ax.set_xscale("log", base=2)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    ax.set(
        xlabel=exp.xlabel,
        ylabel="goodput received (kbit/s)",
        title=textwrap.fill(exp.question, 70 if second else 90),
    )
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    if second:
        key, label = second
        ax2 = axes[0][1]
        for name, d in _by_series(rows, key).items():
            xs = sorted(d)
            ax2.plot(xs, [d[x] for x in xs], "s-", label=name)
            if key == "rtt_median_ms":
                p = _by_series(rows, "rtt_p95_ms").get(name, {})
                ax2.plot(sorted(p), [p[x] for x in sorted(p)], "x:", alpha=0.7, label=f"{name} p95")
        if exp.log_x:
            ax2.set_xscale("log", base=2)
        if key == "jain":
            ax2.set_ylim(0, 1.05)
        ax2.set(xlabel=exp.xlabel, ylabel=label)
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=7)
    ax.set_ylim(bottom=0)
    fig.suptitle(
        textwrap.fill(summary.get("verdict", ""), 160 if second else 100),
        fontsize=8,
        y=0.01,
        va="bottom",
    )
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    return save_figure(fig, out, exp.name)


def save_figure(fig: Any, out: Path, name: str) -> list[Path]:
    """An experiment's figure as ``name``.png and .svg in ``out`` (then closed)."""
    import matplotlib.pyplot as plt

    paths = [out / f"{name}.png", out / f"{name}.svg"]
    for path in paths:
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return paths
