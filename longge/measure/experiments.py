"""The experiment battery's runner: TCP vs UDP, loss, window size, parallel flows and fairness,
multiplexing (latency under load), congestion control, link mode (ESB or stream).
``./run.sh experiment NAME|all``.

Each experiment is data (an ``Experiment``, experiment_plans.py): the parameter it varies and
its values, the series it compares (each a set of conditions), and what it measures. One
runner (here) applies conditions to the link and measures; one plotter draws any experiment
and a verdict function per experiment turns its rows into one sentence (experiment_report.py).
Conditions are applied through real parts: radio settings
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
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from longge.air import wire
from longge.air.wire import query
from longge.errors import ConfigError
from longge.measure import analysis, experiment_report
from longge.measure.disturbance import unspoilt
from longge.measure.experiment_plans import DEFAULTS, PROBE_INTERVAL_S, Experiment, probe_spec
from longge.measure.iperf import TrialSpec, parse_result, run_trial
from longge.measure.link import Target
from longge.measure.loadprobe import LoadProbe, load_and_probe
from longge.measure.model import lossy_model, udp_goodput_bps
from longge.measure.results import ResultsDir
from longge.measure.sweep import Progress
from longge.radio.options import RadioOptions

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


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()})
