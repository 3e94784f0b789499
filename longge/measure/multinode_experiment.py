"""Experiment ``multinode``: a base with N = 1..5 mobiles (issue 41), each loaded with more
than its share at once (stock iperf3, 1400-byte UDP datagrams, ``multinode.load_all``), down
then up; per N and direction: the aggregate the receivers' TUN counters saw in the trials'
middle as a share of one link's bound, each mobile's rate and Jain's index over them, and
the RTT p95 of a ping from the base to every loaded mobile meanwhile (5 a second).

Both link modes; each mode and N brings up its own testbed (``testbed up --mobiles N --mode
M``: 2 Mbit/s, secured) and takes it down. Each mode's aggregate is a share of its own
bound (one link's). The verdict and the plot come from the saved summary (``plot``), as the
battery's do.
"""

from __future__ import annotations

import math
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from longge import testbed
from longge.errors import ConfigError
from longge.measure import analysis
from longge.measure.experiment_report import save_figure
from longge.measure.experiments import write_rows
from longge.measure.model import udp_goodput_bps
from longge.measure.multinode import DATAGRAM, load_all, ping_rtts
from longge.measure.results import ResultsDir
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions
from longge.testbed_spec import MAX_TESTBED_MOBILES

NAME = "multinode"
QUESTION = (
    "How much do N mobiles on one base carry in all, how fairly is it shared, and what RTT "
    "does each see (ESB and stream mode)?"
)
MOBILES = (1, 2, 3, 4, 5)
QUICK_MOBILES = (1, 3, 5)
#: each mobile offers this much of one link's bound over N: every one more than its share
OVERSHARE = 1.3
PING_EVERY_S = 0.2
MODES = ("esb", "stream")
#: the testbeds' radios it can run on (experiment --backend): the sim's, the real pyrf24 on
#: emulated chips, or native USB modems (every node's, the one link's base too)
BACKENDS = ("sim", "rf24", "serial")


def bound_bps(mode: str = "esb") -> float:
    """One link's bound in ``mode``: 1400-byte UDP datagrams, secured (model.py)."""
    return udp_goodput_bps(RadioOptions(mode=mode), DATAGRAM, OVERHEAD)


def trial(
    mobiles: int, direction: str, seconds: int, bound: float, mode: str = "esb"
) -> dict[str, Any]:
    """One direction on the running testbed: every mobile loaded at once, each pinged from
    the base meanwhile."""
    rate = f"{round(OVERSHARE * bound / mobiles / 1000)}k"
    count = max(1, int((seconds - 3) / PING_EVERY_S))
    with ThreadPoolExecutor(mobiles + 1) as pool:
        load = pool.submit(load_all, direction, mobiles, rate, seconds)
        pings = [pool.submit(_ping_later, testbed.mobile_ip(i), count) for i in range(mobiles)]
        shares = load.result()
        rtts = [p.result() for p in pings]
    p95 = [analysis.percentile([r for r in got if r is not None], 0.95) for got in rtts]
    steady = shares.steady_total
    return {
        "mode": mode,
        "mobiles": mobiles,
        "direction": direction,
        "offered_each_bps": OVERSHARE * bound / mobiles,
        "aggregate_bps": None if steady is None else steady * 1000,
        "aggregate_ratio": None if steady is None else steady * 1000 / bound,
        "receivers_sum_bps": shares.total * 1000,
        "per_mobile_bps": [k * 1000 for k in shares.kbps],
        "jain": shares.jain,  # (over the mobiles measured: a failed client's 0 is not)
        "rtt_p95_ms": p95,  # (NaN: no answer)
        "rtt_p95_max_ms": max((v for v in p95 if v == v), default=math.nan),
        "probes_lost": sum(r is None for got in rtts for r in got),
        "probes_sent": sum(len(got) for got in rtts),
        "error": "; ".join(f"mobile{i + 1}: {e}" for i, e in enumerate(shares.errors) if e),
    }


def _ping_later(address: str, count: int) -> list[float | None]:
    time.sleep(2.0)  # (the clients' control connections, the queues filling)
    return ping_rtts("lg-base", address, count, PING_EVERY_S)


def check_values(values: str) -> tuple[int, ...]:
    """experiment multinode --values: numbers of mobiles, 1..MAX_TESTBED_MOBILES."""
    try:
        ns = tuple(dict.fromkeys(int(t) for t in values.split(",")))
    except ValueError:
        ns = ()
    if not ns or not all(1 <= n <= MAX_TESTBED_MOBILES for n in ns):
        raise ConfigError(
            "--values", values, f"numbers of mobiles 1..{MAX_TESTBED_MOBILES}, e.g. 1,3"
        )
    return ns


def run(
    quick: bool,
    out: ResultsDir,
    say: Callable[[str], None],
    progress: Callable[[str, float], None],
    values: str | None = None,
    seconds: int | None = None,
    backend: str = "sim",
) -> dict[str, Any]:
    """Every N of the experiment, each on its own testbed; the summary, CSV and plot in
    ``out``. ``values``: only these N (experiment --values, text with commas); ``seconds``:
    each direction's trial (--time); ``backend``: the testbeds' radios (BACKENDS)."""
    ns: tuple[int, ...] = QUICK_MOBILES if quick else MOBILES
    if values is not None:
        ns = check_values(values)
    seconds = seconds or (6 if quick else 10)
    bounds = {mode: bound_bps(mode) for mode in MODES}
    rows: list[dict[str, Any]] = []
    steps = [(mode, n) for mode in MODES for n in ns]
    for k, (mode, n) in enumerate(steps):
        say(f"{NAME}: {mode}, {n} mobile(s): bringing up the testbed")
        spec = testbed.TestbedSpec(
            options=RadioOptions(mode=mode),
            mobiles=n,
            rf24=backend == "rf24",
            serial=backend == "serial",
            serial_base=backend == "serial",
        )
        testbed.up(spec, owner=f"experiment {NAME}")
        try:
            for j, direction in enumerate(("down", "up")):
                what = f"{NAME}: {mode}, {n} mobile(s), {direction}"
                progress(what, (2 * k + j) / (2 * len(steps)))
                rows.append(trial(n, direction, seconds, bounds[mode], mode))
        finally:
            testbed.down()
    progress(f"{NAME}: done", 1.0)
    summary: dict[str, Any] = {
        "kind": "experiment",
        "experiment": {"name": NAME, "question": QUESTION, "mobiles": list(ns)},
        "quick": quick,
        "backend": backend,
        "trial_s": seconds,
        "rows": rows,
        "bound_bps": {"udp_1400": bounds["esb"], "udp_1400_stream": bounds["stream"]},
    }
    summary["verdict"] = verdict(summary)
    write_rows(out.path / f"{NAME}.csv", rows)
    out.write_summary(summary, f"{NAME}.json")
    plot(summary, out.path)
    return summary


def verdict(summary: dict[str, Any]) -> str:
    """Per mode and direction: the aggregate at the most mobiles over one mobile's, the
    lowest Jain's index, the highest RTT p95."""
    parts = []
    for mode in MODES:
        for direction in ("down", "up"):
            rows = [
                r
                for r in summary["rows"]
                if r["direction"] == direction and r.get("mode", "esb") == mode
            ]
            if not rows:
                continue
            got = {r["mobiles"]: r["aggregate_ratio"] for r in rows if r["aggregate_ratio"]}
            if not got:
                parts.append(f"{mode} {direction}: no aggregate measured")
                continue
            top = max(got)
            one = got.get(1)
            rel = f" ({got[top] / one:.2f} of one mobile's)" if one and top != 1 else ""
            jains = [r["jain"] for r in rows if r["jain"] == r["jain"]]
            p95 = [r["rtt_p95_max_ms"] for r in rows if r["rtt_p95_max_ms"] == r["rtt_p95_max_ms"]]
            parts.append(
                f"{mode} {direction}: {top} mobiles carry {got[top]:.3f} of one link's bound"
                f"{rel}, Jain >= {min(jains, default=math.nan):.3f}, ping p95 <= "
                f"{max(p95, default=math.nan):.0f} ms"
            )
    return "; ".join(parts)


def plot(summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    for mode, color in zip(MODES, ("C0", "C1"), strict=True):
        for direction, style in (("down", "o-"), ("up", "s--")):
            rows = sorted(
                (
                    r
                    for r in summary["rows"]
                    if r["direction"] == direction and r.get("mode", "esb") == mode
                ),
                key=lambda r: r["mobiles"],
            )
            if not rows:
                continue
            xs = [r["mobiles"] for r in rows]
            how = {"color": color, "label": f"{mode} {direction}"}
            axes[0].plot(xs, [r["aggregate_ratio"] or math.nan for r in rows], style, **how)
            axes[1].plot(xs, [r["jain"] for r in rows], style, **how)
            axes[2].plot(xs, [r["rtt_p95_max_ms"] for r in rows], style, **how)
    for ax, label in zip(
        axes,
        (
            "aggregate / one link's bound (its mode's)",
            "Jain's index over the mobiles",
            "ping p95 from the base (ms, worst mobile)",
        ),
        strict=True,
    ):
        ax.set(xlabel="mobiles on the base", ylabel=label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylim(0, 1.1)
    axes[1].set_ylim(0, 1.05)
    axes[2].set_ylim(bottom=0)
    fig.suptitle(textwrap.fill(summary.get("verdict", QUESTION), 150), fontsize=9)
    fig.tight_layout()
    return save_figure(fig, out, NAME)
