"""What link security costs in goodput, on the testbed. Run by hand, as root:

    .venv/bin/python bench/security_cost.py [--rounds 3] [--seconds 10]

Alternates an open and a secured testbed (2 Mbit/s, auto-ack, ARD 250 µs, ARC 2, no loss),
each time measuring UDP goodput at saturation with the stock iperf3 client (1400-byte
datagrams offered at 1.2x the air's bound, received rate at the server). Prints each run, the
means, the measured cost and the model's (24 bytes per packet: 48 frames instead of 47).
Target (issue 8): cost <= 3 % at 1400-byte packets.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

from testbed_link import UDP_PAYLOAD, iperf_udp, ns

from longge import testbed
from longge.measure.model import udp_goodput_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions


def saturation(secured: bool, seconds: int) -> float:
    opts = RadioOptions(rate="2M", ard_us=250, arc=2)
    testbed.up(opts, secured=secured)
    server = subprocess.Popen(
        ["ip", "netns", "exec", "lg-base", "iperf3", "-s", "-p", "5401"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1)
        run = json.loads(
            ns("lg-mobile", *iperf_udp(udp_goodput_bps(opts, UDP_PAYLOAD) * 1.2, seconds))
        )
        got: float = run["end"]["sum_received"]["bits_per_second"]
        return got
    finally:
        server.kill()
        testbed.down()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    got: dict[bool, list[float]] = {False: [], True: []}
    for r in range(args.rounds):
        for secured in (False, True):
            bps = saturation(secured, args.seconds)
            got[secured].append(bps)
            print(f"round {r + 1}: {'secured' if secured else 'open   '} {bps / 1e3:7.1f} kbit/s")
    opts = RadioOptions()
    model = 1 - udp_goodput_bps(opts, UDP_PAYLOAD, OVERHEAD) / udp_goodput_bps(opts, UDP_PAYLOAD)
    o, s = statistics.mean(got[False]), statistics.mean(got[True])
    paired = [1 - b / a for a, b in zip(got[False], got[True], strict=True)]
    print(
        f"open {o / 1e3:.1f}, secured {s / 1e3:.1f} kbit/s (means of {args.rounds}); cost: "
        f"{1 - s / o:.1%} of the means, median of the {args.rounds} paired rounds "
        f"{statistics.median(paired):.1%} (each round: "
        + " ".join(f"{c:.1%}" for c in paired)
        + f"); model {model:.1%} (48 frames instead of 47)   target <= 3 %"
    )


if __name__ == "__main__":
    main()
