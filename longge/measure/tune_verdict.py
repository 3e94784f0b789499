"""tune's verdicts: which ARD/ARC setting it recommends, and why in one line (a setting that
loses more than the PDR loss at every load is never chosen while another keeps below it), and
the best ESB setting against stream mode. Plain functions of the grid's rows (tune.py) and
the plan's limits (tune_plan.py)."""

from __future__ import annotations

import math
from typing import Any

from longge.measure.tune_plan import TunePlan


def _floor(r: dict[str, Any]) -> float:
    """A grid row's loss floor (rows from before the floor was measured: their loss at ρ 0.9,
    which holds the floor and more)."""
    for key in ("loss_floor", "loss_09"):
        v = r.get(key)
        if isinstance(v, int | float) and math.isfinite(v):
            return float(v)
    return math.inf


def recommend(
    ok: list[dict[str, Any]], plan: TunePlan, idle_ms: float
) -> tuple[dict[str, Any] | None, str, bool]:
    """(the recommended row, why in one line, whether it met the loss and RTT rule). A setting
    that loses more than ``plan.pdr_loss`` of its packets at every load is never chosen while
    another keeps its floor below that, whatever its capacity."""
    if not ok:
        return None, "no setting was measured", False
    floor_ok = [r for r in ok if _floor(r) <= plan.pdr_loss]
    pool = floor_ok or [min(ok, key=_floor)]
    limit = max(plan.max_rtt_factor * idle_ms, idle_ms + 25)
    good = [r for r in pool if (r["loss_09"] or 0) <= plan.max_loss and r["rtt_p95_09_ms"] <= limit]
    best = max(good or pool, key=lambda r: r["capacity_bps"])
    name = f"ARD {int(best['ard_us'])} µs, ARC {int(best['arc'])}"
    cap = f"{best['capacity_bps'] / 1e3:.0f} kbit/s"
    if not floor_ok:
        why = (
            f"{name}: every setting loses more than {plan.pdr_loss:.1%} of its datagrams at "
            f"every load; this one the least ({_floor(best):.2%}, C {cap}): more retries (ARC) "
            "would lose less"
        )
    else:
        dropped = len(ok) - len(floor_ok)
        lossy = f"; {dropped} setting(s) left out for losing more at every load" if dropped else ""
        met = (
            f"datagram loss at ρ 0.9 {best['loss_09']:.2%} and RTT p95 {best['rtt_p95_09_ms']:.1f} "
            "ms within the limits"
            if good
            else "no setting met the loss and RTT limits at ρ 0.9"
        )
        why = (
            f"{name}: the highest capacity ({cap}) of the {len(floor_ok)} setting(s) whose loss "
            f"floor is at most {plan.pdr_loss:.1%} (this one {_floor(best):.2%}){lossy}; {met}"
        )
    return best, why, bool(good)


def mode_verdict(best: dict[str, Any] | None, stream: dict[str, Any] | None) -> str | None:
    """The best ESB setting against stream mode, in one line (None: not compared)."""
    if stream is None:
        return None
    if stream.get("error") or best is None:
        return f"not compared: {stream.get('error') or 'no ESB point measured'}"
    losses = (stream.get("loss_09"), best.get("loss_09"))
    if not all(isinstance(x, int | float) and math.isfinite(x) for x in losses):
        return "not compared: datagram loss at ρ 0.9 unknown (no datagrams counted there)"
    if not best.get("capacity_bps"):
        return "not compared: the best ESB point carried nothing"
    ratio = stream["capacity_bps"] / best["capacity_bps"]
    lines = (
        f"stream mode carries {stream['capacity_bps'] / 1e3:.0f} kbit/s = {ratio:.2f}x the best "
        f"ESB setting's {best['capacity_bps'] / 1e3:.0f} (ARD {int(best['ard_us'])} µs, ARC "
        f"{int(best['arc'])}); RTT p95 at ρ 0.9 {stream['rtt_p95_09_ms']:.1f} vs "
        f"{best['rtt_p95_09_ms']:.1f} ms, datagram loss at ρ 0.9 {stream['loss_09']:.2%} vs "
        f"{best['loss_09']:.2%}"
    )
    better = ratio > 1 and stream["loss_09"] <= max(best["loss_09"], 0.001)
    return lines + (
        ': stream mode is the faster link here (radio.mode = "stream" on both nodes)'
        if better
        else ": ESB is the better choice here"
    )
