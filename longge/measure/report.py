"""A results summary as a few lines of text for the terminal."""

from __future__ import annotations

from typing import Any


def _k(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e3:.1f} kbit/s"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


def _floor_lines(t: dict[str, Any], ctx: dict[str, Any]) -> list[str]:
    """The loss floor, NDR and PDR of one direction (measure/floor.py)."""
    if t.get("loss_floor") is None:
        return []
    lo, hi = t.get("loss_floor_ci95") or (None, None)
    model = ctx.get("model_loss_floor")
    line = (
        f"  loss floor p0 = {_pct(t['loss_floor'])} [{_pct(lo)}, {_pct(hi)}] of "
        f"{t.get('loss_floor_datagram_bytes')}-byte datagrams, lost at every load"
    )
    if model is not None:
        line += f" (emulator's model {_pct(model)}{_beside(ctx)})"
    lines = [line]
    for name, key in (("NDR", "ndr"), (f"PDR (loss <= {_pct(t.get('pdr_loss'))})", "pdr")):
        rate = t.get(f"{key}_bps")
        why = t.get(f"{key}_reason") or ""
        lines.append(f"  {name}: {_k(rate)}" if rate is not None else f"  {why}")
    return lines


def _beside(ctx: dict[str, Any]) -> str:
    """What the model leaves out of a run (its context's interferers)."""
    wifi = (ctx.get("emulator") or {}).get("interferers")
    return "; the model leaves out the Wi-Fi interferer" if wifi else ""


def _mobiles_lines(t: dict[str, Any]) -> list[str]:
    """tTest --mobiles: each load's rate per mobile and Jain's index, and each mobile's share
    of the saturated loads."""
    names = t.get("mobiles")
    if not names:
        return []
    lines = [
        f"  {len(names)} mobiles at once ({', '.join(names)}), each an equal part of the load:"
    ]
    for p in t.get("points", []):
        each = p.get("mobiles_bps")
        if each:
            jain = p.get("jain_index")
            loss = p.get("mobiles_loss")
            lines.append(
                f"  {_k(p['offered_bps']):>14}  per mobile "
                + " / ".join(f"{x / 1e3:.1f}" for x in each)
                + " kbit/s"
                + (
                    ""
                    if not loss
                    else ", loss "
                    + " / ".join("-" if x is None else f"{100 * x:.1f}" for x in loss)
                    + " %"
                )
                + ("" if jain is None else f", Jain {jain:.3f}")
            )
    shares = t.get("mobile_shares")
    if shares:
        lines.append(
            "  shares of the saturated loads "
            + " / ".join(f"{x:.3f}" for x in shares)
            + f", Jain {t['mobiles_jain']:.3f}"
        )
    return lines


def _ttest_lines(t: dict[str, Any], model: float | None, note: str = "") -> list[str]:
    lines = ["  offered        received       efficiency  ρ      loss (95% CI)"]
    for p in t.get("points", []):
        ci = p.get("loss_ci95")
        loss = (
            "-"
            if p.get("loss") is None
            else (f"{100 * p['loss']:.2f}% ({100 * ci[0]:.2f}–{100 * ci[1]:.2f})")
        )
        rho = "-" if p.get("rho") is None else f"{p['rho']:.2f}"
        lines.append(
            f"  {_k(p['offered_bps']):>14} {_k(p['received_bps']):>14}  "
            f"{p['efficiency']:9.3f}  {rho:>5}  {loss}"
        )
    cap = t.get("capacity_bps")
    line = f"  capacity C = {_k(cap)}"
    if cap is None:
        line = f"  no capacity: {t.get('capacity_reason') or 'no trial succeeded'}"
    if model and cap:
        line += f"  (emulator's model {_k(model)}: ratio {cap / model:.3f}{note})"
    lines.append(line)
    if cap is not None and t.get("capacity_reason"):
        lines.append(f"  ({t['capacity_reason']})")
    lines += _mobiles_lines(t)
    sat = t.get("saturation")
    if sat:
        lines.append(f"  saturation at {_k(sat['offered_bps'])} offered, ρ = {sat['rho']:.2f}")
    running = t.get("capacity_running_bps")
    if running:
        ratio = f" (ratio {running / model:.3f})" if model else ""
        lines.append(
            f"  the emulated air stood still {100 * t['capacity_air_still_share']:.0f} % of the "
            "saturated trials' time, waiting for radio processes this machine ran late: C is "
            f"partly this machine's CPU; per second the air ran, {_k(running)}{ratio}"
        )
    return lines


def summary_text(s: dict[str, Any]) -> str:
    lines: list[str] = []
    ctx = s.get("context", {})
    model = ctx.get("model_capacity_bps")
    if s.get("kind") == "tTest" or s.get("ttest"):
        t = s if s.get("kind") == "tTest" else s["ttest"]
        ways = [(t.get("direction_label", "mobile -> base"), t)]
        if t.get("direction") == "both" and "reverse" in t:
            ways = [("mobile -> base", t), ("base -> mobile", t["reverse"])]
        for label, way in ways:
            lines.append(f"  {label}:")
            lines += _ttest_lines(way, model, _beside(ctx))
            lines += _floor_lines(way, ctx)
    if s.get("kind") == "lTest":
        lines.append(f"  load {s.get('direction_label', 'mobile -> base')}")
        lines.append(
            f"  idle baseline RTT {s.get('baseline_rtt_ms', float('nan')):.2f} ms; "
            f"capacity {_k(s.get('capacity_bps'))} ({s.get('capacity_source', '')})"
        )
        lines.append(
            "  ρ      received       RTT median    p95      p99      max     probes lost"
            "   queue delay p50 / p95"
        )
        for lv in s.get("levels", []):
            q50, q95 = lv.get("queue_delay_p50_ms"), lv.get("queue_delay_p95_ms")
            queue = "" if q50 is None else f"   {q50:7.1f} / {q95:.1f} ms"
            lines.append(
                f"  {lv['rho']:4.2f} {_k(lv['received_bps']):>14} {lv['rtt_median_ms']:9.1f} ms "
                f"{lv['rtt_p95_ms']:7.1f} {lv['rtt_p99_ms']:8.1f} {lv['rtt_max_ms'] or 0:8.1f} "
                f"{lv['probes_lost']:5d}/{lv['probes_sent']}{queue}"
            )
        if s.get("mobiles"):
            lines.append(
                f"  {len(s['mobiles'])} mobiles at once ({', '.join(s['mobiles'])}): each "
                "probed; p95 per mobile (ms):"
            )
            for lv in s.get("levels", []):
                each = lv.get("mobiles_rtt_p95_ms") or []
                lines.append(
                    f"  {lv['rho']:4.2f}  "
                    + " / ".join("lost" if x is None else f"{x:.1f}" for x in each)
                )

        if s.get("probe_loss_floor") is not None:
            beyond = [lv["rho"] for lv in s.get("levels", []) if lv.get("probes_lost_beyond_floor")]
            lines.append(
                f"  the link's loss floor loses {_pct(s['probe_loss_floor'])} of probes (request "
                f"and reply) at every load; probes lost beyond it at ρ = "
                + (", ".join(f"{r:.2f}" for r in beyond) if beyond else "none")
            )
        lines.append(f"  latency knee: {_rho(s.get('knee_rho'))} ({s.get('knee_rule', '')})")
        if "probe_knee_rho" in s:
            lines.append(f"  probe RTT leaves its baseline: {_rho(s.get('probe_knee_rho'))}")
    lines += _steal_lines(s)
    lines += _emulator_lines(s)
    if s.get("error"):
        lines.append(f"  ERROR: {s['error']}")
    if s.get("interrupted"):
        lines.append("  (interrupted)")
    return "\n".join(lines)


def _rho(knee: float | None) -> str:
    return "none up to the highest ρ" if knee is None else f"ρ = {knee:.2f}"


def _emulator_lines(s: dict[str, Any]) -> list[str]:
    """The emulated air's health next to the figures: how often the world paused, and why."""
    e = s.get("emulator")
    if not e:
        return []
    froze = e.get("trial_frozen_ms", e.get("level_frozen_ms", 0.0)) or 0.0
    count = e.get("trial_freezes", e.get("level_freezes", 0)) or 0
    lag = e.get("lag_us") or {}
    return [
        f"  emulated air ({e.get('server')}, {e.get('scheduling')}): stood still {count} times, "
        f"{froze:.0f} ms in all during the measurements (the machine held it back; a trial over "
        f"{100 * e.get('frozen_limit', 0):.0f} % is measured again); lag p99 "
        f"{lag.get('p99_us', 0):.0f} µs, max {lag.get('max_us', 0):.0f} µs"
    ]


def _steal_lines(s: dict[str, Any]) -> list[str]:
    """Say so when the hypervisor took CPU time during the run (see longge.measure.cpu)."""
    parts = [("tTest", s["ttest"])] if s.get("ttest") else []
    parts.append((s.get("kind", "run"), s))
    out = []
    for name, part in parts:
        steal = part.get("cpu_steal")
        if not steal or steal.get("max", 0.0) <= steal.get("limit", 1.0):
            continue
        repeated = steal.get("trials_repeated", 0)
        levels = steal.get("levels_over_limit", [])
        detail = f"; {repeated} trial(s) repeated" if repeated else ""
        if levels:
            detail += "; less sure at ρ = " + ", ".join(f"{r:.2f}" for r in levels)
        out.append(
            f"  note: the hypervisor took up to {100 * steal['max']:.0f} % of this machine's CPU "
            f"time during the {name}{detail}"
        )
    return out


def _grid_floor(r: dict[str, Any]) -> str:
    """A grid row's loss floor with its interval (rows from before it was measured: none)."""
    p0, lo, hi = (r.get(k) for k in ("loss_floor", "loss_floor_low", "loss_floor_high"))
    if not all(isinstance(x, int | float) for x in (p0, lo, hi)):
        return ""
    return f"  {_pct(p0)} [{_pct(lo)}, {_pct(hi)}]"


def tune_text(summary: dict[str, Any]) -> str:
    """A tune summary as the terminal shows it: the grid, the rule, the recommendation."""
    lines = [
        f"  idle RTT {summary['idle_rtt_ms']:.1f} ms; q from the emulator's settings "
        f"{summary['q_hint']:.3f}",
        "  ARD µs ARC  capacity  model     q meas  RTT p95 ρ.5  ρ.9   loss ρ.9  loss floor",
    ]
    for r in summary["grid"]:
        if r.get("error"):
            lines.append(f"  {int(r['ard_us']):6d} {int(r['arc']):3d}  error: {r['error']}")
            continue
        lines.append(
            f"  {int(r['ard_us']):6d} {int(r['arc']):3d}  {r['capacity_bps'] / 1e3:7.1f}  "
            f"{r['model_capacity_bps'] / 1e3:7.1f}  {r['q_measured']:7.3f}  "
            f"{r['rtt_p95_05_ms']:9.1f} {r['rtt_p95_09_ms']:6.1f}  {100 * r['loss_09']:7.2f}%"
            + _grid_floor(r)
            + (f"  not counted: {r['disturbed']}" if r.get("disturbed") else "")
        )
    best = summary.get("recommendation")
    if best is None and summary["grid"]:
        lines.append("  no recommendation: no grid point was measured undisturbed and whole")
    lines.append(
        f"  rule: {summary['rule']}" + ("" if summary["rule_met"] else " (no point met it)")
    )
    if best:
        if summary.get("why"):
            lines.append(f"  why: {summary['why']}")
        lines.append(
            f"  recommended: ARD {int(best['ard_us'])} µs, ARC {int(best['arc'])} -> "
            f"{summary['apply']}"
        )
    if summary.get("mode_verdict"):
        lines.append(f"  vs stream mode: {summary['mode_verdict']}")
    return "\n".join(lines)
