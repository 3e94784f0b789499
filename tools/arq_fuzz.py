"""Many random runs of the stream-mode ARQ under the packet layer, beyond what the property
tests try in one suite run. Run by hand:

    .venv/bin/python -m tools.arq_fuzz [--runs 4000] [--variant flip|mix] [--first 0]

Each run is ``tests/test_arq.py``'s simulated link (Fragmenter -> ArqSender -> a bad channel
-> ArqReceiver -> Reassembler, ACKs back over a bad channel) for 5 simulated seconds, with a
random set of 1-60 packets (sizes 1 to 400 bytes, many of one frame). ``flip``: 5 % of frames
lost and 5 % damaged past the radio's CRC, both ways; ``mix``: 10 % lost, 5 % damaged, 10 %
duplicated, 10 % reordered. Every run must deliver each packet whole, in order, at most once
(``check_delivery``); a failing run is printed with its number, which ``--first N --runs 1``
replays. Also counted: runs whose sender was not done in the 5 s (a stall; not a failure by
itself: at these rates a run may need longer) (docs/measurements.md, "damaged sequence
numbers").
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
link = importlib.import_module("test_arq")  # the tests' simulated link, not a copy of it

SIZES = (1, 2, 5, 20, 24, 60, 400)  # bytes before the 4-byte tag that makes each unique


def one_run(k: int, variant: str) -> tuple[str | None, bool]:
    """The failure of run ``k`` (or None), and whether its sender was done in the time (every
    frame acknowledged: the link did not stall)."""
    meta = random.Random(f"{variant}-{k}")
    tag = k.to_bytes(4, "big")
    packets = [
        bytes(meta.randrange(256) for _ in range(meta.choice(SIZES))) + tag + i.to_bytes(2, "big")
        for i in range(meta.randint(1, 60))
    ]
    rng = random.Random(k)
    if variant == "flip":
        kw = {"loss": 0.05, "flip": 0.05}
    else:
        kw = {"loss": 0.1, "flip": 0.05, "dup": 0.1, "reorder": 0.1}
    run = link.Run(packets)
    link.run_link(run, link.Channel(rng, **kw), link.Channel(rng, **kw), seconds=5.0)
    try:
        link.check_delivery(run, complete=False)
    except AssertionError as exc:
        return str(exc), run.done()
    return None, run.done()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4000)
    ap.add_argument("--variant", choices=("flip", "mix"), default="mix")
    ap.add_argument("--first", type=int, default=0, help="number of the first run")
    ns = ap.parse_args()
    failed = unfinished = 0
    for k in range(ns.first, ns.first + ns.runs):
        why, done = one_run(k, ns.variant)
        unfinished += not done
        if why is not None:
            failed += 1
            print(f"run {k}: {why}", flush=True)
    print(f"{ns.variant}: {ns.runs} runs, {failed} failed; {unfinished} not done in 5 s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
