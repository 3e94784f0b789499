"""tTest and lTest: offered-load sweeps, described as data (their plans, points and trial rows;
the sweeps themselves are measure/ttest.py and measure/ltest.py).

tTest: a few log-spaced loads, then doubling until the link stops carrying what it is offered
(received/offered < 0.97), then bisection on a log scale between the last good and the first
bad load; each load repeated; the queues drained between trials. Capacity C comes from the
hockey-stick fit of all points, ρ = offered / C.

lTest: at each ρ (of a C measured first, or given), a background iperf3 UDP load and, on top of
it, isochronous RTT probes (small: at most 5 % of C).

Both report progress through a callback and keep what they measured when interrupted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from longge.measure import analysis, floor
from longge.measure.iperf import TrialResult, TrialSpec
from longge.measure.link import Target
from longge.measure.results import ResultsDir

Progress = Callable[[str, float], None]  # (message, fraction done)

IP_UDP_HEADERS = 28
MIN_PACKETS = 50
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
    #: the partial drop rate's loss (PDR: highest load losing at most this share)
    pdr_loss: float = floor.PDR_LOSS

    def __post_init__(self) -> None:
        floor.check_pdr_loss(self.pdr_loss)

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
    pdr_loss: float = floor.PDR_LOSS  # (of the tTest that measures C first)

    def __post_init__(self) -> None:
        floor.check_pdr_loss(self.pdr_loss)


QUICK_LTEST = LTestPlan(rhos=(0.0, 0.5, 0.8, 0.9, 1.0, 1.1, 1.3), seconds=4)


@dataclass
class PointResult:
    offered_bps: float
    trials: list[TrialResult] = field(default_factory=list)

    @property
    def ok_trials(self) -> list[TrialResult]:
        """The trials that measured (no error), also those the link carried nothing in: a
        load that got nothing through is a saturated point, not a missing one."""
        return [t for t in self.trials if t.error is None]

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
        """Datagrams lost, summed over the counted trials; a trial whose receiver got nothing
        lost every datagram sent (iperf3's server then counts none lost: it saw none)."""
        return sum(
            t.packets if t.packets and not t.received_bps else t.lost_packets
            for t in self.ok_trials
        )


def reverse_view(p: PointResult) -> PointResult:
    """--bidir: the base -> mobile half of each of a point's trials, sharing its verdict (a
    trial not counted in one direction is not counted in the other)."""
    trials = []
    for t in p.trials:
        r = t.reverse or TrialResult(offered_bps=t.offered_bps, error="no reverse figures")
        # what disturbed the trial disturbed both its directions
        trials.append(
            replace(
                r,
                cpu_steal=t.cpu_steal,
                air_freezes=t.air_freezes,
                air_frozen_ms=t.air_frozen_ms,
                error=t.error or r.error,
            )
        )
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
