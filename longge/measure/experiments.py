"""The experiment battery: TCP vs UDP, loss, window size, parallel flows and fairness,
multiplexing (latency under load), congestion control, link mode (ESB or stream).
``./run.sh experiment NAME|all``.

Each experiment is data (an ``Experiment``): the parameter it varies and its values, the series
it compares (each a set of conditions), and what it measures. One runner applies conditions to
the link and measures; one plotter draws any experiment; a verdict function per experiment
turns its rows into one sentence. Conditions are applied through real parts: radio settings
through the daemons' control sockets, frame loss through the air emulator, added delay with
netem, socket buffers with the namespaces' TCP sysctls, congestion control per socket
(libiperf's ``-C``), the link mode through both daemons' control sockets (each restarts its
radio processes in the new mode).
"""

from __future__ import annotations

import contextlib
import csv
import functools
import json
import math
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from longge.air import wire
from longge.air.wire import query
from longge.errors import ConfigError
from longge.measure import analysis, experiment_report
from longge.measure.disturbance import unspoilt
from longge.measure.iperf import TrialSpec, parse_result, run_trial
from longge.measure.link import Target
from longge.measure.loadprobe import LoadProbe, load_and_probe
from longge.measure.model import IP_UDP_HEADERS, lossy_model, udp_goodput_bps
from longge.measure.results import ResultsDir
from longge.measure.sweep import Progress
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions

#: The conditions a point runs under, with their defaults (what the link has when untouched).
DEFAULTS: dict[str, Any] = {
    "protocol": "tcp",
    "ard_us": 250,
    "arc": 2,
    "per": 0.0,
    "delay_ms": 0,
    "window": 0,  # socket buffer limit in bytes; 0 = the system's default
    "cc": "",  # congestion control; "" = the system's default
    "streams": 1,
    "bulk_flows": 0,
    "mode": "",  # the link mode; "" = the one the link runs with
    "probe": "ping",  # the sparse flow measure "ping" probes: PROBES' or "20ms/200B"
    "direction": "up",  # the bulk flows' of measure "ping": up (mobile -> base) or down
}
MEASURES = ("goodput", "goodput+ping", "flows", "ping")
CC_CHOICES = ("reno", "cubic", "bbr", "vegas", "westwood", "htcp", "bic", "illinois")
#: The experiments' RTT probes (measure/loadprobe.py): one every 0.2 s, as the ping they replaced.
PROBE_INTERVAL_S = 0.2
#: The sparse flows measure "ping" can probe with: (interval s, UDP payload bytes). "ping":
#: the probes above (60 bytes, 5 a second); "keystroke": an interactive session's typing
#: (36 bytes, what one SSH keystroke's payload is, 10 a second).
PROBES = {"ping": (PROBE_INTERVAL_S, 60), "keystroke": (0.1, 36)}
#: The interactive flows of ``experiment multiplex``'s grid (issue 70): a packet every 10, 20,
#: 50 or 100 ms (a game, a call's 20-ms frames, a remote desktop), of 64, 200 or 1200 bytes
#: of UDP payload, wherever that is below its fair share beside 3 bulk flows (GRID_BULK).
GRID_INTERVALS_MS = (10, 20, 50, 100)
GRID_SIZES = (64, 200, 1200)
GRID_BULK = 3


def probe_spec(probe: str) -> tuple[float, int]:
    """(interval s, UDP payload bytes) of a probe condition: a name of PROBES or "20ms/200B";
    ValueError for anything else."""
    if probe in PROBES:
        return PROBES[probe]
    m = re.fullmatch(r"(\d{1,4})ms/(\d{1,4})B", probe)
    if m is None or int(m.group(1)) < 1 or not 8 <= int(m.group(2)) <= 1400:
        raise ValueError(probe)
    return int(m.group(1)) / 1000, int(m.group(2))


def interactive_grid(overhead: int) -> tuple[Series, ...]:
    """The multiplex grid's series: each interval and size below its fair share (C / (n + 1)
    with n = GRID_BULK, C the model's bound at 2 Mbit/s in the mode, ``overhead`` the
    security's bytes a packet), each way, ESB then stream mode."""
    out = []
    for mode in ("esb", "stream"):
        capacity = udp_goodput_bps(RadioOptions(mode=mode), 1400, overhead)
        for direction in ("up", "down"):
            for every_ms in GRID_INTERVALS_MS:
                for size in GRID_SIZES:
                    rate = (size + IP_UDP_HEADERS + overhead) * 8 / (every_ms / 1000)
                    if rate >= capacity / (GRID_BULK + 1):
                        continue  # (above its share: not interactive, not in the grid)
                    out.append(
                        Series(
                            f"{every_ms} ms x {size} B, {direction}, {mode}",
                            {
                                "probe": f"{every_ms}ms/{size}B",
                                "direction": direction,
                                "mode": mode,
                            },
                        )
                    )
    return tuple(out)


def _radio_option(name: str, value: Any) -> bool:
    """A radio option is checked where the radio's options are (radio/options.py), which
    raises ConfigError naming it and what it allows."""
    RadioOptions(**{name: value})
    return True


def _probe_ok(value: Any) -> bool:
    try:
        probe_spec(value)
    except (ValueError, TypeError):
        return False
    return True


def _check(name: str, value: Any) -> None:
    """Refuse a condition value the runner cannot apply (named, with what is allowed)."""
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "protocol": (lambda v: v in ("tcp", "udp"), "tcp or udp"),
        "ard_us": (lambda v: _radio_option("ard_us", v), ""),
        "arc": (lambda v: _radio_option("arc", v), ""),
        "per": (lambda v: isinstance(v, (int, float)) and 0 <= v < 1, "0 <= per < 1"),
        "delay_ms": (lambda v: isinstance(v, int) and 0 <= v <= 2000, "0..2000 ms"),
        "window": (
            lambda v: isinstance(v, int) and (v == 0 or 2048 <= v <= 16 << 20),
            "0 or 2 KiB..16 MiB",
        ),
        "cc": (lambda v: v == "" or v in CC_CHOICES, "one of " + ", ".join(CC_CHOICES)),
        "streams": (lambda v: isinstance(v, int) and 1 <= v <= 16, "1..16"),
        "bulk_flows": (lambda v: isinstance(v, int) and 0 <= v <= 8, "0..8"),
        "mode": (lambda v: v == "" or _radio_option("mode", v), ""),
        "probe": (_probe_ok, " or ".join(PROBES) + ', or "20ms/200B" (1..9999 ms, 8..1400 B)'),
        "direction": (lambda v: v in ("up", "down"), "up or down"),
    }
    if name not in checks:
        raise ConfigError("experiment", name, "a condition: " + ", ".join(checks))
    ok, allowed = checks[name]
    if not ok(value):
        raise ConfigError(name, value, allowed)


@dataclass(frozen=True)
class Series:
    label: str
    conditions: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    name: str
    question: str
    vary: str
    values: tuple[Any, ...]
    quick_values: tuple[Any, ...]
    measure: str
    xlabel: str
    series: tuple[Series, ...] = (Series("default"),)
    base: dict[str, Any] = field(default_factory=dict)  # conditions for every point
    log_x: bool = False
    trial_s: int = 10
    quick_trial_s: int = 5
    #: the series --quick runs (labels; None: all)
    quick_series: tuple[str, ...] | None = None

    def validate(self) -> None:
        if self.measure not in MEASURES:
            raise ConfigError(f"{self.name}.measure", self.measure, ", ".join(MEASURES))
        if not self.values or not self.quick_values:
            raise ConfigError(f"{self.name}.values", self.values, "at least one value")
        for v in (*self.values, *self.quick_values):
            _check(self.vary, v)
        for s in self.series:
            for k, v in {**self.base, **s.conditions}.items():
                _check(k, v)
        if self.trial_s < 2 or self.quick_trial_s < 2:
            raise ConfigError(f"{self.name}.trial_s", self.trial_s, ">= 2 s")

    def points(self, quick: bool) -> list[tuple[Series, Any, dict[str, Any]]]:
        """(series, x, full conditions) of every point, in run order."""
        out = []
        for s in self.series:
            if quick and self.quick_series is not None and s.label not in self.quick_series:
                continue
            for x in self.quick_values if quick else self.values:
                out.append((s, x, {**DEFAULTS, **self.base, **s.conditions, self.vary: x}))
        return out


LONG_RETRY = {"ard_us": 1000, "arc": 15}
MULTIPLEX_PINGS = (
    Series("default"),
    Series("keystroke", {"probe": "keystroke"}),
    Series("ping, stream", {"mode": "stream"}),
    Series("keystroke, stream", {"mode": "stream", "probe": "keystroke"}),
)
#: (on a secured link: the testbed's and the examples' default)
MULTIPLEX_GRID = interactive_grid(OVERHEAD)

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "tcp-vs-udp",
            "How much of the link does TCP get, next to UDP and the frame-level bound?",
            vary="protocol",
            values=("udp", "tcp"),
            quick_values=("udp", "tcp"),
            measure="goodput",
            xlabel="protocol",
        ),
        Experiment(
            "loss",
            "How does goodput fall as the frame error rate rises, with short and long retries?",
            vary="per",
            values=(0.0, 0.05, 0.1, 0.15, 0.2, 0.3),
            quick_values=(0.0, 0.1, 0.3),
            measure="goodput",
            xlabel="frame error rate (each attempt, data or ACK)",
            series=(
                Series("TCP, ARD 250 µs ARC 2", {"protocol": "tcp"}),
                Series("TCP, ARD 1000 µs ARC 15", {"protocol": "tcp", **LONG_RETRY}),
                Series("UDP, ARD 250 µs ARC 2", {"protocol": "udp"}),
                Series("UDP, ARD 1000 µs ARC 15", {"protocol": "udp", **LONG_RETRY}),
            ),
        ),
        Experiment(
            "window",
            "How do TCP goodput and RTT depend on the socket buffer (the window)?",
            vary="window",
            values=(2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144),
            quick_values=(2048, 4096, 16384, 262144),
            measure="goodput+ping",
            xlabel="socket buffer limit (bytes, tcp_rmem/tcp_wmem)",
            log_x=True,
        ),
        Experiment(
            "parallel",
            "Do parallel TCP flows share the link fairly (Jain's index)?",
            vary="streams",
            values=(1, 2, 3, 4, 6, 8),
            quick_values=(1, 2, 4, 8),
            measure="flows",
            xlabel="parallel TCP flows",
        ),
        Experiment(
            "multiplex",
            "What RTT does a ping see while bulk TCP flows share the link?",
            vary="bulk_flows",
            values=(0, 1, 2, 3),
            quick_values=(0, 1, 3),  # (four series: `experiment all --quick` in 15 minutes)
            measure="ping",
            xlabel="bulk TCP flows",
            # the ping in ESB is the series "default" (results stay comparable with earlier
            # ones); a keystroke flow beside it, and both in stream mode (issue 43); the
            # interactive grid each way, both modes (issue 70)
            series=(*MULTIPLEX_PINGS, *MULTIPLEX_GRID),
            # (--quick runs the pings alone: `experiment all --quick` stays within its 15
            # minutes; the grid is 36 series, some 40 minutes: `--values 0,3` halves it)
            quick_series=tuple(s.label for s in MULTIPLEX_PINGS),
        ),
        Experiment(
            "cc",
            "Which congestion control keeps goodput on a lossy, slow link: Reno, CUBIC, BBR?",
            vary="per",
            values=(0.0, 0.05, 0.1, 0.2),
            quick_values=(0.0, 0.1),
            measure="goodput",
            xlabel="frame error rate",
            series=tuple(
                Series(f"{cc}{'' if d == 0 else f', +{d} ms'}", {"cc": cc, "delay_ms": d})
                for d in (0, 50)
                for cc in ("reno", "cubic", "bbr")
            ),
        ),
        Experiment(
            "mode",
            "Which link mode carries more, and keeps RTT lower, as frames are lost: ESB (the "
            "chips acknowledge) or stream (LongGe's ARQ)?",
            vary="per",
            values=(0.0, 0.05, 0.1, 0.2, 0.3),
            quick_values=(0.0, 0.1, 0.3),
            measure="goodput+ping",
            xlabel="frame error rate (each frame, data or acknowledgement)",
            series=tuple(
                Series(f"{proto.upper()}, {mode}", {"protocol": proto, "mode": mode})
                for proto in ("udp", "tcp")
                for mode in ("esb", "stream")
            ),
        ),
    )
}


# -- applying conditions ----------------------------------------------------------------------


def _ns(netns: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    """Run in a namespace ("" = here, on a real node)."""
    full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
    return subprocess.run(full, capture_output=True, text=True, timeout=60)


def available_cc(netns: str) -> set[str]:
    with contextlib.suppress(OSError):  # BBR is often a module; no modprobe, no BBR
        subprocess.run(["modprobe", "tcp_bbr"], capture_output=True, timeout=30)
    out = _ns(netns, "cat", "/proc/sys/net/ipv4/tcp_available_congestion_control").stdout
    return set(out.split())


@dataclass
class Link:
    """Where conditions are applied: the testbed's namespaces, air and daemons."""

    target: Target
    air: str | None
    sender_ns: str = "lg-mobile"
    receiver_ns: str = "lg-base"
    tun: str = "longge0"
    applied: dict[str, Any] = field(default_factory=dict)

    def apply(self, cond: dict[str, Any]) -> None:
        changed = {k: v for k, v in cond.items() if self.applied.get(k) != v}
        if {"ard_us", "arc"} & set(changed):
            self.target.set_radio({"ard_us": cond["ard_us"], "arc": cond["arc"]})
        if "mode" in changed:
            self._mode(cond["mode"])
        if "per" in changed:
            if self.air is None:
                if cond["per"]:
                    raise ConfigError("per", cond["per"], "0 without the emulator (real link)")
            else:
                query(self.air, wire.loss_message({"per": cond["per"]}))
        if "delay_ms" in changed:
            if cond["delay_ms"]:
                args = ["netem", "delay", f"{cond['delay_ms']}ms", "limit", "10000"]
                _ns(self.sender_ns, "tc", "qdisc", "replace", "dev", self.tun, "root", *args)
            else:
                _ns(self.sender_ns, "tc", "qdisc", "del", "dev", self.tun, "root")
        if "window" in changed:
            self._window(cond["window"])
        self.applied.update(cond)

    def _mode(self, mode: str) -> None:
        if "saved_mode" not in self.applied:
            self.applied["saved_mode"] = self.target.mode()
        self.target.set_mode(mode or self.applied["saved_mode"])

    def _window(self, size: int) -> None:
        for netns, key in ((self.receiver_ns, "tcp_rmem"), (self.sender_ns, "tcp_wmem")):
            if "saved_" + key not in self.applied:
                self.applied["saved_" + key] = _ns(
                    netns, "sysctl", "-n", f"net.ipv4.{key}"
                ).stdout.split()
            vals = self.applied["saved_" + key] if size == 0 else ["4096", str(size), str(size)]
            _ns(netns, "sysctl", "-q", "-w", f"net.ipv4.{key}={' '.join(vals)}")

    def reset(self) -> None:
        self.apply({**self.applied, **DEFAULTS})


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Runner:
    link: Link
    opts: RadioOptions
    quick: bool
    progress: Progress = lambda m, f: None
    overhead: int = 0  # security bytes per packet on this link (for the bound)

    def _opts(self, cond: dict[str, Any]) -> RadioOptions:
        """The link's options under ``cond`` (its mode may differ from the link's own)."""
        return replace(self.opts, mode=cond["mode"] or self.opts.mode)

    def _spec(self, cond: dict[str, Any], seconds: int, streams: int | None = None) -> TrialSpec:
        udp = cond["protocol"] == "udp"
        model = udp_goodput_bps(self._opts(cond), 1400, self.overhead)
        return TrialSpec(
            host=self.link.target.host,
            port=self.link.target.iperf_port,
            protocol=cond["protocol"],
            rate_bps=int(1.2 * model) if udp else 0,
            duration=seconds,
            length=1400 if udp else 8192,
            streams=streams or cond["streams"],
            congestion=cond["cc"],
        )

    def measure(self, exp: Experiment, cond: dict[str, Any]) -> dict[str, Any]:
        seconds = exp.quick_trial_s if self.quick else exp.trial_s
        target = self.link.target
        row: dict[str, Any] = {}

        def probes(span_s: float, every_s: float = PROBE_INTERVAL_S) -> int:
            return max(1, int(span_s / every_s))  # 5 a second: 2.4 kbit/s of 60-byte probes

        if exp.measure == "ping":
            bulk = None
            if cond["bulk_flows"]:
                bulk = self._spec({**cond, "protocol": "tcp"}, seconds + 2, cond["bulk_flows"])
                bulk = replace(bulk, reverse=cond["direction"] == "down")
            every_s, size = probe_spec(cond["probe"])
            pinged = load_and_probe(target, bulk, probes(seconds - 1, every_s), every_s, size)
            if pinged.load is not None:
                row.update(received_bps=pinged.load.received_bps, error=pinged.load.error or "")
            row.update(self._rtt(pinged))
            return row
        spec = self._spec(cond, seconds)
        m: LoadProbe | None = None
        if exp.measure == "goodput+ping":  # the trial itself is the load the probes cross
            m = load_and_probe(target, spec, probes(seconds - 2), PROBE_INTERVAL_S)
            res = m.load or parse_result(spec, {"error": "no result"})
        else:
            res = parse_result(spec, run_trial(spec, target.netns))
        row.update(
            received_bps=res.received_bps,
            retransmits=res.retransmits,
            lost_packets=res.lost_packets,
            packets=res.packets,
            error=res.error or "",
        )
        if cond["protocol"] == "udp":  # the lossy model tTest, lTest and tune print (model.py)
            opts = replace(self._opts(cond), ard_us=cond["ard_us"], arc=cond["arc"])
            model, floor = lossy_model(opts, cond["per"], cond["per"], 1.0, 1400, self.overhead)
            row.update(model_goodput_bps=model, model_loss_floor=floor)
        if exp.measure == "flows":
            flows = res.stream_received_bps
            row.update(
                flows_bps=flows,
                jain=analysis.jain_index(flows) if flows and any(flows) else math.nan,
            )
        if m is not None:
            row.update(self._rtt(m))
        return row

    @staticmethod
    def _rtt(m: LoadProbe) -> dict[str, Any]:
        median, p95 = m.rtt_ms(0.5), m.rtt_ms(0.95)
        return {
            "rtt_median_ms": math.nan if median is None else median,
            "rtt_p95_ms": math.nan if p95 is None else p95,
            "probes_lost": m.lost,
            "probes_sent": m.sent,
        }

    def run(self, exp: Experiment, out: ResultsDir) -> dict[str, Any]:
        exp.validate()
        points = exp.points(self.quick)
        skipped: list[str] = []
        have_cc = available_cc(self.link.sender_ns) if any(c["cc"] for _, _, c in points) else set()
        rows: list[dict[str, Any]] = []
        try:
            for i, (series, x, cond) in enumerate(points):
                self.progress(f"{exp.name}: {series.label}, {exp.vary} = {x}", i / len(points))
                if cond["cc"] and cond["cc"] not in have_cc:
                    skipped.append(f"{series.label}: {cond['cc']} not offered by this kernel")
                    continue
                self.link.apply(cond)
                self.link.target.drain()
                measured, disturbed, repeated = unspoilt(  # see measure.disturbance
                    functools.partial(self.measure, exp, cond),
                    between=self.link.target.drain,
                    air=self.link.target.air,
                )
                stolen = disturbed.steal
                row = {
                    "experiment": exp.name,
                    "series": series.label,
                    "x": x,
                    **measured,
                    "cpu_steal": round(stolen, 4),
                    "repeated_for_steal": repeated,
                    # still spoilt after the repeat: in the rows and plots, not in the verdict
                    "disturbed": disturbed.reason or "",
                }
                rows.append(row)
        finally:
            self.link.reset()
        self.progress(f"{exp.name}: done", 1.0)
        summary = {
            "kind": "experiment",
            "experiment": asdict(exp),
            "quick": self.quick,
            "rows": rows,
            "skipped": sorted(set(skipped)),
            "bound_bps": {
                "udp_1400": udp_goodput_bps(self.opts, 1400, self.overhead),
                **{
                    f"udp_1400_{mode}": udp_goodput_bps(
                        replace(self.opts, mode=mode), 1400, self.overhead
                    )
                    for mode in sorted({c["mode"] for _, _, c in points if c["mode"]})
                },
            },
            "security_overhead": self.overhead,
            "cpu_steal_max": max((r["cpu_steal"] for r in rows), default=0.0),
        }
        summary["verdict"] = experiment_report.verdict(exp, summary)
        write_rows(out.path / f"{exp.name}.csv", rows)
        out.write_summary(summary, f"{exp.name}.json")
        experiment_report.plot(exp, summary, out.path)
        return summary


def failed_verdict(exc: BaseException) -> str:
    """An experiment's verdict when it could not be run to the end (it does not cost the
    others of the run)."""
    return f"failed: {type(exc).__name__}: {exc}"


def any_failed(verdicts: dict[str, Any]) -> bool:
    return any(str(v).startswith("failed: ") for v in verdicts.values())


def narrowed(exp: Experiment, values: str | None, seconds: int | None) -> Experiment:
    """``exp`` with only ``values`` (experiment --values: text with commas, each read as the
    definition's own values are) and trials of ``seconds`` (--time), in both its plans."""
    changes: dict[str, Any] = {}
    if values is not None:
        like = type(exp.values[0])
        try:
            picked = tuple(dict.fromkeys(like(t.strip()) for t in values.split(",")))
            for v in picked:
                _check(exp.vary, v)
        except (ValueError, ConfigError):
            raise ConfigError(
                "--values", values, f"{exp.vary} values of {exp.name}, e.g. {exp.values}"
            ) from None
        changes["values"] = changes["quick_values"] = picked
    if seconds is not None:
        changes["trial_s"] = changes["quick_trial_s"] = seconds
    out = replace(exp, **changes)
    out.validate()
    return out


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()})
