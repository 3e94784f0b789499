"""The testbed link against its targets (issue 3), with the stock tools. Run by hand, as root:

    .venv/bin/python -m tools.testbed_link [--seconds 10]

Brings the testbed up (2 Mbit/s, auto-ack, ARD 250 µs, ARC 2, no loss; secured unless
--insecure), then measures
1. idle ping RTT (56-byte payload), median, next to the air's own time for the exchange
   (measure.model.ping_air_ms)                           target: within 0.6 ms of it
2. UDP goodput at saturation: stock iperf3 client, 1400-byte datagrams, received rate at
   the server, as a ratio to what the air allows for that packet size    target >= 0.97
   with the CPU each emulator process used meanwhile (air <= 10 % of a core, each busy
   radio process <= 15 %), and how often the air froze
3. ping RTT p95 while 1.5x that rate is offered                           target <= 150 ms
and tears the testbed down. --rounds N repeats it all and prints the median and spread (with
--mode stream: in stream mode, against stream mode's model; its targets are stream_link's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import time

from longge import testbed
from longge.air.wire import query
from longge.measure.cpu import StealMeter, process_cpu_s
from longge.measure.model import ping_air_ms, udp_goodput_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions
from tools.rounds import repeat

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


def emulator_processes() -> dict[str, int]:
    """The air and each daemon's radio processes (children of the daemons), by role."""
    state = json.loads(testbed.paths()["state"].read_text())
    pids = state["pids"]
    out = {"air": pids["air"]}
    for role in ("base", "mobile"):
        kids = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                with contextlib.suppress(OSError):
                    with open(f"/proc/{d}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    if ppid == pids[role]:
                        kids.append(int(d))
        # the daemon forks its TX process first, then its RX process
        for name, pid in zip(("tx", "rx"), sorted(kids), strict=False):
            out[f"{role}-{name}"] = pid
    return out


def one_round(opts: RadioOptions, bound: float, secured: bool, seconds: int) -> dict[str, float]:
    testbed.up(testbed.TestbedSpec(opts, secured=secured))
    server = stock_server()
    air_path = str(testbed.paths()["air"])
    try:
        time.sleep(1)
        idle = rtts(ns("lg-mobile", "ping", "-c", "100", "-i", "0.05", "10.24.0.1"))
        model_ping = ping_air_ms(opts, OVERHEAD if secured else 0)
        procs = emulator_processes()
        before = {k: process_cpu_s(p) for k, p in procs.items()}
        air0 = query(air_path)
        steal = StealMeter()
        t0 = time.monotonic()
        run = json.loads(ns("lg-mobile", *iperf_udp(bound * 1.5, seconds)))
        span = time.monotonic() - t0
        cpu = {k: (process_cpu_s(p) - before[k]) / span for k, p in procs.items()}
        air1 = query(air_path)
        got = run["end"]["sum_received"]["bits_per_second"]

        def counter(radio: str, key: str) -> float:
            return float(
                air1["air"]["radios"].get(radio, {}).get(key, 0)
                - air0["air"]["radios"].get(radio, {}).get(key, 0)
            )

        r = {
            "idle_ping_median_ms": statistics.median(idle),
            "ping_air_ms": model_ping,
            "goodput_ratio": got / bound,
            "cpu_steal": steal.share(),
            "freezes": air1["freezes"] - air0["freezes"],
            "frozen_ms": air1["frozen_ms"] - air0["frozen_ms"],
            "rx_fifo_full": counter("base-rx", "rx_fifo_full"),
            "retransmissions": counter("mobile-tx", "retransmissions"),
            "max_rt": counter("mobile-tx", "max_rt"),
            **{f"cpu_{k}": v for k, v in cpu.items()},
        }
        print(
            f"  idle ping median {r['idle_ping_median_ms']:.2f} ms (air's own time "
            f"{model_ping:.2f} ms: +{r['idle_ping_median_ms'] - model_ping:.2f}); UDP at 1.5x: "
            f"{got / 1e3:.1f} kbit/s = {got / bound:.3f} of the model; CPU "
            + ", ".join(f"{k} {100 * v:.1f} %" for k, v in cpu.items())
            + f"; base RX FIFO full {r['rx_fifo_full']:.0f}x, uplink retransmissions "
            f"{r['retransmissions']:.0f}, MAX_RT {r['max_rt']:.0f}"
            + f"; air froze {r['freezes']}x ({r['frozen_ms']:.1f} ms); steal "
            f"{100 * r['cpu_steal']:.1f} %",
            flush=True,
        )
        return r
    finally:
        server.kill()
        testbed.down()


def rounds_main(args: argparse.Namespace) -> None:
    opts = RadioOptions(rate="2M", ard_us=250, arc=2, mode=args.mode)
    bound = udp_goodput_bps(opts, UDP_PAYLOAD, 0 if args.insecure else OVERHEAD)
    repeat(args.rounds, lambda: one_round(opts, bound, not args.insecure, args.seconds))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument(
        "--insecure", action="store_true", help="open link (no key): what security costs"
    )
    ap.add_argument("--rounds", type=int, default=0, help="repeat the emulator figures N times")
    ap.add_argument(
        "--mode", choices=("esb", "stream"), default="esb", help="with --rounds: the link mode"
    )
    args = ap.parse_args()
    if args.rounds:
        rounds_main(args)
        return
    opts = RadioOptions(rate="2M", ard_us=250, arc=2)
    overhead = 0 if args.insecure else OVERHEAD
    bound = udp_goodput_bps(opts, UDP_PAYLOAD, overhead)
    plain = udp_goodput_bps(opts, UDP_PAYLOAD)
    print(
        f"link {'open (--insecure)' if args.insecure else 'secured (ChaCha20-Poly1305)'}: "
        f"the air allows {bound / 1e3:.1f} kbit/s of 1400-byte UDP"
        + ("" if args.insecure else f" ({bound / plain:.3f} of the open link's {plain / 1e3:.1f})")
    )
    testbed.up(testbed.TestbedSpec(opts, secured=not args.insecure))
    server = stock_server()
    try:
        time.sleep(1)
        idle = rtts(ns("lg-mobile", "ping", "-c", "100", "-i", "0.05", "10.24.0.1"))
        air_ms = ping_air_ms(opts, overhead)
        print(
            f"idle ping RTT: median {statistics.median(idle):.2f} ms, "
            f"p95 {idle[int(0.95 * len(idle)) - 1]:.2f} ms (n={len(idle)}); the air's own time "
            f"{air_ms:.2f} ms: +{statistics.median(idle) - air_ms:.2f}   target: within 0.6 ms"
        )
        run = json.loads(ns("lg-mobile", *iperf_udp(bound * 1.5, args.seconds)))
        got = run["end"]["sum_received"]["bits_per_second"]
        print(
            f"UDP goodput at 1.5x: {got / 1e3:.1f} kbit/s received of "
            f"{bound / 1e3:.1f} kbit/s the air allows: ratio {got / bound:.3f}   target >= 0.97"
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
