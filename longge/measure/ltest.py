"""lTest: at each ρ (of a C measured first, or given), a background iperf3 UDP load and, on
top of it, isochronous RTT probes (small: at most 5 % of C). Keeps what it measured when
interrupted."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from longge.measure import analysis
from longge.measure.cpu import STEAL_LIMIT
from longge.measure.disturbance import Watch, unspoilt
from longge.measure.emulator import health, spoilt_reason
from longge.measure.iperf import TrialSpec
from longge.measure.link import DIRECTIONS, Target
from longge.measure.loadprobe import LoadProbe, load_and_probe, probe_in
from longge.measure.results import ResultsDir
from longge.measure.sweep import (
    IP_UDP_HEADERS,
    QUICK_TTEST,
    SENDERS,
    LTestPlan,
    Progress,
    TTestPlan,
    _Sweep,
)
from longge.measure.ttest import TTest

#: The queueing knee: half the load's bytes wait longer than this in the sender's queue.
QUEUE_KNEE_MS = 10.0


class LTest(_Sweep):
    def __init__(
        self,
        target: Target,
        plan: LTestPlan,
        out: ResultsDir,
        progress: Progress = lambda m, f: None,
        frames: Callable[[int], int] = lambda length: 1,
    ) -> None:
        super().__init__(target, out, progress)
        self.plan = plan
        self.frames = frames  # radio frames per datagram of a size (link.frames_of)
        self.levels: list[dict[str, Any]] = []
        self.capacity_source = "given"
        self.ttest: dict[str, Any] | None = None

    def capacity_ttest(self, plan: TTestPlan, progress: Progress) -> TTest:
        """The quick tTest that measures the capacity (MobilesLTest: from its mobiles)."""
        return TTest(self.target, plan, self.out, progress, frames=self.frames)

    def load_and_probe(
        self,
        spec: TrialSpec | None,
        count: int,
        interval: float,
        probe: Callable[[], dict[str, Any]],
    ) -> LoadProbe:
        """A level's load and its probes (MobilesLTest: from every mobile)."""
        return load_and_probe(self.target, spec, count, interval, probe=probe)

    def probes(self, count: int, interval: float) -> dict[str, Any]:
        """A level's RTT probes (MobilesLTest: from every mobile at once)."""
        return probe_in(self.target, count, interval, self.plan.probe_bytes)

    def capacity(self) -> float:
        if self.plan.capacity_bps:
            return self.plan.capacity_bps
        self.capacity_source = "measured by a quick tTest first"
        t = self.capacity_ttest(
            replace(QUICK_TTEST, direction=self.plan.direction, pdr_loss=self.plan.pdr_loss),
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
            probes = self.probes(count, interval)
            around["after"] = self._queue_delay_hist()
            return probes

        measured = self.load_and_probe(spec if rho > 0 else None, count, interval, probe)
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
            **self.level_extra(probes),
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

    def level_extra(self, probes: dict[str, Any]) -> dict[str, Any]:
        """More of a level (MobilesLTest: each mobile's probes' p95)."""
        return {}

    def partial(self) -> dict[str, Any]:
        """The levels measured so far (runner: after Ctrl-C or an error), judged for nothing."""
        return {
            "kind": "lTest",
            "plan": asdict(self.plan),
            "direction": self.plan.direction,
            "direction_label": DIRECTIONS[self.plan.direction],
            "levels": self.levels,
            "capacity_bps": None,
            "baseline_rtt_ms": next(
                (lv["rtt_median_ms"] for lv in self.levels if lv["rho"] == 0.0), float("nan")
            ),
            "knee_rho": None,
            "ttest": self.ttest,
        }

    def probe_floor(self) -> tuple[float, float] | None:
        """The share of probes the link's loss floor loses at every load (its request and its
        reply: F frames each way), with its 95 % interval, from the tTest that measured C (None:
        C was given, or no floor was measured)."""
        t = self.ttest or {}
        r, ci = t.get("frame_residual_loss"), t.get("frame_residual_loss_ci95")
        if r is None or ci is None:
            return None
        frames = self.frames(self.plan.probe_bytes)

        def both_ways(x: float) -> float:
            return 1 - (1 - x) ** (2 * frames)

        return both_ways(r), both_ways(ci[1])

    def _count_against_floor(self) -> None:
        """Each level's probes lost, against what the floor alone loses: ``probes_lost_beyond
        _floor`` when the lower end of their 95 % interval lies above the floor's upper end."""
        floor = self.probe_floor()
        for lv in self.levels:
            lv["probe_loss_floor"] = None if floor is None else floor[0]
            ci = lv.get("probe_loss_ci95")
            lv["probes_lost_beyond_floor"] = (
                None if floor is None or ci is None else bool(ci[0] > floor[1])
            )

    def summary(self, cap: float, interval: float) -> dict[str, Any]:
        self._count_against_floor()
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
            # the link's loss floor as its tTest measured it (null when C was given)
            "loss_floor": (self.ttest or {}).get("loss_floor"),
            "loss_floor_ci95": (self.ttest or {}).get("loss_floor_ci95"),
            "probe_loss_floor": (self.probe_floor() or (None, None))[0],
            "emulator": self._emulator_health(),
            "cpu_steal": {
                "limit": STEAL_LIMIT,
                "max": max((lv.get("cpu_steal", 0.0) for lv in self.levels), default=0.0),
                "levels_over_limit": [
                    lv["rho"] for lv in self.levels if lv.get("cpu_steal", 0.0) > STEAL_LIMIT
                ],
            },
        }
