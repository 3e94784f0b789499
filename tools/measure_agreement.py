"""Do LongGe's measurements agree with the stock tools? Run by hand, as root:

    .venv/bin/python -m tools.measure_agreement [--seconds 10]

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
from longge.measure import analysis, rtt
from longge.measure.cpu import StealMeter
from longge.measure.iperf import TrialSpec, parse_result, run_trial
from longge.measure.link import Target
from longge.measure.loadprobe import probe_in
from longge.measure.model import udp_goodput_bps
from longge.protocol.secure import OVERHEAD
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


def irtt_rtts_ms(
    seconds: float, interval_ms: int, netns: str | None = NS, server: str = ""
) -> list[float]:
    """Every RTT irtt measured (its own definition: receive − send − server processing)."""
    cmd = [
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
        server or f"{testbed.BASE_IP}:2112",
    ]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
    data = json.loads(out.stdout)
    return [
        rt["delay"]["rtt"] / 1e6
        for rt in data.get("round_trips") or []
        if rt.get("delay", {}).get("rtt") is not None
    ]


def loopback_floor(seconds: float = 5) -> tuple[float, float]:
    """Median RTT of each tool over loopback: what the tool itself adds (wake-up, stamping)."""
    stop = threading.Event()
    srv = threading.Thread(target=rtt.serve, args=("127.0.0.1", 7779, None, stop), daemon=True)
    srv.start()
    irtt = subprocess.Popen(
        ["irtt", "server", "-b", "127.0.0.1:2119"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        theirs = irtt_rtts_ms(seconds, 50, None, "127.0.0.1:2119")
        ours = list(rtt.probe("127.0.0.1", 7779, int(seconds / 0.05), 0.05).rtt_ms.values())
    finally:
        irtt.kill()
        stop.set()
    return analysis.percentile(ours, 0.5), analysis.percentile(theirs, 0.5)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10, help="per throughput trial")
    ap.add_argument("--rtt-seconds", type=int, default=0, help="per RTT level (default --seconds)")
    ap.add_argument("--rho", default="0,0.5,0.9,1.2", help="RTT levels, comma-separated")
    ap.add_argument("--no-throughput", action="store_true")
    args = ap.parse_args()
    rtt_seconds = args.rtt_seconds or args.seconds
    rhos = [float(x) for x in args.rho.split(",")]
    lo_ours, lo_theirs = loopback_floor()
    print(f"loopback floor (median): ours {lo_ours:.3f} ms, irtt {lo_theirs:.3f} ms")
    opts = RadioOptions()
    cap = udp_goodput_bps(opts, 1400, OVERHEAD)  # the testbed link is secured
    testbed.up(testbed.TestbedSpec(opts))
    irtt = subprocess.Popen(
        ["ip", "netns", "exec", "lg-base", "irtt", "server", "-b", f"{testbed.BASE_IP}:2112"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    target = Target(testbed.BASE_IP, testbed.IPERF_PORT, testbed.RTT_PORT, NS)
    try:
        time.sleep(1)
        if not args.no_throughput:
            throughput(target, cap, args.seconds)
        print("RTT medians (95 % CI):  ρ     ours (ms)              irtt (ms)              ratio")
        interval = 0.05
        for rho in rhos:
            load = None
            if rho > 0:
                spec = TrialSpec(
                    host=target.host,
                    port=target.iperf_port,
                    rate_bps=int(rho * cap),
                    duration=rtt_seconds + 8,
                    length=1400,
                )
                load = threading.Thread(target=run_trial, args=(spec, NS), daemon=True)
                load.start()
                time.sleep(2)
            steal = StealMeter()
            # Both clients at once, so that they sample the same conditions.
            theirs_box: list[list[float]] = []
            other = threading.Thread(
                target=lambda box: box.append(irtt_rtts_ms(rtt_seconds, int(interval * 1000))),
                args=(theirs_box,),
            )
            other.start()
            # 49 ms against irtt's 50: the two probe streams drift through every relative
            # phase, so neither tool is the one that queues behind the other more often.
            probes = probe_in(target, int(rtt_seconds / 0.049), 0.049)
            other.join()
            ours = [r["rtt_ms"] for r in probes["records"] if r["rtt_ms"] is not None]
            app = [r["app_rtt_ms"] for r in probes["records"] if r["app_rtt_ms"] is not None]
            theirs = theirs_box[0] if theirs_box else []
            am = analysis.percentile(app, 0.5)
            alo, ahi = analysis.quantile_interval(app, 0.5)
            om, tm = analysis.percentile(ours, 0.5), analysis.percentile(theirs, 0.5)
            (olo, ohi), (tlo, thi) = (
                analysis.quantile_interval(ours, 0.5),
                analysis.quantile_interval(theirs, 0.5),
            )
            print(
                f"  {rho:4.2f}   {om:6.2f} [{olo:5.2f}, {ohi:5.2f}]  n={len(ours):<5d}"
                f" {tm:6.2f} [{tlo:5.2f}, {thi:5.2f}]  n={len(theirs):<5d}  {om / tm:6.3f}"
                f"  intervals {'overlap' if olo <= thi and tlo <= ohi else 'DISJOINT'}"
                f"  CPU steal {100 * steal.share():.1f} %"
            )
            qs = (0.1, 0.25, 0.5, 0.75, 0.9)
            print(
                "         quantiles p10..p90: ours "
                + " ".join(f"{analysis.percentile(ours, q):.1f}" for q in qs)
                + " | irtt "
                + " ".join(f"{analysis.percentile(theirs, q):.1f}" for q in qs)
            )
            print(
                f"         user-space stamps: {am:6.2f} [{alo:5.2f}, {ahi:5.2f}]"
                f"{'':24s}{am / tm:6.3f}"
                f"  intervals {'overlap' if alo <= thi and tlo <= ahi else 'DISJOINT'}"
            )
            if load is not None:
                load.join()
            time.sleep(1)
    finally:
        irtt.kill()
        testbed.down()


def throughput(target: Target, cap: float, seconds: int) -> None:
    print("throughput (UDP, 1400 B):  offered   ours (libiperf)   stock iperf3   ratio")
    for rho in (0.4, 0.9, 1.3):
        rate = int(rho * cap)
        spec = TrialSpec(
            host=target.host,
            port=target.iperf_port,
            rate_bps=rate,
            duration=seconds,
            length=1400,
        )
        ours = parse_result(spec, run_trial(spec, NS)).received_bps
        time.sleep(1)
        stock = stock_iperf(rate, seconds)
        time.sleep(1)
        print(
            f"  {rate / 1e3:8.1f} kbit/s  {ours / 1e3:10.1f}  {stock / 1e3:14.1f}"
            f"   {ours / stock:6.3f}"
        )


if __name__ == "__main__":
    main()
