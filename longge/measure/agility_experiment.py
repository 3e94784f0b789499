"""Experiment ``agility``: a link that moves off a busy channel by itself (issue 69;
``--agile``, docs/design.md §6). Wi-Fi busy half the time is switched on over the link's
channels; the link must move out of its reach and carry again as it did, and again when the
network follows it; with it gone, nothing moves.

Each configuration on a testbed of its own (``testbed up --agile``, 2 Mbit/s, secured): ESB
and stream mode, one mobile and a cell of three (``CONFIGS``). The mobiles send numbered
1400-byte UDP datagrams to the base at OFFER_SHARE of the mode's bound (shared among them;
``udp_count.py``), a receiver in ``lg-base`` counts what arrives each 0.25 s. Phases of
``--time`` seconds (PHASE_S; ``--quick``: QUICK_PHASE_S), after WARM_S of the clean band:

    clean    no Wi-Fi: the clean rate (its mean after SKIP_S)
    wifi     ``air set --interferer wifi:13:0.5`` (nRF 61..83: both of the link's channels)
    follow   the network moved onto the link's new channels (the Wi-Fi channel that covers
             most of them, the downlink first): the link must move again
    off      ``air set --interferer none``: nothing must move

Per switch (``wifi``, ``follow``): ``back_s`` (from the switch to the first 0.25-s slice at
which the last 0.5 s carried BACK_SHARE of the clean rate, the rate holding a second more),
``outage_s`` (slices below half the clean rate), ``share`` (the phase's goodput over the
clean rate), and the moves the base made and why (its status). Verdict: each switch back
within TARGET_S (a cell: CELL_TARGET_S) and at SHARE_TARGET or more over its phase; no move
in ``clean`` and ``off``. summary.json (``agility.json``), CSV, plot.
"""

from __future__ import annotations

import math
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from longge import testbed
from longge.air import control, wire
from longge.daemon.status import DaemonClient
from longge.errors import ConfigError, LongGeError
from longge.measure.experiment_report import save_figure
from longge.measure.experiments import write_rows
from longge.measure.results import ResultsDir
from longge.measure.udp_count import SLICE_S, bound_bps, counted_load
from longge.radio.options import RadioOptions
from longge.testbed_spec import node_socket

NAME = "agility"
QUESTION = (
    "When Wi-Fi takes the link's channels, does the link move by itself and carry again "
    "within 2 s, and again when the network follows it?"
)
#: (label, mode, mobiles)
CONFIGS = (("esb", "esb", 1), ("stream", "stream", 1), ("esb-cell", "esb", 3),
           ("stream-cell", "stream", 3))  # fmt: skip
PHASES = ("clean", "wifi", "follow", "off")
PHASE_S, QUICK_PHASE_S = 30, 10
WARM_S = 6.0  # (the band read once over before Wi-Fi comes: a sweep takes about a second)
SKIP_S = 1.0
OFFER_SHARE = 0.8
DUTY = 0.5
WIFI_OVER_THE_LINK = 13  # (nRF 61..83: the default channels 76 and 81)
BACK_SHARE = 0.9
HOLD_S = 1.0
TARGET_S, CELL_TARGET_S = 2.0, 3.0
SHARE_TARGET = 0.85


def check_values(values: str) -> tuple[str, ...]:
    """experiment agility --values: some of its configurations."""
    names = [c[0] for c in CONFIGS]
    chosen = tuple(dict.fromkeys(t.strip() for t in values.split(",")))
    if not chosen or not set(chosen) <= set(names):
        raise ConfigError("--values", values, f"configurations of {NAME}: {', '.join(names)}")
    return chosen


def wifi_covering(channels: tuple[int, int]) -> int:
    """The Wi-Fi channel (1..13) whose 22 MHz cover most of the link's (uplink, downlink),
    the downlink first, then the nearest centre."""

    def covered(n: int) -> tuple[int, int, float]:
        centre = wire.wifi_centre(n)
        on = [abs(c - centre) <= 11 for c in channels]
        return (sum(on), on[1], -min(abs(c - centre) for c in channels))

    return max(range(1, 14), key=covered)


def _channels() -> dict[str, Any]:
    """The base's view of the link's channels (its RX process's ``channels``), {} if none."""
    try:
        raw = DaemonClient(str(node_socket("base")), timeout=2).status().raw
    except (OSError, LongGeError):
        return {}
    got = raw.get("rx", {}).get("channels")
    return got if isinstance(got, dict) else {}


def run_config(label: str, mode: str, mobiles: int, phase_s: float) -> list[dict[str, Any]]:
    """One configuration's phases on a testbed of its own: a row per phase."""
    opts = RadioOptions(mode=mode, agile=True)
    spec = testbed.TestbedSpec(options=opts, mobiles=mobiles)
    testbed.up(spec, owner=f"experiment {NAME}")
    air = str(testbed.paths()["air"])
    total = WARM_S + len(PHASES) * phase_s + 5
    bounds: list[tuple[str, float, float, dict[str, Any], dict[str, Any]]] = []
    rate = OFFER_SHARE * bound_bps(mode) / mobiles
    try:
        with counted_load(spec.mobile_names, rate, total) as meter:
            time.sleep(WARM_S)
            for phase in PHASES:
                before = _channels()
                if phase == "wifi":
                    control.apply(air, {}, interferer=f"wifi:{WIFI_OVER_THE_LINK}:{DUTY}")
                elif phase == "follow":
                    now = (int(before.get("uplink", 76)), int(before.get("downlink", 81)))
                    control.apply(air, {}, interferer=f"wifi:{wifi_covering(now)}:{DUTY}")
                elif phase == "off":
                    control.apply(air, {}, interferer="none")
                t0 = time.monotonic()
                time.sleep(phase_s)
                t1 = time.monotonic()
                bounds.append((phase, t0, t1, before, _channels()))
    finally:
        testbed.down()
    return rows_of(label, mode, mobiles, bounds, meter.slices)


def _decisions(
    before: dict[str, Any], after: dict[str, Any], t0: float, t1: float, moves: bool = True
) -> list[str]:
    """The base's decisions in the phase (its ``recent``: [number, seconds ago, what]; its
    moves, or all), each with the second of the phase it came at (from the status asked at
    the phase's end, ``t1``)."""
    first = int(before.get("recent", [[0]])[-1][0]) if before.get("recent") else 0
    return [
        f"{what} (at {t1 - ago - t0:.2f} s)"
        for n, ago, what in after.get("recent") or []
        if int(n) > first and (str(what).startswith("move") or not moves)
    ]


def rows_of(
    label: str,
    mode: str,
    mobiles: int,
    bounds: list[tuple[str, float, float, dict[str, Any], dict[str, Any]]],
    slices: list[list[float]],
) -> list[dict[str, Any]]:
    """A row per phase from what the receiver counted (pure: tested on made-up slices)."""
    clean = math.nan
    rows: list[dict[str, Any]] = []
    for phase, t0, t1, before, after in bounds:
        inside = [s for s in slices if t0 < s[0] <= t1]
        counted = [s for s in inside if s[0] > t0 + SKIP_S]
        span = max(1e-9, t1 - t0 - SKIP_S)
        steady = 8 * sum(s[1] for s in counted) / span if counted else math.nan
        whole = 8 * sum(s[1] for s in inside) / max(1e-9, t1 - t0) if inside else math.nan
        if phase == "clean":
            clean = steady
        row: dict[str, Any] = {
            "config": label,
            "mode": mode,
            "mobiles": mobiles,
            "phase": phase,
            "goodput_bps": whole,
            "share": whole / clean if clean == clean and clean > 0 else math.nan,
            "moves": len(_decisions(before, after, t0, t1)),
            "why": "; ".join(_decisions(before, after, t0, t1)),
            "decisions": "; ".join(_decisions(before, after, t0, t1, moves=False)),
            "uplink": after.get("uplink"),
            "downlink": after.get("downlink"),
            "unconfirmed": _grew(before, after, "unconfirmed"),
            "seconds": round(t1 - t0, 2),
        }
        if phase in ("wifi", "follow"):
            row.update(_switch(inside, t0, clean))
        rows.append(row)
    return rows


def _grew(before: dict[str, Any], after: dict[str, Any], key: str) -> int | None:
    """How much the base's count ``key`` grew in the phase (None: not in its status)."""
    if not isinstance(after.get(key), int) or not isinstance(before.get(key), int):
        return None
    return int(after[key]) - int(before[key])


def _switch(inside: list[list[float]], t0: float, clean: float) -> dict[str, Any]:
    """back_s and outage_s of a switch at ``t0`` (slices of SLICE_S: [t, bytes, ...])."""
    if clean != clean or clean <= 0:
        return {"back_s": None, "outage_s": None}
    per = max(1, round(0.5 / SLICE_S))
    hold = max(1, round(HOLD_S / SLICE_S))
    rates = [8 * s[1] / SLICE_S for s in inside]
    back = None
    for i in range(per - 1, len(rates) - hold):
        last = sum(rates[i - per + 1 : i + 1]) / per
        after = sum(rates[i + 1 : i + 1 + hold]) / hold
        if last >= BACK_SHARE * clean and after >= BACK_SHARE * clean:
            back = round(inside[i][0] - t0, 2)
            break
    outage = SLICE_S * sum(r < 0.5 * clean for r in rates)
    return {"back_s": back, "outage_s": round(outage, 2)}


def run(
    quick: bool,
    out: ResultsDir,
    say: Callable[[str], None],
    progress: Callable[[str, float], None],
    values: str | None = None,
    seconds: int | None = None,
) -> dict[str, Any]:
    """Each configuration on a testbed of its own; the summary, CSV and plot in ``out``."""
    chosen = check_values(values) if values is not None else tuple(c[0] for c in CONFIGS)
    phase_s = float(seconds or (QUICK_PHASE_S if quick else PHASE_S))
    rows: list[dict[str, Any]] = []
    configs = [c for c in CONFIGS if c[0] in chosen]
    for k, (label, mode, mobiles) in enumerate(configs):
        progress(f"{NAME}: {label}", k / len(configs))
        say(f"{NAME}: {label}: {', '.join(PHASES)}, {phase_s:g} s each")
        rows += run_config(label, mode, mobiles, phase_s)
    progress(f"{NAME}: done", 1.0)
    summary: dict[str, Any] = {
        "kind": "experiment",
        "experiment": {"name": NAME, "question": QUESTION, "configs": list(chosen)},
        "quick": quick,
        "phase_s": phase_s,
        "offered_share": OFFER_SHARE,
        "duty": DUTY,
        "targets": {
            "back_s": TARGET_S,
            "cell_back_s": CELL_TARGET_S,
            "share": SHARE_TARGET,
            "back_share": BACK_SHARE,
        },
        "bound_bps": {"udp_1400": bound_bps("esb"), "udp_1400_stream": bound_bps("stream")},
        "rows": rows,
    }
    summary["verdict"] = verdict(summary)
    write_rows(out.path / f"{NAME}.csv", rows)
    out.write_summary(summary, f"{NAME}.json")
    plot(summary, out.path)
    return summary


def verdict(summary: dict[str, Any]) -> str:
    """Per configuration: each switch's time back and share, moves where none belong."""
    t = summary.get("targets", {})
    parts = []
    for label, _, mobiles in CONFIGS:
        rows = {r["phase"]: r for r in summary["rows"] if r["config"] == label}
        if not rows:
            continue
        target = t.get("cell_back_s", CELL_TARGET_S) if mobiles > 1 else t.get("back_s", TARGET_S)
        said, ok = [], True
        for phase in ("wifi", "follow"):
            r = rows.get(phase)
            if r is None:
                continue
            back, share = r.get("back_s"), r.get("share", math.nan)
            good = back is not None and back <= target and share >= t.get("share", SHARE_TARGET)
            ok &= good
            shown = "never" if back is None else f"{back:.2f} s"
            said.append(f"{phase} back {shown}, {share:.2f} of clean ({r['moves']} moves)")
        stray = sum(rows[p]["moves"] for p in ("clean", "off") if p in rows)
        ok &= stray == 0
        if stray:
            said.append(f"{stray} moves with no Wi-Fi")
        parts.append(f"{label}: {'kept' if ok else 'MISSED'} ({'; '.join(said)})")
    return "; ".join(parts) or "nothing measured"


def plot(summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.4))
    labels = [c[0] for c in CONFIGS if any(r["config"] == c[0] for r in summary["rows"])]
    width = 0.8 / len(PHASES)
    for k, phase in enumerate(PHASES):
        got = {r["config"]: r["share"] for r in summary["rows"] if r["phase"] == phase}
        xs = [i + (k - (len(PHASES) - 1) / 2) * width for i, c in enumerate(labels) if c in got]
        ax.bar(xs, [got[c] for c in labels if c in got], width, label=phase)
    ax.axhline(summary.get("targets", {}).get("share", SHARE_TARGET), color="k", ls="--", lw=1)
    ax.set_xticks(range(len(labels)), labels)
    ax.set(ylabel="goodput / the clean phase's", ylim=(0, 1.15))
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.suptitle(textwrap.fill(summary.get("verdict", QUESTION), 150), fontsize=9)
    fig.tight_layout()
    return save_figure(fig, out, NAME)
