"""Repeated rounds of a benchmark, summed up as median [min, max] per figure (every tool
reports so: one good run is not a result)."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def repeat(rounds: int, one_round: Callable[[], dict[str, float]]) -> list[dict[str, float]]:
    """Run ``one_round`` ``rounds`` times, saying which round runs; print the summary."""
    results = []
    for i in range(rounds):
        print(f"round {i + 1}/{rounds}", flush=True)
        results.append(one_round())
    if not results:
        return results
    print(f"over {len(results)} rounds: median [min, max]")
    width = max(len(key) for key in results[0])
    for key in results[0]:
        vals = [r[key] for r in results]
        print(f"  {key:{width}} {statistics.median(vals):9.3f} [{min(vals):.3f}, {max(vals):.3f}]")
    return results
