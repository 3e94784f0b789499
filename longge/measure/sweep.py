"""tTest and lTest: offered-load sweeps, described as data, run one trial at a time.

tTest: a few log-spaced loads, then doubling until the link stops carrying what it is offered
(received/offered < 0.97), then bisection on a log scale between the last good and the first
bad load; each load repeated; the queues drained between trials. Capacity C comes from the
hockey-stick fit of all points, ρ = offered / C.

lTest: at each ρ (of a C measured first, or given), a background iperf3 UDP load and, on top of
it, isochronous RTT probes (small: at most 5 % of C).

Both report progress through a callback and keep what they measured when interrupted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from longge.measure import analysis
from longge.measure.cpu import STEAL_LIMIT, StealMeter
from longge.measure.disturbance import Disturbance, Watch, unspoilt
from longge.measure.emulator import health, spoilt_reason
from longge.measure.iperf import TrialResult, TrialSpec, parse_result, run_trial
from longge.measure.link import Target
from longge.measure.loadprobe import load_and_probe, probe_in
from longge.measure.results import ResultsDir

Progress = Callable[[str, float], None]  # (message, fraction done)

IP_UDP_HEADERS = 28
MIN_PACKETS = 50
#: Which way a sweep's load flows; each direction's figures carry its name.
DIRECTIONS = {"up": "mobile -> base", "down": "base -> mobile", "both": "both ways at once"}
#: The daemons that send each direction's load (their queues are the ones that fill).
SENDERS = {"up": ("mobile",), "down": ("base",), "both": ("mobile", "base")}


@dataclass(frozen=True)
class TTestPlan:
    protocol: str = "udp"
    duration: int = 10
    length: int | None = None  # None: 1400, smaller at low loads for >= 50 datagrams
    streams: int = 1
    repeats: int = 3
    start_bps: float = 2_000
    max_bps: float = 20_000_000
    bisect_steps: int = 4
    efficiency_knee: float = analysis.EFFICIENCY_KNEE
    #: rounds of re-measuring what contradicts C before the run gives no capacity
    verdict_rounds: int = 3
    direction: str = "up"  # DIRECTIONS: up (mobile -> base), down (-R), both (--bidir)

    def datagram(self, rate_bps: float) -> int:
        if self.length:
            return self.length
        fit = int(rate_bps * self.duration / 8 / MIN_PACKETS)
        return max(64, min(1400, fit))


QUICK_TTEST = TTestPlan(duration=3, repeats=2, bisect_steps=3)


@dataclass(frozen=True)
class LTestPlan:
    rhos: tuple[float, ...] = (
        0.0,
        0.2,
        0.4,
        0.6,
        0.7,
        0.8,
        0.85,
        0.9,
        0.95,
        1.0,
        1.05,
        1.1,
        1.2,
        1.5,
    )
    seconds: int = 10
    interval_s: float = 0.05
    length: int = 1400
    capacity_bps: float | None = None  # None: measure it first (quick tTest)
    probe_bytes: int = 60  # UDP payload of a probe: irtt's smallest packet, for comparison
    direction: str = "up"  # of the load (DIRECTIONS); probes go both ways anyway


QUICK_LTEST = LTestPlan(rhos=(0.0, 0.5, 0.8, 0.9, 1.0, 1.1, 1.3), seconds=4)


@dataclass
class PointResult:
    offered_bps: float
    trials: list[TrialResult] = field(default_factory=list)

    @property
    def ok_trials(self) -> list[TrialResult]:
        return [t for t in self.trials if t.error is None and t.received_bps > 0]

    @property
    def received_bps(self) -> float:
        vals = [t.received_bps for t in self.ok_trials]
        return analysis.percentile(vals, 0.5) if vals else 0.0

    @property
    def efficiency(self) -> float:
        return self.received_bps / self.offered_bps if self.offered_bps else 0.0

    @property
    def packets(self) -> int:
        return sum(t.packets for t in self.ok_trials)  # UDP datagrams sent (0 for TCP)

    @property
    def lost_packets(self) -> int:
        return sum(t.lost_packets for t in self.ok_trials)


def reverse_view(p: PointResult) -> PointResult:
    """--bidir: the base -> mobile half of each of a point's trials, sharing its verdict (a
    trial not counted in one direction is not counted in the other)."""
    trials = []
    for t in p.trials:
        r = t.reverse or TrialResult(offered_bps=t.offered_bps, error="no reverse figures")
        trials.append(replace(r, error=t.error) if t.error else r)
    return PointResult(p.offered_bps, trials)


# -- shared plumbing ---------------------------------------------------------------------------


def trial_row(kind: str, spec: TrialSpec, r: TrialResult, started: float) -> dict[str, Any]:
    return {
        "kind": kind,
        "offered_bps": round(r.offered_bps, 1),
        "received_bps": round(r.received_bps, 1),
        "sent_bps": round(r.sent_bps, 1),
        "efficiency": round(r.efficiency, 4),
        "packets": r.packets,
        "lost_packets": r.lost_packets,
        "jitter_ms": round(r.jitter_ms, 3),
        "retransmits": r.retransmits,
        "streams": spec.streams,
        "error": r.error or "",
        "cpu_steal": round(r.cpu_steal, 4),
        "air_freezes": r.air_freezes,
        "air_frozen_ms": r.air_frozen_ms,
        "started": round(started, 3),
        "seconds": spec.duration,
        "direction": "both" if spec.bidir else "down" if spec.reverse else "up",
        # --bidir: the base -> mobile half (empty otherwise)
        "reverse_received_bps": None if r.reverse is None else round(r.reverse.received_bps, 1),
        "reverse_packets": None if r.reverse is None else r.reverse.packets,
        "reverse_lost_packets": None if r.reverse is None else r.reverse.lost_packets,
    }


# -- tTest -------------------------------------------------------------------------------------


class _Sweep:
    def __init__(self, target: Target, out: ResultsDir, progress: Progress) -> None:
        self.target = target
        self.out = out
        self.progress = progress


class TTest(_Sweep):
    def __init__(
        self,
        target: Target,
        plan: TTestPlan,
        out: ResultsDir,
        progress: Progress = lambda m, f: None,
        steal_meter: Callable[[], StealMeter] = StealMeter,
    ) -> None:
        super().__init__(target, out, progress)
        self.plan = plan
        self.points: dict[float, PointResult] = {}
        self.steal_meter = steal_meter

    def measure(self, offered: float) -> PointResult:
        plan = self.plan
        point = self.points.setdefault(offered, PointResult(offered))
        spec = self.target.load_spec(
            plan.direction,
            protocol=plan.protocol,
            rate_bps=int(offered),
            duration=plan.duration,
            length=plan.datagram(offered),
            streams=plan.streams,
        )

        def trial() -> tuple[float, TrialResult]:
            started = time.time()
            return started, parse_result(spec, run_trial(spec, self.target.netns))

        def keep(done: tuple[float, TrialResult], d: Disturbance, why: str | None = None) -> None:
            started, res = done
            res.cpu_steal, res.air_freezes, res.air_frozen_ms = d.steal, d.freezes, d.frozen_ms
            if why:
                res.error = why
            point.trials.append(res)
            records = [
                {"interval": i + 1, "received_bps": round(v, 1)}
                for i, v in enumerate(res.interval_received_bps)
            ]
            self.out.add_trial(trial_row("tTest", spec, res, started), records)
            self.target.drain()

        budget = plan.repeats  # extra trials for those the machine spoilt, per load
        for _ in range(plan.repeats):
            done, disturbance, repeated = unspoilt(
                trial,
                repeats=budget,
                air=self.target.air,
                meter=self.steal_meter,
                seconds=spec.duration,
                # a trial that failed by itself counts as it is (its error says why)
                judge=lambda t, d: d.reason if t[1].error is None else None,
                on_spoilt=keep,
            )
            budget -= repeated
            keep(done, disturbance)
        return point

    def saturated(self, p: PointResult) -> bool:
        """Received less than ``efficiency_knee`` of the offered load. For UDP only if datagrams
        were lost, too: a load that lost none was carried, whatever rate the server computed
        over its own clock (a 3-s trial of 54 datagrams read 8 % low with none lost, and the
        search took 200 kbit/s for the link's capacity)."""
        if p.efficiency >= self.plan.efficiency_knee:
            return False
        return p.packets == 0 or p.lost_packets > 0

    def run(self) -> dict[str, Any]:
        plan = self.plan
        expected = 6 + plan.bisect_steps
        done = 0

        def step(offered: float) -> PointResult:
            nonlocal done
            self.progress(f"offered {offered / 1e3:.1f} kbit/s", done / expected)
            p = self.measure(offered)
            done += 1
            return p

        load = plan.start_bps
        for attempt in range(2):
            last_ok: float | None = None
            first_bad: float | None = None
            while load <= plan.max_bps:
                p = step(load)
                if self.overloaded(p) and last_ok is None and load == plan.start_bps:
                    # the very first load saturated: a stall, or a link slower than the start
                    # load; once more before the search builds on it
                    for t in p.ok_trials:
                        t.error = "measured again: the first load saturated"
                    p = step(load)
                if self.overloaded(p):
                    first_bad = load
                    break
                last_ok = load
                load = load * 10 if load < 200_000 else load * 2
            if first_bad is None or last_ok is None:
                break
            lo, hi = last_ok, first_bad
            for _ in range(plan.bisect_steps):
                mid = (lo * hi) ** 0.5
                if self.overloaded(step(mid)):
                    hi = mid
                else:
                    lo = mid
            over = first_bad * 1.5  # well past capacity: what overload looks like
            if self.overloaded(step(over)) or attempt:
                break
            # Not saturated at 1.5x the first "saturated" load: that one was a fluke (a stall
            # of the link or the machine). Go on searching upwards from here, once.
            load = over * 2
        self.settle(step)
        self.progress("done", 1.0)
        return self.summary()

    def ways(self) -> dict[str, dict[float, PointResult]]:
        """The points as each measured direction saw them (one, or two with --bidir)."""
        if self.plan.direction != "both":
            return {self.plan.direction: self.points}
        return {"up": self.points, "down": {o: reverse_view(p) for o, p in self.points.items()}}

    def overloaded(self, p: PointResult) -> bool:
        """Saturated in a direction the sweep measures (the search stops at the first)."""
        if self.saturated(p):
            return True
        return self.plan.direction == "both" and self.saturated(reverse_view(p))

    def verdict(self, points: dict[float, PointResult] | None = None) -> analysis.CapacityVerdict:
        pts = [p for p in (self.points if points is None else points).values() if p.ok_trials]
        return analysis.judge_capacity(
            [analysis.Judged(p.offered_bps, p.received_bps, self.saturated(p)) for p in pts]
        )

    def settle(self, step: Callable[[float], PointResult]) -> None:
        """Measure again what contradicts C (a point disturbed by the machine reads like a
        different link), and above the highest load while nothing clearly saturated lies
        above C, in each direction measured; at most ``verdict_rounds`` rounds. What is still
        contradicted then gives no capacity (summary: capacity_bps null, capacity_reason)."""
        for _ in range(self.plan.verdict_rounds):
            verdicts = [self.verdict(points) for points in self.ways().values()]
            if all(v.capacity_bps is not None for v in verdicts):
                return
            again = sorted({o for v in verdicts for o in v.contradicting})
            for offered in again:
                why = "; ".join(v.reason or "" for v in verdicts if offered in v.contradicting)
                for t in self.points[offered].ok_trials:
                    t.error = f"measured again: {why}"
                step(offered)
            if any(v.needs_load_above for v in verdicts):
                top = max(self.points) * 1.5
                if top > self.plan.max_bps:
                    return
                step(top)

    def summary(self) -> dict[str, Any]:
        ways = self.ways()
        main = ways.get("up", ways.get("down", {}))
        out: dict[str, Any] = {
            "kind": "tTest",
            "plan": asdict(self.plan),
            "direction": self.plan.direction,
            "direction_label": DIRECTIONS[self.plan.direction],
            **self._way_summary(main),
        }
        if self.plan.direction == "both":
            out["reverse"] = {"direction": "down", **self._way_summary(ways["down"])}
        out["emulator"] = health(
            self.target.air,
            "trial",
            [t.as_dict() for p in self.points.values() for t in p.trials],
        )
        out["cpu_steal"] = {
            "limit": STEAL_LIMIT,
            "max": max((t.cpu_steal for p in self.points.values() for t in p.trials), default=0),
            "trials_repeated": sum(
                1
                for p in self.points.values()
                for t in p.trials
                if t.error and "not counted, repeated" in t.error
            ),
        }
        return out

    def _way_summary(self, points: dict[float, PointResult]) -> dict[str, Any]:
        """Capacity, saturation and per-load rows of one direction."""
        pts = [p for p in sorted(points.values(), key=lambda p: p.offered_bps) if p.ok_trials]
        verdict = self.verdict(points)
        capacity = verdict.capacity_bps
        first_bad = next((p for p in pts if self.saturated(p)), None)
        rows = []
        for p in sorted(points.values(), key=lambda p: p.offered_bps):
            ok = p.ok_trials
            packets = sum(t.packets for t in ok)
            lost = sum(t.lost_packets for t in ok)
            streams = [t.stream_received_bps for t in ok if len(t.stream_received_bps) > 1]
            rows.append(
                {
                    "offered_bps": p.offered_bps,
                    "received_bps": p.received_bps,
                    "received_min_bps": min((t.received_bps for t in ok), default=None),
                    "received_max_bps": max((t.received_bps for t in ok), default=None),
                    "efficiency": p.efficiency,
                    "rho": p.offered_bps / capacity if capacity else None,
                    "trials": len(p.trials),
                    "failed_trials": len(p.trials) - len(ok),
                    "errors": sorted({t.error for t in p.trials if t.error}),
                    "packets": packets,
                    "lost_packets": lost,
                    "loss": lost / packets if packets else None,
                    "loss_ci95": analysis.wilson_interval(lost, packets) if packets else None,
                    "jitter_ms": analysis.percentile([t.jitter_ms for t in ok], 0.5)
                    if ok
                    else None,
                    "retransmits": sum(t.retransmits for t in ok),
                    "jain_index": analysis.jain_index(streams[0]) if streams else None,
                    "datagram_bytes": self.plan.datagram(p.offered_bps),
                    "cpu_steal_max": max((t.cpu_steal for t in p.trials), default=0.0),
                }
            )
        return {
            # None when the points do not support one (capacity_reason says why)
            "capacity_bps": capacity,
            "capacity_reason": verdict.reason,
            "capacity_lower_bound_bps": verdict.lower_bound_bps,
            "capacity_reached": capacity is not None,
            "saturation": None
            if first_bad is None or not capacity
            else {
                "offered_bps": first_bad.offered_bps,
                "rho": first_bad.offered_bps / capacity,
                "rule": f"first load with received/offered < {self.plan.efficiency_knee} "
                "(UDP: and datagrams lost)",
            },
            "points": rows,
        }


# -- lTest -------------------------------------------------------------------------------------


#: The queueing knee: half the load's bytes wait longer than this in the sender's queue.
QUEUE_KNEE_MS = 10.0


class LTest(_Sweep):
    def __init__(
        self,
        target: Target,
        plan: LTestPlan,
        out: ResultsDir,
        progress: Progress = lambda m, f: None,
    ) -> None:
        super().__init__(target, out, progress)
        self.plan = plan
        self.levels: list[dict[str, Any]] = []
        self.capacity_source = "given"
        self.ttest: dict[str, Any] | None = None

    def capacity(self) -> float:
        if self.plan.capacity_bps:
            return self.plan.capacity_bps
        self.capacity_source = "measured by a quick tTest first"
        t = TTest(
            self.target,
            replace(QUICK_TTEST, direction=self.plan.direction),
            self.out,
            lambda m, f: self.progress(f"capacity: {m}", 0.4 * f),
        )
        self.ttest = t.run()
        # --bidir: the direction that carries less sets the loads of both
        found = [self.ttest, *([self.ttest["reverse"]] if "reverse" in self.ttest else [])]
        for way in found:
            if not way.get("capacity_bps"):
                why = way.get("capacity_reason")
                raise RuntimeError(f"could not measure the capacity: {why}")
        return float(min(way["capacity_bps"] for way in found))

    def run(self) -> dict[str, Any]:
        plan = self.plan
        cap = self.capacity()
        interval = plan.interval_s
        probe_bits = (plan.probe_bytes + IP_UDP_HEADERS) * 8
        if probe_bits / interval > 0.05 * cap:
            interval = probe_bits / (0.05 * cap)  # keep probes <= 5 % of capacity
        count = max(10, int(plan.seconds / interval))
        for i, rho in enumerate(plan.rhos):
            base = 0.4 if self.ttest is not None else 0.0
            self.progress(f"ρ = {rho:.2f}", base + (1 - base) * i / len(plan.rhos))
            lv = self._level_unspoilt(rho, cap, count, interval)
            self.levels.append(lv)
        self.progress("done", 1.0)
        return self.summary(cap, interval)

    def _level_unspoilt(
        self, rho: float, cap: float, count: int, interval: float
    ) -> dict[str, Any]:
        """A level, measured once more if the machine spoilt it (judged on what the level
        measured around its probes); the level keeps why (``repeated_because``)."""
        spoilt: list[str] = []
        lv, _, _ = unspoilt(
            lambda: self.level(rho, cap, count, interval),
            between=self.target.drain,
            judge=lambda lv, _: spoilt_reason(
                lv["cpu_steal"], STEAL_LIMIT, lv["air_frozen_ms"], count * interval
            ),
            on_spoilt=lambda lv, d, why: spoilt.append(why),
        )
        self.target.drain()
        if spoilt:
            lv["repeated_because"] = spoilt[0]
        return lv

    def _emulator_health(self) -> dict[str, Any] | None:
        end = health(self.target.air, "level", self.levels)
        if end is not None:
            end["levels_repeated"] = [lv["rho"] for lv in self.levels if lv.get("repeated_because")]
        return end

    def _queue_delay_hist(self) -> tuple[list[int], list[float]] | None:
        """The sending daemons' queueing-delay histogram (bytes per bin, summed over the
        direction's senders) with its bins' edges (ms), if they answer."""
        senders = SENDERS[self.plan.direction]
        found = [
            st.tx
            for st in self.target.status().values()
            if st.node.role in senders and st.tx.queue_delay_hist
        ]
        if len(found) != len(senders):
            return None
        bins = [sum(b) for b in zip(*(tx.queue_delay_hist for tx in found), strict=True)]
        return bins, found[0].queue_delay_edges_ms

    def level(self, rho: float, cap: float, count: int, interval: float) -> dict[str, Any]:
        spec = self.target.load_spec(
            self.plan.direction,
            protocol="udp",
            rate_bps=int(rho * cap),
            duration=int(count * interval + 3),
            length=self.plan.length,
        )
        started = time.time()
        around: dict[str, Any] = {}

        def probe() -> dict[str, Any]:  # steal, the air and the queues while the probes run
            around["watch"] = Watch(self.target.air)
            around["before"] = self._queue_delay_hist()
            probes = probe_in(self.target, count, interval, self.plan.probe_bytes)
            around["after"] = self._queue_delay_hist()
            return probes

        measured = load_and_probe(
            self.target, spec if rho > 0 else None, count, interval, probe=probe
        )
        res, probes = measured.load, measured.probes
        disturbed = around["watch"].end(count * interval)
        before, after = around["before"], around["after"]
        rtts = measured.rtts
        app = [
            r["app_rtt_ms"] for r in probes.get("records", []) if r.get("app_rtt_ms") is not None
        ]
        sent, lost = measured.sent, measured.lost
        lv = {
            "rho": rho,
            "offered_bps": rho * cap,
            "received_bps": res.received_bps if res else 0.0,
            # --bidir: the base -> mobile half of the load
            "reverse_received_bps": res.reverse.received_bps if res and res.reverse else None,
            "load_error": res.error if res else None,
            "probes_sent": sent,
            "probes_lost": lost,
            "probe_loss_ci95": analysis.wilson_interval(lost, sent) if sent else None,
            "rtt_median_ms": analysis.percentile(rtts, 0.5),
            "rtt_median_ci95_ms": analysis.quantile_interval(rtts, 0.5) if rtts else None,
            "rtt_p95_ms": analysis.percentile(rtts, 0.95),
            "rtt_p99_ms": analysis.percentile(rtts, 0.99),
            "rtt_max_ms": max(rtts) if rtts else None,
            "rtt_min_ms": min(rtts) if rtts else None,
            # as an application (and irtt) sees it: stamped in user space, wake-ups included
            "app_rtt_median_ms": analysis.percentile(app, 0.5) if app else None,
            "probe_error": probes.get("error"),
            "cpu_steal": disturbed.steal,
            "air_freezes": disturbed.freezes,
            "air_frozen_ms": disturbed.frozen_ms,
        }
        if before is not None and after is not None and after[1]:
            edges = after[1]
            delta = [max(0, a - b) for a, b in zip(after[0], before[0], strict=False)]
            lv["queue_delay_p50_ms"] = analysis.histogram_percentile(delta, edges, 0.5)
            lv["queue_delay_p95_ms"] = analysis.histogram_percentile(delta, edges, 0.95)
            lv["queue_delay_bytes"] = sum(delta)
        row = {
            "kind": "lTest",
            "rho": rho,
            "offered_bps": round(rho * cap, 1),
            "received_bps": round(lv["received_bps"], 1),
            "rtt_median_ms": lv["rtt_median_ms"],
            "rtt_p95_ms": lv["rtt_p95_ms"],
            "probes_sent": sent,
            "probes_lost": lost,
            "error": lv["load_error"] or lv["probe_error"] or "",
            "cpu_steal": round(lv["cpu_steal"], 4),
            "air_freezes": lv["air_freezes"],
            "air_frozen_ms": lv["air_frozen_ms"],
            "started": round(started, 3),
            "seconds": spec.duration,
            "direction": self.plan.direction,
            "reverse_received_bps": None
            if lv["reverse_received_bps"] is None
            else round(lv["reverse_received_bps"], 1),
            "reverse_packets": None,
            "reverse_lost_packets": None,
        }
        self.out.add_trial(row, probes.get("records", []))
        return lv

    def summary(self, cap: float, interval: float) -> dict[str, Any]:
        idle = [lv for lv in self.levels if lv["rho"] == 0.0]
        baseline = (
            idle[0]["rtt_median_ms"]
            if idle
            else min((lv["rtt_median_ms"] for lv in self.levels), default=float("nan"))
        )
        knee = analysis.latency_knee(
            [
                analysis.Level(lv["rho"], lv["rtt_median_ms"], lv["rtt_p95_ms"])
                for lv in self.levels
                if lv["rho"] > 0
            ],
            baseline,
        )
        queue_knee = next(
            (
                lv["rho"]
                for lv in sorted(self.levels, key=lambda lv: lv["rho"])
                if lv["rho"] > 0 and lv.get("queue_delay_p50_ms", 0.0) > QUEUE_KNEE_MS
            ),
            None,
        )
        measured_queue = any("queue_delay_p50_ms" in lv for lv in self.levels)
        probe_knee = knee.rho if knee else None
        return {
            "kind": "lTest",
            "plan": asdict(replace(self.plan, capacity_bps=cap)),
            "direction": self.plan.direction,
            "direction_label": DIRECTIONS[self.plan.direction],
            "capacity_bps": cap,
            "capacity_source": self.capacity_source,
            "probe_interval_s": interval,
            "probe_bytes": self.plan.probe_bytes,
            "probe_bps": (self.plan.probe_bytes + IP_UDP_HEADERS) * 8 / interval,
            "baseline_rtt_ms": baseline,
            "knee_rho": queue_knee if measured_queue else probe_knee,
            "knee_rule": (
                f"lowest ρ at which half the load's bytes wait more than {QUEUE_KNEE_MS:g} ms in "
                "the sending daemon's queue (the onset of queueing)"
                if measured_queue
                else "lowest ρ whose median probe RTT exceeds max(2 × baseline, baseline + 10 ms)"
            ),
            "probe_knee_rho": probe_knee,
            "probe_knee_rule": "lowest ρ whose median probe RTT exceeds max(2 × baseline, "
            "baseline + 10 ms)",
            "levels": self.levels,
            "ttest": self.ttest,
            "emulator": self._emulator_health(),
            "cpu_steal": {
                "limit": STEAL_LIMIT,
                "max": max((lv.get("cpu_steal", 0.0) for lv in self.levels), default=0.0),
                "levels_over_limit": [
                    lv["rho"] for lv in self.levels if lv.get("cpu_steal", 0.0) > STEAL_LIMIT
                ],
            },
        }
