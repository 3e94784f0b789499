"""Do LongGe's measurements agree with the stock tools? Run by hand, as root:

    .venv/bin/python bench/measure_agreement.py [--seconds 10]

On the testbed (2 Mbit/s, auto-ack, ARD 250 µs, ARC 2):
1. throughput: our trial (libiperf through python-iperf3, in its own process) and the stock
   iperf3 client at the same offered UDP loads: server-side received rates and their ratio;
2. RTT: our probes (lTest's client) and irtt at the same background load (ρ ≈ 0, 0.5, 0.9,
   1.2 of the model capacity), both at once (60-byte packets every 50 ms each): medians and
   their ratio.
Target (issue 4): RTT medians within 10 %; throughput figures the same within noise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time

from longge import testbed
from longge.measure import analysis
from longge.measure.iperf import TrialSpec, parse_result, run_trial
from longge.measure.model import udp_goodput_bps
from longge.measure.sweep import Target, probe_in
from longge.radio.options import RadioOptions

NS = "lg-mobile"


def stock_iperf(rate: int, seconds: int) -> float:
    out = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            NS,
            "iperf3",
            "-c",
            testbed.BASE_IP,
            "-p",
            str(testbed.IPERF_PORT),
            "-u",
            "-b",
            str(rate),
            "-l",
            "1400",
            "-t",
            str(seconds),
            "-J",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    )
    bps: float = json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]
    return bps


def irtt_median_ms(seconds: int, interval_ms: int) -> float:
    out = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            NS,
            "irtt",
            "client",
            "-Q",
            "-i",
            f"{interval_ms}ms",
            "-d",
            f"{seconds}s",
            "-l",
            "32",
            "-o",
            "-",
            f"{testbed.BASE_IP}:2112",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    )
    data = json.loads(out.stdout)
    return float(data["stats"]["rtt"]["median"]) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    opts = RadioOptions()
    cap = udp_goodput_bps(opts, 1400)
    testbed.up(opts)
    irtt = subprocess.Popen(
        ["ip", "netns", "exec", "lg-base", "irtt", "server", "-b", f"{testbed.BASE_IP}:2112"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    target = Target(testbed.BASE_IP, testbed.IPERF_PORT, testbed.RTT_PORT, NS)
    try:
        time.sleep(1)
        print("throughput (UDP, 1400 B):  offered   ours (libiperf)   stock iperf3   ratio")
        for rho in (0.4, 0.9, 1.3):
            rate = int(rho * cap)
            spec = TrialSpec(
                host=target.host,
                port=target.iperf_port,
                rate_bps=rate,
                duration=args.seconds,
                length=1400,
            )
            ours = parse_result(spec, run_trial(spec, NS)).received_bps
            time.sleep(1)
            stock = stock_iperf(rate, args.seconds)
            time.sleep(1)
            print(
                f"  {rate / 1e3:8.1f} kbit/s  {ours / 1e3:10.1f}  {stock / 1e3:14.1f}"
                f"   {ours / stock:6.3f}"
            )
        print("RTT medians:  ρ     ours (ms)   irtt (ms)   ratio")
        interval = 0.05
        count = int(args.seconds / interval)
        for rho in (0.0, 0.5, 0.9, 1.2):
            load = None
            if rho > 0:
                spec = TrialSpec(
                    host=target.host,
                    port=target.iperf_port,
                    rate_bps=int(rho * cap),
                    duration=2 * args.seconds + 6,
                    length=1400,
                )
                load = threading.Thread(target=run_trial, args=(spec, NS), daemon=True)
                load.start()
                time.sleep(2)
            # Both clients at once, so that they sample the same conditions.
            theirs_box: list[float] = []
            other = threading.Thread(
                target=lambda box: box.append(irtt_median_ms(args.seconds, int(interval * 1000))),
                args=(theirs_box,),
            )
            other.start()
            probes = probe_in(target, count, interval)
            other.join()
            rtts = [r["rtt_ms"] for r in probes["records"] if r["rtt_ms"] is not None]
            ours = analysis.percentile(rtts, 0.5)
            theirs = theirs_box[0] if theirs_box else float("nan")
            print(f"  {rho:4.2f}   {ours:9.2f}   {theirs:9.2f}   {ours / theirs:6.3f}")
            if load is not None:
                load.join()
            time.sleep(1)
    finally:
        irtt.kill()
        testbed.down()


if __name__ == "__main__":
    main()
