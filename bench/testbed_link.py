"""The testbed link against its targets (issue 3), with the stock tools. Run by hand, as root:

    .venv/bin/python bench/testbed_link.py [--seconds 10]

Brings the testbed up (2 Mbit/s, auto-ack, ARD 250 µs, ARC 2, no loss; secured unless
--insecure), then measures
1. idle ping RTT (56-byte payload), median             target <= 4 ms
2. UDP goodput at saturation: stock iperf3 client, 1400-byte datagrams, received rate at
   the server, as a ratio to what the air allows for that packet size    target >= 0.90
3. ping RTT p95 while 1.5x that rate is offered                           target <= 150 ms
and tears the testbed down.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import time

from longge import testbed
from longge.measure.model import udp_goodput_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions

UDP_PAYLOAD = 1400


def iperf_udp(rate: float, seconds: int) -> list[str]:
    """The stock iperf3 client: UDP, 1400-byte datagrams, to the base station's server."""
    return [
        "iperf3",
        "-c",
        "10.24.0.1",
        "-p",
        "5401",
        "-u",
        "-b",
        str(int(rate)),
        "-l",
        str(UDP_PAYLOAD),
        "-t",
        str(seconds),
        "-J",
    ]


def stock_server() -> subprocess.Popen[bytes]:
    """The stock iperf3 server in the base station's namespace, on the port iperf_udp uses."""
    return subprocess.Popen(
        ["ip", "netns", "exec", "lg-base", "iperf3", "-s", "-p", "5401"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def ns(netns: str, *cmd: str, timeout: float = 120) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", netns, *cmd], capture_output=True, text=True, timeout=timeout
    ).stdout


def rtts(out: str) -> list[float]:
    return sorted(float(x) for x in re.findall(r"time=([\d.]+)", out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument(
        "--insecure", action="store_true", help="open link (no key): what security costs"
    )
    args = ap.parse_args()
    opts = RadioOptions(rate="2M", ard_us=250, arc=2)
    overhead = 0 if args.insecure else OVERHEAD
    bound = udp_goodput_bps(opts, UDP_PAYLOAD, overhead)
    plain = udp_goodput_bps(opts, UDP_PAYLOAD)
    print(
        f"link {'open (--insecure)' if args.insecure else 'secured (ChaCha20-Poly1305)'}: "
        f"the air allows {bound / 1e3:.1f} kbit/s of 1400-byte UDP"
        + ("" if args.insecure else f" ({bound / plain:.3f} of the open link's {plain / 1e3:.1f})")
    )
    testbed.up(opts, secured=not args.insecure)
    server = stock_server()
    try:
        time.sleep(1)
        idle = rtts(ns("lg-mobile", "ping", "-c", "100", "-i", "0.05", "10.24.0.1"))
        print(
            f"idle ping RTT: median {statistics.median(idle):.2f} ms, "
            f"p95 {idle[int(0.95 * len(idle)) - 1]:.2f} ms (n={len(idle)})   target <= 4 ms"
        )
        run = json.loads(ns("lg-mobile", *iperf_udp(bound * 1.2, args.seconds)))
        got = run["end"]["sum_received"]["bits_per_second"]
        print(
            f"UDP goodput at saturation: {got / 1e3:.1f} kbit/s received of "
            f"{bound / 1e3:.1f} kbit/s the air allows: ratio {got / bound:.3f}   target >= 0.90"
        )
        time.sleep(1)
        load = subprocess.Popen(
            ["ip", "netns", "exec", "lg-mobile", *iperf_udp(bound * 1.5, args.seconds + 4)],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(2)
        loaded = rtts(
            ns("lg-mobile", "ping", "-c", str(args.seconds * 5), "-i", "0.2", "10.24.0.1")
        )
        out, _ = load.communicate(timeout=60)
        recv = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        p95 = loaded[int(0.95 * len(loaded)) - 1] if loaded else float("nan")
        print(
            f"ping RTT at 1.5x offered load ({bound * 1.5 / 1e3:.0f} kbit/s offered, "
            f"{recv / 1e3:.0f} received): median {statistics.median(loaded):.1f} ms, "
            f"p95 {p95:.1f} ms, {len(loaded)}/{args.seconds * 5} replies   target <= 150 ms"
        )
    finally:
        server.kill()
        testbed.down()


if __name__ == "__main__":
    main()
