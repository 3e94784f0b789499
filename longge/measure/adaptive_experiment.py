"""Experiment ``adaptive`` (issue 42): a schedule of channel conditions, changed live on the
air at each phase boundary (``air set``), run with adaptation (``--adapt``) and with each
fixed setting of a grid; each setting brings up its own testbed (``testbed up``: 2 Mbit/s
configured, secured) and takes it down. The phases (PHASES):

    clean     nothing lost
    per10     10 % frame error, data and ACKs
    weak      71 dB path loss: at the nodes' power (−12 dBm) 2 Mbit/s is 1 dB under its
              sensitivity (most attempts fail), 1 Mbit/s 2 dB over
    far       78 dB: only 250 kbit/s is above its sensitivity (+4 dB)
    wifi      a Wi-Fi interferer on channel 13 (busy 0.3 of its 1-ms slots): the uplink's
              channel is under it
    clean2    nothing lost again

The load: the mobile sends 1400-byte UDP datagrams to the base at ``OFFER_BPS`` (more than
2 Mbit/s carries) through the whole schedule, from a steady sender of its own (iperf3's
control connection is TCP over the link: a client whose connection died in a dead phase
measured nothing after it); delivered: the base's TUN counter, read every SLICE_S. A ping
(10 a second) runs through each phase. Per setting and phase: goodput after JUDGE_AFTER_S,
the time to settle (from the boundary to the start of the first 2-s span whose mean is at
least 95 % of the phase's final rate: above it is no shortfall, and a 0.5-s slice holds a few
datagrams, so its rate moves by ±4 % from one to the next; a trial's pause later in the phase
is in the goodput, not in the settling), the share of packets the link itself lost
(the mobile's packets aborted after MAX_RT over packets sent: the queue's drops at this
offered load are not the link's), whether it stayed up (something delivered in every 2-s
span after JUDGE_AFTER_S), the ping's p95. With adaptation, the mobile's decisions
(``status``: ``tx.adapt.recent``) are kept with their times and marked on the plot. The
verdict and plot come from the saved summary (``plot``), as the battery's do.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from longge import testbed
from longge.air import control
from longge.daemon.status import DaemonClient
from longge.errors import ConfigError, LongGeError
from longge.measure.experiment_report import save_figure
from longge.measure.experiments import write_rows
from longge.measure.results import ResultsDir
from longge.radio.options import RadioOptions
from longge.testbed_spec import node_socket

NAME = "adaptive"
QUESTION = (
    "Does a link that tunes its own retries and rate (--adapt) carry what the best fixed "
    "setting does as the channel changes (loss, distance, Wi-Fi), and how fast does it settle?"
)
#: (name, the air's changes laid over what it has, the interferer)
PHASES: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("clean", {"per": 0.0, "path_loss": None}, "none"),
    ("per10", {"per": 0.1}, "none"),
    ("weak", {"per": 0.0, "path_loss": 71.0}, "none"),
    ("far", {"path_loss": 78.0}, "none"),
    ("wifi", {"path_loss": None}, "wifi:13:0.3"),
    ("clean2", {}, "none"),
)
SETTINGS = ("adapt", "2M/15", "1M/15", "250k/15", "2M/2")
QUICK_SETTINGS = ("adapt", "2M/15", "1M/15", "250k/15")
#: Stream mode's run (experiment ``adaptive-stream``): the rates (no retries), and a load
#: above what 1 Mbit/s carries there (its stream bound: 753 kbit/s of frame payload)
STREAM_SETTINGS = ("adapt", "2M", "1M", "250k")
STREAM_OFFER_BPS = 1.2e6
PHASE_S = 40.0
QUICK_PHASE_S = 15.0
OFFER_BPS = 700e3
SLICE_S = 0.5
#: Goodput is judged after this long in a phase (the settling target); a 2-s mean is the
#: unit of "settled" and of "up".
JUDGE_AFTER_S = 2.0
MEAN_S = 2.0
SETTLED_WITHIN = 0.05
#: The targets (issue 42): adaptation's share of the best fixed goodput in every phase, its
#: loss where some fixed setting's is below it, the settling time.
SHARE_TARGET = 0.95
LOSS_TARGET = 0.005
SETTLE_TARGET_S = 2.0
#: The load's sender (argv: bit/s, seconds), run in the mobile's namespace.
BLASTER = """
import socket, sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload, gap = bytes(1400), 1400 * 8 / rate
t = time.monotonic()
end = t + seconds
while t < end:
    try:
        s.sendto(payload, (sys.argv[3], 9))
    except OSError:
        pass
    t += gap
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
"""


_IN_MOBILE = ("ip", "netns", "exec", "lg-mobile")


def options(setting: str, mode: str = "esb") -> RadioOptions:
    """``adapt``, or RATE/ARC at the shortest ARD the rate allows for an empty ACK; in
    stream mode ``adapt`` or RATE."""
    if mode == "stream":
        adapt = setting == "adapt"
        return RadioOptions(mode=mode, adapt=adapt, rate="2M" if adapt else setting)
    if setting == "adapt":
        return RadioOptions(adapt=True)
    rate, arc = setting.split("/")
    return RadioOptions(rate=rate, ard_us=500 if rate == "250k" else 250, arc=int(arc))


class _Watch:
    """The base's TUN counter and the mobile's status, every SLICE_S, in a thread."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int]] = []
        self.decisions: dict[int, tuple[float, str]] = {}  # by number: (when, what)
        self.tx: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._client = DaemonClient(str(node_socket("mobile")))

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            self.samples.append((now, rx_bytes()))
            try:
                tx = self._client.status().raw["tx"]
            except (OSError, LongGeError):  # (a status missed: the next one counts)
                tx = None
            if tx is not None:
                self.tx.append((now, tx))
                for n, ago, what in (tx.get("adapt") or {}).get("recent", []):
                    self.decisions.setdefault(n, (now - ago, what))
            self._stop.wait(SLICE_S)


def rx_bytes() -> int:
    out = subprocess.run(
        ["ip", "netns", "exec", "lg-base", "cat", "/sys/class/net/longge0/statistics/rx_bytes"],
        capture_output=True,
        text=True,
    ).stdout
    return int(out.strip() or 0)


def _ping(seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *_IN_MOBILE,
            "ping",
            "-D",
            "-i",
            "0.1",
            "-W",
            "2",
            "-w",
            str(int(seconds)),
            testbed.BASE_IP,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def run_setting(
    setting: str, phase_s: float, mode: str = "esb", offer_bps: float = OFFER_BPS
) -> dict[str, Any]:
    """The schedule once, on a testbed of its own: per phase its row; the rate over time and
    the decisions (with adaptation)."""
    # (up takes down the testbed of the setting before; run() refused a user's)
    testbed.up(testbed.TestbedSpec(options(setting, mode)), owner=f"experiment {NAME}")
    air = str(testbed.paths()["air"])
    bounds = []
    load_args = (str(offer_bps), str(phase_s * len(PHASES) + 1), testbed.BASE_IP)
    try:
        time.sleep(2.0)  # (both daemons up, the first keepalives through)
        with _Watch() as watch:
            load = subprocess.Popen([*_IN_MOBILE, sys.executable, "-c", BLASTER, *load_args])
            pings = []
            for phase, changes, wifi in PHASES:
                control.apply(air, changes, interferer=wifi)
                t0 = time.monotonic()
                pings.append(_ping(phase_s))
                time.sleep(phase_s)
                bounds.append((phase, t0, time.monotonic()))
        try:
            load.wait(timeout=10)
        except subprocess.TimeoutExpired:
            load.kill()
        ping_out = "".join(p.communicate(timeout=30)[0] for p in pings)
    finally:
        testbed.down()
    # ping -D prints the wall clock; the phases use the monotonic one
    offset = time.time() - time.monotonic()
    rtts = [
        (float(t) - offset, float(ms))
        for t, ms in re.findall(r"\[([\d.]+)\].*time=([\d.]+)", ping_out)
    ]
    start = bounds[0][1]
    rows = [
        {"setting": setting, "phase": phase, **phase_figures(t0, t1, watch, rtts)}
        for phase, t0, t1 in bounds
    ]
    return {
        "rows": rows,
        "series": {
            "setting": setting,
            "t_s": [round(t - start, 3) for t, _ in slices(watch.samples)],
            "bps": [round(r) for _, r in slices(watch.samples)],
            "decisions": [
                [round(t - start, 3), what] for _, (t, what) in sorted(watch.decisions.items())
            ],
            "phases": [[phase, round(t0 - start, 3)] for phase, t0, _ in bounds],
        },
    }


def slices(samples: list[tuple[float, int]]) -> list[tuple[float, float]]:
    """(end of slice, bit/s delivered in it) from the counter's samples."""
    return [
        (t, 8 * (b1 - b0) / (t - ta)) for (ta, b0), (t, b1) in itertools.pairwise(samples) if t > ta
    ]


def phase_figures(
    t0: float, t1: float, watch: _Watch, rtts: list[tuple[float, float]]
) -> dict[str, Any]:
    rates = slices([(t, b) for t, b in watch.samples if t0 <= t <= t1])
    judged = [r for t, r in rates if t - t0 >= JUDGE_AFTER_S]
    final = statistics.median([r for _, r in rates[len(rates) // 2 :]] or [0.0])
    n = max(1, round(MEAN_S / SLICE_S))
    means = [
        (rates[k][0], statistics.mean(r for _, r in rates[k : k + n]))
        for k in range(max(0, len(rates) - n + 1))
    ]
    settle = next(
        (max(0.0, t - SLICE_S - t0) for t, m in means if m >= (1 - SETTLED_WITHIN) * final),
        None,
    )
    late = [m for t, m in means if t - t0 >= JUDGE_AFTER_S]  # (the 2-s spans judged)
    tx = [s for t, s in watch.tx if t0 <= t <= t1]
    sent = aborted = 0
    if len(tx) >= 2:
        sent = tx[-1].get("packets_sent", 0) - tx[0].get("packets_sent", 0)
        aborted = tx[-1].get("packets_aborted", 0) - tx[0].get("packets_aborted", 0)
    pings = sorted(ms for t, ms in rtts if t0 <= t <= t1)
    powers = [p["dbm"] for p in (((s.get("adapt") or {}).get("power")) for s in tx) if p]
    return {
        "goodput_bps": statistics.mean(judged) if judged else 0.0,
        "final_bps": final,
        "settle_s": settle,
        "link_loss": aborted / sent if sent else None,
        "packets_sent": sent,
        "up": bool(late) and all(m > 0 for m in late),
        "ping_p95_ms": pings[int(0.95 * (len(pings) - 1))] if pings else None,
        "pings": len(pings),
        # (with adaptation: the TX power's mean over the phase's status samples)
        "tx_dbm": round(statistics.mean(powers), 1) if powers else None,
        "phase_s": round(t1 - t0, 3),
    }


def check_values(values: str, mode: str = "esb") -> tuple[str, ...]:
    """experiment adaptive --values: some of its settings (in stream mode, its rates)."""
    known = SETTINGS if mode == "esb" else STREAM_SETTINGS
    settings = tuple(dict.fromkeys(t.strip() for t in values.split(",")))
    if not set(settings) <= set(known):
        name = NAME if mode == "esb" else f"{NAME}-{mode}"
        raise ConfigError("--values", values, f"settings of {name}: {', '.join(known)}")
    return settings


def run(
    quick: bool,
    out: ResultsDir,
    say: Callable[[str], None],
    progress: Callable[[str, float], None],
    mode: str = "esb",
    values: str | None = None,
    seconds: int | None = None,
) -> dict[str, Any]:
    """Every setting through the schedule; the summary, CSV and plot in ``out``. In stream
    mode: experiment ``adaptive-stream`` (its settings and load). ``values``: only these
    settings (experiment --values, text with commas); ``seconds``: each phase's (--time)."""
    name = NAME if mode == "esb" else f"{NAME}-{mode}"
    settings: tuple[str, ...] = (
        (QUICK_SETTINGS if quick else SETTINGS) if mode == "esb" else STREAM_SETTINGS
    )
    if values is not None:
        settings = check_values(values, mode)
    offer_bps = OFFER_BPS if mode == "esb" else STREAM_OFFER_BPS
    phase_s = float(seconds) if seconds else QUICK_PHASE_S if quick else PHASE_S
    rows: list[dict[str, Any]] = []
    series = []
    for k, setting in enumerate(settings):
        progress(f"{name}: {setting}", k / len(settings))
        say(f"{name}: {setting}: {len(PHASES)} phases of {phase_s:g} s")
        got = run_setting(setting, phase_s, mode, offer_bps)
        rows += got["rows"]
        series.append(got["series"])
    progress(f"{name}: done", 1.0)
    summary: dict[str, Any] = {
        "kind": "experiment",
        "experiment": {"name": name, "question": QUESTION, "phases": [p[0] for p in PHASES]},
        "quick": quick,
        "mode": mode,
        "phase_s": phase_s,
        "offered_bps": offer_bps,
        "settings": list(settings),
        "rows": rows,
        "series": series,
    }
    summary["judged"] = judge(rows)
    summary["verdict"] = verdict(summary)
    write_rows(out.path / f"{name}.csv", rows)
    out.write_summary(summary, f"{name}.json")
    plot(summary, out.path)
    return summary


def judge(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per phase: the best fixed setting (in hindsight, from the same run) and adaptation
    against it, with each target met or not."""
    out = []
    for phase in dict.fromkeys(r["phase"] for r in rows):
        fixed = [r for r in rows if r["phase"] == phase and r["setting"] != "adapt"]
        ad = next((r for r in rows if r["phase"] == phase and r["setting"] == "adapt"), None)
        if not fixed or ad is None:
            continue
        best = max(fixed, key=lambda r: r["goodput_bps"])
        share = ad["goodput_bps"] / best["goodput_bps"] if best["goodput_bps"] else math.nan
        losses = [r["link_loss"] for r in fixed if r["link_loss"] is not None]
        low = min(losses, default=None)
        robust = [r for r in fixed if r["setting"].split("/")[0] == "250k"]
        loss = ad["link_loss"]
        out.append(
            {
                "phase": phase,
                "best_fixed": best["setting"],
                "best_fixed_bps": best["goodput_bps"],
                "adapt_bps": ad["goodput_bps"],
                "share": share,
                "share_met": share >= SHARE_TARGET,
                "adapt_loss": loss,
                "lowest_fixed_loss": low,
                "loss_met": low is None or low > LOSS_TARGET or (loss or 0.0) <= LOSS_TARGET,
                "settle_s": ad["settle_s"],
                "settle_met": ad["settle_s"] is not None and ad["settle_s"] <= SETTLE_TARGET_S,
                "up_met": ad["up"] or not any(r["up"] for r in robust),
                "adapt_ping_p95_ms": ad["ping_p95_ms"],
                "best_fixed_ping_p95_ms": best["ping_p95_ms"],
                "adapt_tx_dbm": ad.get("tx_dbm"),
            }
        )
    return out


def verdict(summary: dict[str, Any]) -> str:
    """Adaptation's share of the best fixed goodput per phase, and which targets it missed."""
    judged = summary.get("judged") or judge(summary["rows"])
    if not judged:
        return "no phase with both adaptation and a fixed setting"
    shares = ", ".join(f"{j['phase']} {j['share']:.3f}" for j in judged)
    missed = [
        f"{j['phase']}: {what}"
        for j in judged
        for what, key in (
            (f"share < {SHARE_TARGET}", "share_met"),
            (f"loss {100 * (j['adapt_loss'] or 0):.2f} %", "loss_met"),
            (f"settled {j['settle_s']} s", "settle_met"),
            ("down where 250k was up", "up_met"),
        )
        if not j[key]
    ]
    head = f"adapt / best fixed ({summary.get('phase_s', PHASE_S):g}-s phases): {shares}"
    return head + ("; all targets met" if not missed else "; missed: " + "; ".join(missed))


def plot(summary: dict[str, Any], out: Path) -> list[Path]:
    """The rate over time for every setting, the phases shaded, adaptation's decisions marked
    (a line: a rate moved to, announced, kept after a trial or fallen back to; a triangle: a
    trial; ARC changes as ticks at the bottom, the TX power's as dots above them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(15, 5.5))
    series = summary.get("series", [])
    for s in series:
        kbps = [b / 1e3 for b in s["bps"]]
        if s["setting"] == "adapt":
            ax.plot(s["t_s"], kbps, label="adapt", lw=1.8, color="k", zorder=3)
        else:
            ax.plot(s["t_s"], kbps, label=s["setting"], alpha=0.8)
    if series:
        edges = [t for _, t in series[0]["phases"]] + [
            series[0]["t_s"][-1] if series[0]["t_s"] else 0
        ]
        for i, (name, t) in enumerate(series[0]["phases"]):
            ax.axvspan(t, edges[i + 1], color="0.93" if i % 2 else "white", zorder=0)
            ax.text(t + 0.5, 1.0, name, transform=ax.get_xaxis_transform(), va="top", fontsize=8)
    for s in series:
        if s["setting"] != "adapt":
            continue
        for t, what in s["decisions"]:
            kind, _, value = what.partition(" ")
            if kind in ("announce", "keep", "fallback"):  # a rate moved to (not a trial's)
                ax.axvline(t, color="C3", lw=0.6, alpha=0.6)
                ax.text(
                    t,
                    0.9,
                    value,
                    rotation=90,
                    fontsize=6,
                    color="C3",
                    transform=ax.get_xaxis_transform(),
                )
            elif kind == "trial":
                ax.plot([t], [0.03], "v", color="C2", ms=4, transform=ax.get_xaxis_transform())
            elif kind == "ARC":
                ax.plot([t], [0.0], "|", color="C7", ms=5, transform=ax.get_xaxis_transform())
            elif kind == "power":
                ax.plot([t], [0.06], ".", color="C4", ms=3, transform=ax.get_xaxis_transform())
    ax.set(xlabel="time (s)", ylabel="delivered to the base (kbit/s, 0.5-s slices)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.suptitle(textwrap.fill(summary.get("verdict", QUESTION), 160), fontsize=9)
    fig.tight_layout()
    return save_figure(fig, out, summary.get("experiment", {}).get("name", NAME))
