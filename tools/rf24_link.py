"""The rf24 backend (the real pyrf24 on emulated chips) against the sim backend, in the same
run (issue 17's target: UDP goodput at saturation >= 0.95 of sim's), with the Pi's SPI timing
on and off. Run by hand, as root:

    .venv/bin/python -m tools.rf24_link [--seconds 10] [--rounds 3] [--mode esb|stream]

Each round brings the testbed up three times (sim; rf24 with LONGGE_SPI_TIMING=pi, the
default; rf24 with it off), offers stock iperf3 1400-byte UDP at 1.5x the model's bound for
--seconds, and prints what the base station received, as a ratio to the model and to sim's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

from longge import testbed
from longge.measure.model import udp_goodput_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions
from tools.rounds import repeat
from tools.testbed_link import UDP_PAYLOAD, iperf_udp, ns, stock_server

VARIANTS = (("sim", False, "pi"), ("rf24 Pi SPI", True, "pi"), ("rf24 no SPI time", True, "off"))


def goodput(opts: RadioOptions, rf24: bool, timing: str, bound: float, seconds: int) -> float:
    os.environ["LONGGE_SPI_TIMING"] = timing  # the daemons inherit it (testbed.up)
    testbed.up(testbed.TestbedSpec(opts, rf24=rf24))
    server = stock_server()
    try:
        time.sleep(1)
        run = json.loads(ns("lg-mobile", *iperf_udp(bound * 1.5, seconds)))
        return float(run["end"]["sum_received"]["bits_per_second"])
    finally:
        server.kill()
        testbed.down()


def one_round(opts: RadioOptions, bound: float, seconds: int) -> dict[str, float]:
    got = {name: goodput(opts, rf24, timing, bound, seconds) for name, rf24, timing in VARIANTS}
    r = {f"{name}: of model": bps / bound for name, bps in got.items()}
    for name in got:
        if name != "sim":
            r[f"{name}: of sim"] = got[name] / got["sim"]
    print(
        "  " + "; ".join(f"{n} {b / 1e3:.1f} kbit/s" for n, b in got.items()),
        flush=True,
    )
    return r


def rounds_of(one: Callable[[RadioOptions, float, int], dict[str, float]]) -> None:
    """The command line of the rf24 tools (``--seconds``, ``--rounds``, ``--mode``): print the
    model's bound, then repeat ``one(options, bound, seconds)`` and print each figure's spread."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mode", choices=("esb", "stream"), default="esb")
    args = ap.parse_args()
    opts = RadioOptions(mode=args.mode)
    bound = udp_goodput_bps(opts, UDP_PAYLOAD, OVERHEAD)
    print(f"model bound: {bound / 1e3:.1f} kbit/s of 1400-byte UDP ({args.mode})", flush=True)
    repeat(args.rounds, lambda: one(opts, bound, args.seconds))


def main() -> None:
    rounds_of(one_round)


if __name__ == "__main__":
    main()
