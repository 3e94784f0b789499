"""Experiment ``hostile``: what a stranger's radio beside the link costs it (issue 67). The
attacker (``hostile_radio.py``) hears everything on the air and has no key; the promise is
that it costs the link no more than the air it takes, and that nothing it sends reaches the
far side.

Per link mode a testbed of its own (``testbed up --mode M``: 2 Mbit/s, secured). The mobile
sends numbered 1400-byte UDP datagrams to the base at 1.1 times the mode's bound (the link
saturated: what an attack costs shows whole), a receiver in ``lg-base`` counts what arrives
each 0.25 s: the bytes of the genuine datagrams, datagrams that came again (replays) and
datagrams not as sent (damaged, forged). Then ``cell``: a stream-mode base of three mobiles
whose third is gone (its daemon ended), the other two sending half that each, for
``absent``. Phases of ``--time`` seconds (10; ``--quick``: 5): none, then each attack followed
by none again; an attack's goodput is judged against the mean of the none phases around it
(the same run's). Before ``replay`` the mobile's daemon is restarted (after the packets were
recorded), so that what is replayed is of an old epoch.

Verdict per attack: kept when its goodput is at least ``TARGET`` of the none phases' and
nothing came that should not have; ``jam`` (a reactive jammer, out of scope) is measured and
not judged (``kept``: null). summary.json (``hostile.json``), CSV, plot.
"""

from __future__ import annotations

import json
import math
import os
import signal
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from longge import testbed
from longge.daemon.status import DaemonClient
from longge.errors import ConfigError, LongGeError
from longge.measure.experiment_report import save_figure
from longge.measure.experiments import write_rows
from longge.measure.hostile_radio import ATTACKS, OUT_OF_SCOPE, Attacker, attacks_for
from longge.measure.results import ResultsDir
from longge.measure.udp_count import bound_bps, counted_load
from longge.radio.options import RadioOptions
from longge.testbed_spec import node_socket

NAME = "hostile"
QUESTION = (
    "What does a stranger's radio beside the link (no key; hears everything) cost it, and "
    "does anything it sends reach the far side?"
)
#: The testbeds, in turn: a link of each mode, and a stream-mode cell of three mobiles, the
#: third gone (``CELL_MOBILES``).
MODES = ("esb", "stream", "cell")
CELL_MOBILES = 3
PHASE_S, QUICK_PHASE_S = 10, 5
#: The load, a share of the mode's bound (1400-byte UDP, secured).
OFFER_SHARE = 1.1
#: An attack keeps the link when its goodput is at least this share of the none phases'.
TARGET = 0.90
PORT = 9000
#: The first part of a phase is not counted (the attack's start, the queues' new level).
SKIP_S = 1.0


def _link_mode(mode: str) -> str:
    return "stream" if mode == "cell" else mode


def check_values(values: str) -> tuple[str, ...]:
    """experiment hostile --values: some of its attacks."""
    chosen = tuple(dict.fromkeys(t.strip() for t in values.split(",")))
    if not chosen or not set(chosen) <= set(ATTACKS):
        raise ConfigError("--values", values, f"attacks of {NAME}: {', '.join(ATTACKS)}")
    return chosen


def _restart_mobile() -> None:
    """SIGTERM to the mobile's daemon (the keeper starts it again: a new sender epoch); back
    when its link is up."""
    state = json.loads(testbed.paths()["state"].read_text())
    old = int(state["pids"]["mobile"])
    os.kill(old, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            st = DaemonClient(str(node_socket("mobile")), timeout=1).status()
        except (OSError, LongGeError):
            continue
        pid = json.loads(testbed.paths()["state"].read_text())["pids"]["mobile"]
        if pid != old and st.link == "up":
            return
    raise LongGeError("the mobile's daemon did not come back within 20 s of its restart")


def _counts(mobiles: list[str]) -> dict[str, int]:
    """What the link's ends counted so far: packets the mobiles' senders gave up at their
    retry limit, first frames the base's reassembler refused (0 where a daemon does not
    answer)."""
    out = {"gave_up": 0, "refused_first": 0}
    try:
        for name in mobiles:
            mobile = DaemonClient(str(node_socket(name)), timeout=2).status().raw
            out["gave_up"] += int(mobile.get("tx", {}).get("max_rt", 0))
        base = DaemonClient(str(node_socket("base")), timeout=2).status().raw
    except (OSError, LongGeError):
        return out
    out["refused_first"] = int(base.get("rx", {}).get("drops", {}).get("refused_first", 0))
    return out


def run_mode(mode: str, attacks: list[str], phase_s: float) -> list[dict[str, Any]]:
    """One mode's phases on a testbed of its own: a row per phase."""
    opts = RadioOptions(mode=_link_mode(mode))
    cell = mode == "cell"
    spec = testbed.TestbedSpec(options=opts, mobiles=CELL_MOBILES if cell else 1)
    testbed.up(spec, owner=f"experiment {NAME}")
    # the cell's last mobile is gone; the others share the load
    names = spec.mobile_names[:-1] if cell else spec.mobile_names
    # replay first: its packets recorded in the warm-up, then the mobile restarted (a new
    # epoch), and the none phase before it after the restart too
    attacks = sorted(attacks, key=lambda a: a != "replay")
    plan = ["none"] + [p for a in attacks for p in (a, "none")]
    total = len(plan) * phase_s + 30 * ("replay" in attacks) + 10
    eve = Attacker(str(testbed.paths()["air"]), opts, mobile=CELL_MOBILES - 1 if cell else 0)
    bounds: list[tuple[str, float, float, dict[str, int], dict[str, int]]] = []
    rate = OFFER_SHARE * bound_bps(_link_mode(mode)) / len(names)
    try:
        if cell:
            testbed.take_away(spec.mobile_names[-1])
        with counted_load(names, rate, total) as meter:
            eve.start()
            try:
                time.sleep(2.0)  # (the queues full, the first ACKs heard)
                if "replay" in attacks:
                    if not eve.keep():
                        raise LongGeError("the attacker heard no whole packet to replay")
                    _restart_mobile()  # the packets kept are of an old epoch now
                    time.sleep(2.0)
                for phase in plan:
                    if eve.error is not None:
                        raise LongGeError(f"the attacker's radios: {eve.error}")
                    before, counted = dict(eve.sent), _counts(names)
                    eve.attack = None if phase == "none" else phase
                    t0 = time.monotonic()
                    time.sleep(phase_s)
                    eve.attack = None
                    t1 = time.monotonic()
                    sent = {k: v - before.get(k, 0) for k, v in eve.sent.items()}
                    counts = {k: max(0, v - counted[k]) for k, v in _counts(names).items()}
                    bounds.append((phase, t0, t1, sent, counts))
            finally:
                eve.stop()
    finally:
        testbed.down()
    slices = meter.slices
    return _rows(mode, bounds, slices)


def _rows(
    mode: str,
    bounds: list[tuple[str, float, float, dict[str, int], dict[str, int]]],
    slices: list[list[float]],
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for phase, t0, t1, sent, counts in bounds:
        inside = [s for s in slices if t0 + SKIP_S < s[0] <= t1]
        span = max(1e-9, (t1 - t0 - SKIP_S))
        rows.append(
            {
                "mode": mode,
                "phase": phase,
                "goodput_bps": 8 * sum(s[1] for s in inside) / span if inside else math.nan,
                "replayed_delivered": int(sum(s[2] for s in slices if t0 < s[0] <= t1)),
                "damaged_delivered": int(sum(s[3] for s in slices if t0 < s[0] <= t1)),
                "attack_frames": int(sum(sent.values())),
                **counts,
                "seconds": round(t1 - t0, 2),
            }
        )
    for i, r in enumerate(rows):  # each attack against the none phases around it
        if r["phase"] == "none":
            r["ratio"] = math.nan
            continue
        around = [
            rows[j]["goodput_bps"]
            for j in (i - 1, i + 1)
            if 0 <= j < len(rows) and rows[j]["phase"] == "none" and rows[j]["goodput_bps"] > 0
        ]
        ref = sum(around) / len(around) if around else math.nan
        r["none_bps"] = ref
        r["ratio"] = r["goodput_bps"] / ref if ref and ref == ref else math.nan
        nothing_through = not r["replayed_delivered"] and not r["damaged_delivered"]
        r["kept"] = (
            None if r["phase"] in OUT_OF_SCOPE else bool(r["ratio"] >= TARGET and nothing_through)
        )
    return rows


def run(
    quick: bool,
    out: ResultsDir,
    say: Callable[[str], None],
    progress: Callable[[str, float], None],
    values: str | None = None,
    seconds: int | None = None,
) -> dict[str, Any]:
    """Each mode's attacks on a testbed of its own; the summary, CSV and plot in ``out``."""
    chosen = check_values(values) if values is not None else tuple(ATTACKS)
    phase_s = float(seconds or (QUICK_PHASE_S if quick else PHASE_S))
    rows: list[dict[str, Any]] = []
    for k, mode in enumerate(MODES):
        attacks = [a for a in attacks_for(mode) if a in chosen]
        if not attacks:
            continue
        progress(f"{NAME}: {mode}", k / len(MODES))
        say(f"{NAME}: {mode}: {', '.join(attacks)}, {phase_s:g} s each, none between")
        rows += run_mode(mode, attacks, phase_s)
    progress(f"{NAME}: done", 1.0)
    summary: dict[str, Any] = {
        "kind": "experiment",
        "experiment": {"name": NAME, "question": QUESTION, "attacks": list(chosen)},
        "quick": quick,
        "phase_s": phase_s,
        "target": TARGET,
        "offered_share": OFFER_SHARE,
        "bound_bps": {"udp_1400": bound_bps("esb"), "udp_1400_stream": bound_bps("stream")},
        "rows": rows,
    }
    summary["verdict"] = verdict(summary)
    write_rows(out.path / f"{NAME}.csv", rows)
    out.write_summary(summary, f"{NAME}.json")
    plot(summary, out.path)
    return summary


def verdict(summary: dict[str, Any]) -> str:
    """Per mode: each attack's share of the none phases' goodput, and what got through."""
    parts = []
    for mode in MODES:
        rows = [r for r in summary["rows"] if r["mode"] == mode and r["phase"] != "none"]
        if not rows:
            continue
        hurt = [r for r in rows if r.get("kept") is False]
        said = ", ".join(
            f"{r['phase']} {r['ratio']:.2f}"
            + (f" ({r['replayed_delivered']} replayed" if r["replayed_delivered"] else "")
            + (f" ({r['damaged_delivered']} damaged" if r["damaged_delivered"] else "")
            + (")" if r["replayed_delivered"] or r["damaged_delivered"] else "")
            + (" (out of scope, not judged)" if r["phase"] in OUT_OF_SCOPE else "")
            for r in rows
        )
        judged = sum(r["phase"] not in OUT_OF_SCOPE for r in rows)
        head = "every attack kept" if not hurt else f"{len(hurt)} of {judged} hurt"
        parts.append(f"{mode}: {head} (>= {summary['target']:.2f} and nothing through): {said}")
    return "; ".join(parts) or "no attack measured"


def plot(summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.4))
    names = list(dict.fromkeys(r["phase"] for r in summary["rows"] if r["phase"] != "none"))
    width = 0.8 / len(MODES)
    for k, mode in enumerate(MODES):
        got = {r["phase"]: r["ratio"] for r in summary["rows"] if r["mode"] == mode}
        xs = [i + (k - (len(MODES) - 1) / 2) * width for i, n in enumerate(names) if n in got]
        ys = [got[n] for n in names if n in got]
        ax.bar(xs, ys, width, label=mode)
    ax.axhline(summary.get("target", TARGET), color="k", ls="--", lw=1, label="target")
    ax.set_xticks(range(len(names)), names)
    ax.set(ylabel="goodput / the none phases' around it", ylim=(0, 1.15))
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.suptitle(textwrap.fill(summary.get("verdict", QUESTION), 150), fontsize=9)
    fig.tight_layout()
    return save_figure(fig, out, NAME)
