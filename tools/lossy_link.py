"""Issue 38's checks as a user runs them: ``./run.sh tTest|lTest|tune --quick`` on lossy
emulated channels, each run from scratch (the run brings its testbed up and down), summarised
against the lossy model (measure/model.py). Run by hand, as root:

    .venv/bin/python -m tools.lossy_link [--rounds 5] [--only ttest5,ltest5,stream10,clean,tune10]

- ttest5:   tTest --quick --per 0.05 (ESB, ARD 250, ARC 2): C / the lossy model's C (target
            0.95..1.05, 5 of 5), the model's floor (4.35 %) inside the run's loss_floor_ci95
            (4 of 5)
- ltest5:   lTest --quick --per 0.05: capacity, baseline RTT and knee given (5 of 5)
- stream10: tTest --quick --mode stream --per 0.1: C / the lossy model (0.95..1.05)
- clean:    tTest --quick: C / the model (0.97..1.03), NDR / C
- tune10:   tune --quick --per 0.1: each grid point's C / its lossy model (0.9..1.1), its floor,
            and whether the recommendation has a floor at most the PDR loss

Each line is one run; the medians and spreads follow. A run that failed says why.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from longge.measure.model import lossy_model
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions

ROOT = Path(__file__).resolve().parents[1]


def run(args: list[str]) -> dict[str, Any]:
    """``./run.sh ARGS --out DIR`` (a fresh folder): its summary.json, or {"error": ...}."""
    out = Path(tempfile.mkdtemp(prefix="longge-lossy-"))
    started = time.time()
    done = subprocess.run(
        [str(ROOT / "run.sh"), *args, "--out", str(out / "r")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    try:
        summary: dict[str, Any] = json.loads((out / "r" / "summary.json").read_text())
    except (OSError, ValueError):
        return {"error": f"exit {done.returncode}: {done.stderr[-400:]}"}
    summary["_seconds"] = round(time.time() - started)
    summary["_folder"] = str(out / "r")
    return summary


def model(opts: RadioOptions, per: float) -> tuple[float, float]:
    return lossy_model(opts, per, per, 1.0, 1400, OVERHEAD)


def ttest5(s: dict[str, Any]) -> dict[str, Any]:
    c, floor = model(RadioOptions(), 0.05)
    cap, ci = s.get("capacity_bps"), s.get("loss_floor_ci95") or [None, None]
    return {
        "capacity_kbps": None if cap is None else round(cap / 1e3, 1),
        "ratio": None if cap is None else round(cap / c, 3),
        "loss_floor": s.get("loss_floor"),
        "ci95": ci,
        "model_floor_inside": ci[0] is not None and ci[0] <= floor <= ci[1],
        "reason": s.get("capacity_reason"),
    }


def ltest5(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "capacity_kbps": None if not s.get("capacity_bps") else round(s["capacity_bps"] / 1e3, 1),
        "baseline_ms": s.get("baseline_rtt_ms"),
        "knee_rho": s.get("knee_rho"),
        "error": s.get("error"),
    }


def stream10(s: dict[str, Any]) -> dict[str, Any]:
    c, _ = model(RadioOptions(mode="stream"), 0.1)
    cap = s.get("capacity_bps")
    return {
        "capacity_kbps": None if cap is None else round(cap / 1e3, 1),
        "ratio": None if cap is None else round(cap / c, 3),
        "printed_model_kbps": round(s["context"]["model_capacity_bps"] / 1e3, 1),
        "reason": s.get("capacity_reason"),
    }


def clean(s: dict[str, Any]) -> dict[str, Any]:
    c, _ = model(RadioOptions(), 0.0)
    cap = s.get("capacity_bps")
    return {
        "capacity_kbps": None if cap is None else round(cap / 1e3, 1),
        "ratio": None if cap is None else round(cap / c, 3),
        "ndr_over_c": None if not cap or s.get("ndr_bps") is None else round(s["ndr_bps"] / cap, 3),
    }


def tune10(s: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for r in s.get("grid", []):
        opts = RadioOptions(ard_us=int(r["ard_us"]), arc=int(r["arc"]))
        c, floor = model(opts, 0.1)
        rows.append(
            {
                "ard_arc": f"{int(r['ard_us'])}/{int(r['arc'])}",
                "ratio": None if not r.get("capacity_bps") else round(r["capacity_bps"] / c, 3),
                "loss_floor": r.get("loss_floor"),
                "model_floor": round(floor, 4),
                "error": r.get("error") or None,
            }
        )
    best = s.get("recommendation") or {}
    return {
        "grid": rows,
        "recommended": f"{best.get('ard_us')}/{best.get('arc')}",
        "recommended_floor": best.get("loss_floor"),
        "why": s.get("why"),
    }


CHECKS = {
    "ttest5": (["tTest", "--quick", "--per", "0.05"], ttest5),
    "ltest5": (["lTest", "--quick", "--per", "0.05"], ltest5),
    "stream10": (["tTest", "--quick", "--mode", "stream", "--per", "0.1"], stream10),
    "clean": (["tTest", "--quick"], clean),
    "tune10": (["tune", "--quick", "--per", "0.1"], tune10),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", default=",".join(CHECKS), help="checks, comma separated")
    p.add_argument(
        "--vary-seed",
        action="store_true",
        help="round N runs with --seed N (the air's losses drawn anew: without it every round "
        "meets the same frame fates, as a user rerunning the same command does)",
    )
    ns = p.parse_args()
    for name in ns.only.split(","):
        args, judge = CHECKS[name]
        ratios = []
        for i in range(ns.rounds):
            s = run([*args, "--seed", str(i + 1)] if ns.vary_seed else args)
            line = {"error": s["error"]} if "error" in s and "kind" not in s else judge(s)
            line.update(round=i + 1, seconds=s.get("_seconds"), folder=s.get("_folder"))
            print(f"{name} {json.dumps(line)}", flush=True)
            if isinstance(line.get("ratio"), float):
                ratios.append(line["ratio"])
        if ratios:
            print(
                f"{name} ratio median {statistics.median(ratios):.3f} "
                f"[{min(ratios):.3f}, {max(ratios):.3f}] over {len(ratios)} runs "
                f"({' '.join(args)}{', --seed 1..N' if ns.vary_seed else ''})",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
