"""Pure analysis of saved measurements: capacity, saturation, knees, fairness, intervals.

Every function here takes numbers and returns numbers; nothing measures, nothing plots, so
a re-analysis of a results folder gives the same answer every time (docs/design.md §3).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: received/offered below this means the link no longer carries what it is offered.
EFFICIENCY_KNEE = 0.97


@dataclass(frozen=True)
class Point:
    offered_bps: float
    received_bps: float


def fit_capacity(points: Sequence[Point]) -> float:
    """C minimising Σ (received − min(offered, C))² (the "hockey stick" fit).

    For a given set of saturated points (offered > C) the best C is their mean received rate,
    so it is enough to try each split of the points sorted by offered load.
    """
    pts = sorted(points, key=lambda p: p.offered_bps)
    if not pts:
        raise ValueError("no points to fit")
    best_c, best_sse = pts[-1].received_bps, math.inf
    for k in range(len(pts)):
        sat = pts[k:]
        c = statistics.fmean(p.received_bps for p in sat)
        # the split is consistent only if C lies between the last unsaturated and first saturated
        lo = pts[k - 1].offered_bps if k > 0 else 0.0
        c = min(max(c, lo), sat[0].offered_bps)
        sse = sum((p.received_bps - min(p.offered_bps, c)) ** 2 for p in pts)
        if sse < best_sse:
            best_c, best_sse = c, sse
    if pts[-1].received_bps >= EFFICIENCY_KNEE * pts[-1].offered_bps:
        # never saturated: C is at least what the highest point carried
        best_c = max(best_c, pts[-1].received_bps)
    return best_c


def fit_capacity_lossy(points: Sequence[Point]) -> float:
    """C of received = min(a·offered, C), with a, the share that gets through when the link is
    not full, taken from the lowest load. On a link that loses packets at every load (few
    retries on a noisy channel) the plain fit would read the loss as saturation."""
    pts = sorted(points, key=lambda p: p.offered_bps)
    if not pts:
        raise ValueError("no points to fit")
    low = pts[0]
    a = min(1.0, low.received_bps / low.offered_bps) if low.offered_bps > 0 else 1.0
    if a <= 0:
        return max(p.received_bps for p in pts)
    return fit_capacity([Point(a * p.offered_bps, p.received_bps) for p in pts])


#: How far a point may sit on the wrong side of C before it contradicts it (the ±3 % within
#: which a capacity is claimed).
CONTRADICTION_TOL = 0.03
#: A point that brackets C from above must be clearly saturated: received at most this share of
#: what was offered (a point at 0.966 is a wobble, not an overloaded link).
CLEAR_SATURATION = 0.94
#: How far below the most a saturated load carried the others may lie for that most to be C
#: (the machine's disturbance; beyond it, the points say no capacity).
SPREAD = 0.15


@dataclass(frozen=True)
class Judged:
    """A point as the capacity verdict sees it: ``saturated`` is the measurement's own rule
    (tTest: received/offered below the knee and, for UDP, datagrams lost)."""

    offered_bps: float
    received_bps: float
    saturated: bool
    #: relative standard deviation of ``received_bps`` from the link's own randomness (a lossy
    #: link's loss floor over few datagrams): widens the tolerance to twice it
    noise: float = 0.0


@dataclass(frozen=True)
class CapacityVerdict:
    """C, or None with the reason; what to measure to settle it."""

    capacity_bps: float | None
    reason: str | None = None
    #: offered loads whose points contradict C: measure them again
    contradicting: tuple[float, ...] = ()
    #: no clearly saturated point above C yet: measure above the highest load
    needs_load_above: bool = False
    lower_bound_bps: float | None = None


def _margin(p: Judged, tol: float) -> float:
    return max(tol, 2 * p.noise)


def _against(
    pts: Sequence[Judged], c: float, tol: float
) -> tuple[list[Judged], list[Judged], list[Judged]]:
    """The points that contradict C from below (saturated at a load the link carries) and
    from above (carried more than C), and those clearly saturated above C."""
    below = [p for p in pts if p.saturated and p.offered_bps < c * (1 - _margin(p, tol))]
    # carried more than C: received, not offered (a load a little above C is received at C with
    # nothing lost while the queues absorb the excess of a short trial)
    above = [p for p in pts if p.received_bps > c * (1 + _margin(p, tol))]
    clear = [
        p
        for p in pts
        if p.saturated and p.offered_bps > c and p.received_bps <= CLEAR_SATURATION * p.offered_bps
    ]
    return below, above, clear


def _highest_confirmed(pts: Sequence[Judged], tol: float) -> float | None:
    """The highest received rate that another point's comes within twice the tolerance of (one
    point alone, read high by a receiver's window, does not make a capacity)."""
    rates = sorted((p.received_bps for p in pts), reverse=True)
    for i, r in enumerate(rates[:-1]):
        if rates[i + 1] >= r * (1 - 2 * tol):
            return r
    return None


def judge_capacity(points: Sequence[Judged], tol: float = CONTRADICTION_TOL) -> CapacityVerdict:
    """The capacity the points support, or none. C (the hockey fit) stands only if
    - a load below it was carried (not saturated): else the points give only an upper bound,
    - a clearly saturated point lies above it (received <= CLEAR_SATURATION x offered),
    - no saturated point lies below C (a link of capacity C carries what is below C), and
    - no point, saturated or not, received more than C.
    Each by more than ``tol``, or twice a point's ``noise`` if more. Otherwise C is None,
    with what contradicts it."""
    pts = sorted(points, key=lambda p: p.offered_bps)
    if not pts:
        return CapacityVerdict(None, "no trial succeeded")
    if all(p.saturated for p in pts):
        low = pts[0]
        return CapacityVerdict(
            None,
            f"every load was saturated, the lowest ({low.offered_bps / 1e3:.1f} kbit/s) too: "
            f"the link carried at most {max(p.received_bps for p in pts) / 1e3:.1f} kbit/s, "
            "no load it carried whole says where its capacity is",
        )
    c = fit_capacity([Point(p.offered_bps, p.received_bps) for p in pts])
    below, above, clear = _against(pts, c, tol)
    if above and not below:
        # The fit is the saturated points' mean; a busy machine only ever carries less than the
        # link can, so their spread pulls it below what the link showed it carries. C is then
        # the most that was carried, if another point confirms it and explains every point.
        best = _highest_confirmed(pts, tol)
        if best is not None:
            b_below, b_above, b_clear = _against(pts, best, tol)
            over = [p.received_bps for p in pts if p.saturated and p.offered_bps > best]
            if b_clear and not b_below and not b_above and min(over) >= best * (1 - SPREAD):
                return CapacityVerdict(
                    best,
                    f"the saturated loads carried {min(over) / 1e3:.1f}–{best / 1e3:.1f} "
                    f"kbit/s: C is the most carried (their mean, {c / 1e3:.1f}, is contradicted "
                    "by the points above it; a busy machine carries less, never more)",
                )
    contradicting = tuple(p.offered_bps for p in below + above)
    if contradicting:
        what = ", ".join(
            [f"{p.offered_bps / 1e3:.1f} kbit/s saturated below" for p in below]
            + [
                f"{p.offered_bps / 1e3:.1f} kbit/s carried {p.received_bps / 1e3:.1f}, above"
                for p in above
            ]
        )
        return CapacityVerdict(
            None,
            f"points contradict C = {c / 1e3:.1f} kbit/s: {what}",
            contradicting=contradicting,
            needs_load_above=not clear,
        )
    if not clear:
        carried = max(p.received_bps for p in pts)
        if not any(p.saturated for p in pts):
            top = pts[-1].offered_bps / 1e3
            reason = f"not reached: every load up to {top:.1f} kbit/s was carried"
        else:
            reason = (
                f"no load clearly above C = {c / 1e3:.1f} kbit/s was clearly saturated "
                f"(received <= {CLEAR_SATURATION} x offered)"
            )
        return CapacityVerdict(None, reason, needs_load_above=True, lower_bound_bps=carried)
    return CapacityVerdict(c)


def jain_index(xs: Sequence[float]) -> float:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when all equal, 1/n when one takes all."""
    if not xs:
        raise ValueError("no flows")
    sq = sum(x * x for x in xs)
    return 1.0 if sq == 0 else sum(xs) ** 2 / (len(xs) * sq)


def wilson_interval(lost: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval for a loss proportion (sound also at 0 and at small n)."""
    if total <= 0:
        return (0.0, 1.0)
    p = lost / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def percentile(xs: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between order statistics."""
    if not xs:
        return math.nan
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def quantile_interval(xs: Sequence[float], q: float, z: float = 1.96) -> tuple[float, float]:
    """Distribution-free ~95 % confidence interval for the q-quantile: the order statistics at
    ranks n·q ∓ z·√(n·q·(1−q)) (normal approximation to the binomial). Needs no assumption about
    the shape of the distribution, which matters for RTTs under load: they are often bimodal (a
    probe either finds a packet in service or not), and then the median moves a lot with few
    samples."""
    if not xs:
        return (math.nan, math.nan)
    s = sorted(xs)
    n = len(s)
    half = z * math.sqrt(n * q * (1 - q))
    lo = max(0, math.floor(n * q - half) - 1)
    hi = min(n - 1, math.ceil(n * q + half))
    return (s[lo], s[hi])


def histogram_percentile(counts: Sequence[int], edges: Sequence[float], q: float) -> float:
    """The q-quantile of values counted in bins ``[0, e0], (e0, e1], …, (e_last, ∞)``, linear
    within a bin (the open last bin is read as its lower edge). NaN without counts."""
    total = sum(counts)
    if total <= 0:
        return math.nan
    target = q * total
    seen = 0.0
    for i, c in enumerate(counts):
        if c and seen + c >= target:
            lo = 0.0 if i == 0 else edges[i - 1]
            if i >= len(edges):
                return float(lo)
            return lo + (edges[i] - lo) * (target - seen) / c
        seen += c
    return float(edges[-1])


@dataclass(frozen=True)
class Level:
    rho: float
    median_ms: float
    p95_ms: float


def latency_knee(
    levels: Sequence[Level], baseline_ms: float, factor: float = 2.0, floor_ms: float = 10.0
) -> Level | None:
    """The lowest load whose median RTT leaves the idle baseline: exceeds both
    ``factor`` × baseline and baseline + ``floor_ms`` (so that milliseconds of noise on a fast
    link do not count)."""
    limit = max(baseline_ms * factor, baseline_ms + floor_ms)
    for lv in sorted(levels, key=lambda lv: lv.rho):
        if lv.median_ms > limit:
            return lv
    return None
