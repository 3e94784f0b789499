"""Issue 42's figures for adaptive retries on the testbed, with the stock tools. Run by hand,
as root (one check at a time; each brings its own testbed up and down):

    .venv/bin/python -m tools.adapt_look [--rounds 3] [--only lossy,ping,clean]

- lossy: ``testbed up --adapt --per 0.1`` (ESB, 2 Mbit/s, ARD 250 / ARC 2 configured,
  secured); stock iperf3 UDP, 1400-byte datagrams from the mobile, after 5 s of traffic
  (iperf3 --omit 5): at 600 kbit/s offered, the received rate over the lossy model's best
  fixed ARC at ARD 250 (target ≥ 0.95); at 300 kbit/s offered, the datagrams lost
  (target ≤ 0.5 %). The same two runs without --adapt for comparison.
- ping: idle ping RTT (200 pings, 20/s, median), --adapt against the same settings fixed,
  alternating, clean channel (target: within 0.2 ms).
- clean: UDP at 1.5× the bound on a clean channel, --adapt against fixed ARC 2 (target:
  ≥ 0.98 of it), alternating.

Each line is one run; medians and spreads follow.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

from longge import testbed
from longge.air.loss import AirLoss
from longge.daemon.status import DaemonClient
from longge.measure.link import model_context
from longge.measure.model import udp_goodput_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions
from longge.testbed_spec import node_socket
from tools.testbed_link import iperf_udp, ns, rtts, stock_server

BASE = RadioOptions(rate="2M", ard_us=250, arc=2)


def _radio(opts: RadioOptions) -> dict[str, object]:
    return {**opts.as_dict(), "pa_level": "low"}


def udp(opts: RadioOptions, loss: AirLoss, rate: float, seconds: int = 15) -> dict[str, float]:
    """One testbed: iperf3 UDP from the mobile at ``rate`` (first 5 s omitted): received
    bit/s, loss share, and the mobile's adapt status at the end."""
    testbed.up(testbed.TestbedSpec(opts, loss=loss))
    server = stock_server()
    try:
        time.sleep(1)
        cmd = [*iperf_udp(rate, seconds), "--omit", "5"]
        run = json.loads(ns("lg-mobile", *cmd, timeout=seconds + 60))
        end = run["end"]["sum"]
        tx = DaemonClient(str(node_socket("mobile"))).status().raw["tx"]
        adapt = tx.get("adapt") or {}
        if adapt:
            print(
                f"    mobile's retries: ARC {adapt['arc']} ARD {adapt['ard_us']} µs, "
                f"q {adapt['q']}, {adapt['decisions']} decisions: {adapt['why']}",
                flush=True,
            )
        return {
            "received_bps": float(run["end"]["sum_received"]["bits_per_second"]),
            "lost": float(end.get("lost_percent", 0.0)) / 100,
        }
    finally:
        server.kill()
        testbed.down()


def lossy(rounds: int) -> None:
    loss = AirLoss(per=0.1)
    ctx = model_context(_radio(replace(BASE, adapt=True)), 1400, OVERHEAD, False, loss.as_dict())
    best = float(ctx["model_capacity_bps"])
    print(f"lossy model's best fixed ARC at ARD 250, per 0.1: {best / 1e3:.1f} kbit/s")
    got: dict[str, list[float]] = {}
    for k in range(rounds):
        for adapt in (True, False):
            opts = replace(BASE, adapt=adapt)
            hi = udp(opts, loss, 600e3)
            lo = udp(opts, loss, 300e3)
            tag = "adapt" if adapt else "fixed ARC 2"
            got.setdefault(f"{tag} 600k ratio", []).append(hi["received_bps"] / best)
            got.setdefault(f"{tag} 300k lost", []).append(lo["lost"])
            print(
                f"round {k + 1} {tag}: 600 kbit/s offered: received {hi['received_bps'] / 1e3:.1f}"
                f" kbit/s = {hi['received_bps'] / best:.3f} of the best fixed; 300 kbit/s "
                f"offered: {100 * lo['lost']:.2f} % lost",
                flush=True,
            )
    _summary(got)


def ping_rtt(opts: RadioOptions) -> float:
    testbed.up(testbed.TestbedSpec(opts))
    try:
        time.sleep(1)
        out = ns("lg-mobile", "ping", "-c", "200", "-i", "0.05", "10.24.0.1")
        return statistics.median(rtts(out))
    finally:
        testbed.down()


def ping(rounds: int) -> None:
    got: dict[str, list[float]] = {}
    for k in range(rounds):
        if k % 2:  # (alternating which goes first)
            f = ping_rtt(BASE)
            a = ping_rtt(replace(BASE, adapt=True))
        else:
            a = ping_rtt(replace(BASE, adapt=True))
            f = ping_rtt(BASE)
        got.setdefault("adapt - fixed, ms", []).append(a - f)
        print(f"round {k + 1}: idle ping median adapt {a:.3f} ms, fixed {f:.3f} ms", flush=True)
    _summary(got)


def clean(rounds: int) -> None:
    bound = udp_goodput_bps(BASE, 1400, OVERHEAD)
    got: dict[str, list[float]] = {}
    for k in range(rounds):
        a = udp(replace(BASE, adapt=True), AirLoss(), 1.5 * bound)["received_bps"]
        f = udp(BASE, AirLoss(), 1.5 * bound)["received_bps"]
        got.setdefault("adapt / fixed", []).append(a / f)
        print(
            f"round {k + 1}: clean UDP at 1.5x: adapt {a / 1e3:.1f}, fixed {f / 1e3:.1f} kbit/s "
            f"({a / bound:.3f} / {f / bound:.3f} of the model)",
            flush=True,
        )
    _summary(got)


def _summary(got: dict[str, list[float]]) -> None:
    for key, values in got.items():
        print(
            f"  {key}: median {statistics.median(values):.4f} "
            f"[{min(values):.4f}, {max(values):.4f}] over {len(values)}"
        )


CHECKS = {"lossy": lossy, "ping": ping, "clean": clean}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default=",".join(CHECKS), help="checks, comma separated")
    args = p.parse_args()
    for name in args.only.split(","):
        print(f"== {name}", flush=True)
        CHECKS[name](args.rounds)


if __name__ == "__main__":
    main()
