"""A lossy link's capacity: its loss floor, the capacity its points support on that floor, and
RFC 2544's no-drop and partial-drop rates (docs/design.md, "Capacity on a lossy link").

On a real channel a link with few retries loses some packets at every load, not only past
capacity: an ESB frame whose ARC+1 attempts all fail (MAX_RT) takes its whole packet with it.
Such a link carries received = min((1 − p₀(F))·offered, C), where p₀(F) = 1 − (1 − r)^F is the
loss floor of a datagram of F frames and r the per-frame residual loss. Judged as if loss meant
overload (the plain hockey stick of measure/analysis.py), every load would look saturated and
the capacity "contradicted"; judged on this model, a point is saturated only when it carried
clearly less than (1 − p₀)·offered and lost clearly more than the floor.

- ``estimate_floor``: r by maximum likelihood from every point below saturation (datagrams of
  all sizes), with its 95 % likelihood-ratio interval;
- ``judge_lossy``: which points lie below saturation (a fixed point of floor and capacity),
  which are saturated, and analysis.judge_capacity on the offered loads scaled by 1 − p₀;
- ``drop_rates``: NDR and PDR (RFC 2544, MLRsearch), or none with the reason.

Pure functions of numbers, as measure/analysis.py: a re-analysis gives the same answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from longge.errors import ConfigError
from longge.measure import analysis

#: Half the 95 % quantile of χ²(1): the likelihood-ratio interval's drop in log-likelihood.
_LR_DROP = 3.841458820694124 / 2
#: A floor whose 95 % interval reaches below this is "indistinguishable from 0" (NDR).
NDR_FLOOR = 1e-3
#: Partial drop rate's loss by default (RFC 2544 / MLRsearch practice: 0.5 %).
PDR_LOSS = 0.005
#: At most this many rounds of floor ⇄ capacity before the judgment takes what it has.
_ROUNDS = 12


def check_pdr_loss(value: object) -> None:
    """``--pdr-loss``: a share of datagrams in [0, 1)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value < 1.0:
        raise ConfigError("--pdr-loss", value, "a share of datagrams in 0..1 (0.005: 0.5 %)")


@dataclass(frozen=True)
class Sample:
    """One load's figures as the lossy judgment sees them. ``packets``: datagrams sent, 0 where
    none were counted (TCP); ``frames``: radio frames per datagram at this load's size."""

    offered_bps: float
    received_bps: float
    packets: int = 0
    lost: int = 0
    frames: int = 1

    @property
    def loss(self) -> float | None:
        return self.lost / self.packets if self.packets else None


@dataclass(frozen=True)
class LossFloor:
    """The per-frame residual loss r (maximum likelihood) with its 95 % interval, and what it
    was estimated from."""

    r: float = 0.0
    r_ci95: tuple[float, float] = (0.0, 1.0)
    datagrams: int = 0
    lost: int = 0
    points: int = 0

    def loss(self, frames: int, r: float | None = None) -> float:
        """p₀(F) = 1 − (1 − r)^F: a datagram of ``frames`` frames lost for good."""
        r = self.r if r is None else r
        if r >= 1.0:
            return 1.0
        return -math.expm1(frames * math.log1p(-r))

    def loss_ci95(self, frames: int) -> tuple[float, float]:
        lo, hi = self.r_ci95
        return (self.loss(frames, lo), self.loss(frames, hi))

    def share(self, frames: int) -> float:
        """What gets through below saturation: 1 − p₀(F)."""
        return 1.0 - self.loss(frames)


def _loglik(samples: Sequence[Sample], r: float) -> float:
    """log L(r) = Σ lost·log p₀(F) + (packets − lost)·F·log(1 − r)."""
    if r <= 0.0:
        return 0.0 if all(s.lost == 0 for s in samples) else -math.inf
    if r >= 1.0:
        return 0.0 if all(s.lost == s.packets for s in samples) else -math.inf
    log_ok = math.log1p(-r)
    total = 0.0
    for s in samples:
        if s.lost:
            total += s.lost * math.log(-math.expm1(s.frames * log_ok))
        total += (s.packets - s.lost) * s.frames * log_ok
    return total


def _slope(samples: Sequence[Sample], r: float) -> float:
    """d log L / dr (decreasing in r: the log-likelihood is concave)."""
    total = 0.0
    for s in samples:
        ok = (1.0 - r) ** s.frames
        if s.lost:
            total += s.lost * s.frames * ok / (1.0 - r) / max(1e-300, 1.0 - ok)
        total -= (s.packets - s.lost) * s.frames / (1.0 - r)
    return total


def _bisect(f: Callable[[float], float], lo: float, hi: float, steps: int = 200) -> float:
    """The root of a function that is positive at ``lo`` and not at ``hi`` (monotone)."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def estimate_floor(samples: Sequence[Sample]) -> LossFloor:
    """r from datagrams counted at loads below saturation (``samples``), by maximum likelihood,
    with the 95 % likelihood-ratio interval. No datagram counted: r unknown in [0, 1]."""
    used = [s for s in samples if s.packets > 0 and s.frames > 0]
    n = sum(s.packets for s in used)
    k = sum(s.lost for s in used)
    if n == 0:
        return LossFloor()
    tiny = 1e-15
    if k == 0:
        r = 0.0
    elif k == n:
        r = 1.0
    else:
        r = _bisect(lambda x: _slope(used, x), tiny, 1.0 - tiny)
    top = _loglik(used, r)

    def inside(x: float) -> float:  # positive inside the interval
        return _loglik(used, x) - (top - _LR_DROP)

    lo = 0.0 if k == 0 or inside(tiny) > 0 else _bisect(lambda x: -inside(x), tiny, r)
    hi = 1.0 if k == n or inside(1.0 - tiny) > 0 else _bisect(inside, max(r, tiny), 1.0 - tiny)
    return LossFloor(r, (lo, hi), n, k, len(used))


def clearly_above(s: Sample, floor: LossFloor) -> bool:
    """Did this load lose clearly more than the floor explains: the lower end of its loss's
    95 % interval above the upper end of the floor's for its datagram size?"""
    if not s.packets:
        return False
    low, _ = analysis.wilson_interval(s.lost, s.packets)
    return low > floor.loss_ci95(s.frames)[1]


@dataclass(frozen=True)
class LossyVerdict:
    """The capacity verdict on the floor's model, the floor, and each sample's saturation."""

    verdict: analysis.CapacityVerdict
    floor: LossFloor
    #: per sample, in the order given
    saturated: tuple[bool, ...]
    #: the run's largest datagram, in frames: the floor reported is for it
    frames: int

    @property
    def loss_floor(self) -> float:
        return self.floor.loss(self.frames)

    @property
    def loss_floor_ci95(self) -> tuple[float, float]:
        return self.floor.loss_ci95(self.frames)


def saturated(s: Sample, floor: LossFloor, knee: float = analysis.EFFICIENCY_KNEE) -> bool:
    """Carried less than ``knee`` of (1 − p₀)·offered and, where datagrams were counted, lost
    clearly more than the floor (a trial that lost none was carried, whatever rate the server
    computed over its own clock). Without counted datagrams (TCP): the first rule alone, on
    the offered load itself."""
    if not s.offered_bps:
        return False
    if not s.packets:
        return s.received_bps < knee * s.offered_bps
    if s.received_bps >= knee * floor.share(s.frames) * s.offered_bps:
        return False
    return s.lost > 0 and clearly_above(s, floor)


def noise(s: Sample, floor: LossFloor) -> float:
    """Relative standard deviation of a load's received rate from its floor alone: of n
    datagrams a binomial share p₀ is lost (a 3-s trial of 80 datagrams at a 28 % floor reads
    ±6 %; at 4 % over 240 datagrams, ±1.4 %)."""
    if not s.packets:
        return 0.0
    p = floor.loss(s.frames)
    if p >= 1.0:
        return 0.0
    return math.sqrt(p * (1 - p) / s.packets) / (1 - p)


def judge_lossy(
    samples: Sequence[Sample],
    knee: float = analysis.EFFICIENCY_KNEE,
    tol: float = analysis.CONTRADICTION_TOL,
) -> LossyVerdict:
    """C on the model received = min((1 − p₀(F))·offered, C).

    The floor is estimated from the loads below saturation, which depend on C: start from the
    loads no higher than the most the link carried (surely below C), then alternate (floor from
    the loads whose (1 − p₀)·offered lies below C by more than ``tol``; C from the fit on
    loads scaled by 1 − p₀) until the set stays the same. Then each load is judged saturated or
    not (``saturated``) and analysis.judge_capacity rules on the scaled loads: a point
    contradicts C only if it breaks this model, by more than the tolerance or twice what the
    floor alone makes its received rate vary (``noise``). The verdict's loads are the
    offered ones."""
    if not samples:
        return LossyVerdict(analysis.judge_capacity([]), LossFloor(), (), 1)
    top = max(s.received_bps for s in samples)
    below = [s for s in samples if s.offered_bps <= top]
    floor = estimate_floor(below)
    # Then upwards, load by load, while each loses no more than the floor so far explains: a
    # link that loses most of its packets at every load carries far less than C at any load
    # measured, and its loads above the most it carried lie below C all the same.
    for s in sorted(samples, key=lambda s: s.offered_bps):
        if s in below:
            continue
        if not s.packets or clearly_above(s, floor):
            break
        below.append(s)
        floor = estimate_floor(below)
    seen: set[tuple[int, ...]] = set()
    for _ in range(_ROUNDS):
        scaled = [
            analysis.Point(floor.share(s.frames) * s.offered_bps, s.received_bps) for s in samples
        ]
        c = analysis.fit_capacity(scaled)
        chosen = tuple(
            i
            for i, s in enumerate(samples)
            if floor.share(s.frames) * s.offered_bps <= c * (1 - tol)
            and not clearly_above(s, floor)
        )
        if chosen in seen or not chosen:
            break
        seen.add(chosen)
        floor = estimate_floor([samples[i] for i in chosen])
    flags = tuple(saturated(s, floor, knee) for s in samples)
    judged = [
        analysis.Judged(floor.share(s.frames) * s.offered_bps, s.received_bps, sat, noise(s, floor))
        for s, sat in zip(samples, flags, strict=True)
    ]
    verdict = analysis.judge_capacity(judged, tol)
    if verdict.contradicting:  # back to the loads measured (to measure them again)
        by_scaled = {j.offered_bps: s.offered_bps for j, s in zip(judged, samples, strict=True)}
        verdict = analysis.CapacityVerdict(
            verdict.capacity_bps,
            verdict.reason,
            tuple(by_scaled[x] for x in verdict.contradicting),
            verdict.needs_load_above,
            verdict.lower_bound_bps,
        )
    frames = max((s.frames for s in samples if s.packets), default=1)
    return LossyVerdict(verdict, floor, flags, frames)


@dataclass(frozen=True)
class DropRate:
    """A no-drop or partial-drop rate: the load, or None with the reason."""

    rate_bps: float | None
    loss: float
    reason: str | None = None


def drop_rate(judged: LossyVerdict, samples: Sequence[Sample], loss: float, name: str) -> DropRate:
    """The highest offered load that the link carried (not saturated) with datagram loss at
    most ``loss`` (0: none lost, the floor indistinguishable from 0), capped at C: RFC 2544's
    throughput (NDR) for 0, MLRsearch's partial drop rate (PDR) otherwise. None, with the
    reason, when the floor alone loses more at every load, or no load met it."""
    lo, hi = judged.loss_floor_ci95
    limit = max(loss, NDR_FLOOR)
    if not any(s.packets for s in samples):
        return DropRate(None, loss, "no datagrams counted (TCP)")
    if lo > limit:
        what = "any" if loss == 0 else f"more than {100 * loss:.2g} %"
        return DropRate(
            None,
            loss,
            f"{name}: none: the link loses {100 * judged.loss_floor:.1f} % "
            f"[{100 * lo:.1f}, {100 * hi:.1f}] of its largest datagrams at every load "
            f"({what} allowed)",
        )
    ok = [
        s.offered_bps
        for s, sat in zip(samples, judged.saturated, strict=True)
        if s.packets and not sat and (s.lost == 0 if loss == 0 else s.lost <= loss * s.packets)
    ]
    if not ok:
        return DropRate(None, loss, f"{name}: none: no load measured lost at most {loss:.2%}")
    rate = max(ok)
    cap = judged.verdict.capacity_bps
    if cap is not None:
        rate = min(rate, cap / max(1e-9, judged.floor.share(judged.frames)))
    return DropRate(rate, loss)
