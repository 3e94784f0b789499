"""tTest: a few log-spaced loads, then doubling until the link stops carrying what it is
offered (received/offered < 0.97), then bisection on a log scale between the last good and
the first bad load; each load repeated; the queues drained between trials. Capacity C is
judged from all points on the link's loss floor (measure/floor.py: a link that loses packets
at every load is saturated only where it carries clearly less than what its floor lets
through), ρ = offered / C; beside it the loss floor, NDR and PDR. Keeps what it measured when
interrupted."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from longge.measure import analysis, floor
from longge.measure.cpu import STEAL_LIMIT, StealMeter
from longge.measure.disturbance import Disturbance, unspoilt
from longge.measure.emulator import FROZEN_LIMIT, health, still_share
from longge.measure.iperf import TrialResult, TrialSpec, parse_result, run_trial
from longge.measure.link import DIRECTIONS, Target
from longge.measure.results import ResultsDir
from longge.measure.sweep import (
    PointResult,
    Progress,
    TTestPlan,
    _Sweep,
    reverse_view,
    trial_row,
)


class TTest(_Sweep):
    def __init__(
        self,
        target: Target,
        plan: TTestPlan,
        out: ResultsDir,
        progress: Progress = lambda m, f: None,
        steal_meter: Callable[[], StealMeter] = StealMeter,
        frames: Callable[[int], int] = lambda length: 1,
    ) -> None:
        super().__init__(target, out, progress)
        self.plan = plan
        self.points: dict[float, PointResult] = {}
        self.steal_meter = steal_meter
        # radio frames per datagram of a size (link.frames_of): the floor's model needs them
        self.frames = frames
        self._steps = 0  # trials' loads measured, for the progress
        self._expected = 6 + plan.bisect_steps
        self._shown = 0.0

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
            return started, self.trial(spec)

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

    def trial(self, spec: TrialSpec) -> TrialResult:
        """One trial of ``spec`` (MobilesTTest: one per mobile at once, in sum)."""
        return parse_result(spec, run_trial(spec, self.target.netns))

    def point_extra(self, ok: list[TrialResult]) -> dict[str, Any]:
        """More of a load's row (MobilesTTest: each mobile's rate)."""
        return {}

    def sample(self, p: PointResult) -> floor.Sample:
        return floor.Sample(
            p.offered_bps,
            p.received_bps,
            p.packets,
            p.lost_packets,
            self.frames(self.plan.datagram(p.offered_bps)),
        )

    def judged(self, points: dict[float, PointResult]) -> tuple[list[float], floor.LossyVerdict]:
        """One direction's loads that measured, and the lossy verdict on them."""
        pts = [p for p in sorted(points.values(), key=lambda p: p.offered_bps) if p.ok_trials]
        judged = floor.judge_lossy([self.sample(p) for p in pts], knee=self.plan.efficiency_knee)
        return [p.offered_bps for p in pts], judged

    def saturated_loads(self, points: dict[float, PointResult]) -> set[float]:
        """The loads judged saturated: received less than ``efficiency_knee`` of what the
        link's loss floor lets through and, for UDP, datagrams lost clearly above the floor (a
        load that lost none was carried, whatever rate the server computed over its own clock:
        a 3-s trial of 54 datagrams read 8 % low with none lost, and the search took 200 kbit/s
        for the link's capacity)."""
        loads, judged = self.judged(points)
        return {o for o, sat in zip(loads, judged.saturated, strict=True) if sat}

    def run(self) -> dict[str, Any]:
        plan = self.plan
        step = self.step

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

    def step(self, offered: float) -> PointResult:
        """Measure one load, with the progress: a load measured again or added extends the
        total instead of counting past it."""
        self._expected = max(self._expected, self._steps + 1)
        # (never back either: a total extended by points measured again slows the bar down)
        self._shown = min(0.99, max(self._shown, self._steps / self._expected))
        self.progress(f"offered {offered / 1e3:.1f} kbit/s", self._shown)
        p = self.measure(offered)
        self._steps += 1
        return p

    def ways(self) -> dict[str, dict[float, PointResult]]:
        """The points as each measured direction saw them (one, or two with --bidir)."""
        if self.plan.direction != "both":
            return {self.plan.direction: self.points}
        return {"up": self.points, "down": {o: reverse_view(p) for o, p in self.points.items()}}

    def overloaded(self, p: PointResult) -> bool:
        """Saturated in a direction the sweep measures (the search stops at the first)."""
        return any(p.offered_bps in self.saturated_loads(pts) for pts in self.ways().values())

    def verdict(self, points: dict[float, PointResult] | None = None) -> analysis.CapacityVerdict:
        return self.judged(self.points if points is None else points)[1].verdict

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
            above = any(v.needs_load_above for v in verdicts)
            self._expected = self._steps + len(again) + int(above)
            for offered in again:
                why = "; ".join(v.reason or "" for v in verdicts if offered in v.contradicting)
                for t in self.points[offered].ok_trials:
                    t.error = f"measured again: {why}"
                step(offered)
            if above:
                top = max(self.points) * 1.5
                if top > self.plan.max_bps:
                    return
                step(top)

    def partial(self) -> dict[str, Any]:
        """What was measured so far (runner: after Ctrl-C or an error): the summary of it."""
        return self.summary()

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

    def _still_share(self, trials: list[TrialResult]) -> float | None:
        """The median share of these trials' time the emulated air stood still (None: no
        trials, or no emulated air)."""
        if not trials or self.target.air is None:
            return None
        shares = [still_share(t.air_frozen_ms, self.plan.duration) for t in trials]
        return analysis.percentile(shares, 0.5)

    def _way_summary(self, points: dict[float, PointResult]) -> dict[str, Any]:
        """Capacity, saturation and per-load rows of one direction."""
        pts = [p for p in sorted(points.values(), key=lambda p: p.offered_bps) if p.ok_trials]
        _, judged = self.judged(points)
        verdict = judged.verdict
        capacity = verdict.capacity_bps
        sat_loads = {p.offered_bps for p, sat in zip(pts, judged.saturated, strict=True) if sat}
        first_bad = next((p for p in pts if p.offered_bps in sat_loads), None)
        rows = []
        # The loads that saturated set C. Where the emulated air stood still through them (its
        # holds for radio processes the machine ran late, see measure/emulator.py), C is in
        # part this machine's CPU: the link's own figure is C per second the air ran.
        saturated_still: list[float] = []
        for p in sorted(points.values(), key=lambda p: p.offered_bps):
            ok = p.ok_trials
            still = self._still_share(ok)
            if still is not None and p.offered_bps in sat_loads:
                saturated_still.append(still)
            packets = p.packets
            lost = p.lost_packets
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
                    "frames_per_datagram": self.frames(self.plan.datagram(p.offered_bps)),
                    "saturated": p.offered_bps in sat_loads,
                    # what the floor lets through at this load's datagram size
                    "floor_share": judged.floor.share(self.sample(p).frames),
                    "cpu_steal_max": max((t.cpu_steal for t in p.trials), default=0.0),
                    "air_still_share": still,
                    **self.point_extra(ok),
                }
            )
        share = analysis.percentile(saturated_still, 0.5) if saturated_still else None
        samples = [self.sample(p) for p in pts]
        ndr = floor.drop_rate(judged, samples, 0.0, "NDR")
        pdr = floor.drop_rate(judged, samples, self.plan.pdr_loss, "PDR")
        largest = max((self.plan.datagram(p.offered_bps) for p in pts if p.packets), default=None)
        return {
            # None when the points do not support one (capacity_reason says why; beside a C,
            # it says how C was read when not by the fit)
            "capacity_bps": capacity,
            "capacity_reason": verdict.reason,
            "capacity_lower_bound_bps": verdict.lower_bound_bps,
            "capacity_reached": capacity is not None,
            # the datagrams a load below saturation loses for good (the run's largest), the
            # per-frame residual loss behind it, and what it was estimated from (floor.py)
            "loss_floor": judged.loss_floor if largest else None,
            "loss_floor_ci95": list(judged.loss_floor_ci95) if largest else None,
            "loss_floor_datagram_bytes": largest,
            "loss_floor_frames": judged.frames if largest else None,
            "frame_residual_loss": judged.floor.r if largest else None,
            "frame_residual_loss_ci95": list(judged.floor.r_ci95) if largest else None,
            "loss_floor_from": {
                "points": judged.floor.points,
                "datagrams": judged.floor.datagrams,
                "lost": judged.floor.lost,
            },
            "ndr_bps": ndr.rate_bps,
            "ndr_reason": ndr.reason,
            "pdr_bps": pdr.rate_bps,
            "pdr_loss": self.plan.pdr_loss,
            "pdr_reason": pdr.reason,
            "capacity_air_still_share": share,
            "capacity_running_bps": capacity / (1 - share)
            if capacity and share is not None and share > FROZEN_LIMIT
            else None,
            "saturation": None
            if first_bad is None or not capacity
            else {
                "offered_bps": first_bad.offered_bps,
                "rho": first_bad.offered_bps / capacity,
                "rule": f"first load with received < {self.plan.efficiency_knee} x (1 - loss "
                "floor) x offered (UDP: and datagrams lost clearly above the floor)",
            },
            "points": rows,
        }
