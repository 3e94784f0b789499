"""Emulator fidelity benchmark: radio-bench at every rate, with and without auto-ack, and
under loss at two retry settings; prints measured / datasheet-model ratios.

Run by hand:  .venv/bin/python -m tools.radio_bounds [--seconds 5] [--markdown]
Targets (issue 2): ratio within ±3 % without loss, ±5 % under loss; emulator lag p99 < 1 ms.
"""

from __future__ import annotations

import argparse

from longge.radio.options import RadioOptions
from longge.radiobench import BenchPlan, run_bench

CASES: list[tuple[str, dict[str, object]]] = [
    ("2M auto-ack", {"rate": "2M"}),
    ("2M no-ack", {"rate": "2M", "auto_ack": False}),
    ("1M auto-ack", {"rate": "1M"}),
    ("1M no-ack", {"rate": "1M", "auto_ack": False}),
    ("250k auto-ack", {"rate": "250k", "ard_us": 500}),
    ("250k no-ack", {"rate": "250k", "auto_ack": False}),
    ("2M q=0.1 ARD 250/ARC 2", {"rate": "2M", "per": 0.1, "ack_per": 0.0}),
    (
        "2M q=0.1 ARD 2500/ARC 15",
        {"rate": "2M", "per": 0.1, "ack_per": 0.0, "ard_us": 2500, "arc": 15},
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = []
    for label, kw in CASES:
        r = run_bench(BenchPlan(RadioOptions(**kw), seconds=args.seconds))  # type: ignore[arg-type]
        rows.append((label, r.throughput_bps / 1e3, r.model_bps / 1e3, r.ratio, r.lag["p99_us"]))
        if not args.markdown:
            print(
                f"{label:28s} {rows[-1][1]:8.1f} kbit/s  model {rows[-1][2]:8.1f}  "
                f"ratio {rows[-1][3]:.3f}  lag p99 {rows[-1][4]:.0f} µs",
                flush=True,
            )
    if args.markdown:
        print("| configuration | measured kbit/s | model kbit/s | ratio | emulator lag p99 |")
        print("|---|---|---|---|---|")
        for label, m, b, ratio, lag in rows:
            print(f"| {label} | {m:.1f} | {b:.1f} | {ratio:.3f} | {lag:.0f} µs |")


if __name__ == "__main__":
    main()
