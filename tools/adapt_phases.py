"""Issue 42's schedule of channel conditions on the testbed, with adaptation and with fixed
settings. Run by hand, as root (each setting brings its own testbed up and down):

    .venv/bin/python -m tools.adapt_phases [--phase-s 40] [--settings adapt,2M/2,2M/15,...]

The mobile sends 1400-byte UDP datagrams to the base at --offer (more than 2 Mbit/s carries)
through the whole schedule (a steady sender of its own: iperf3's TCP control connection would
not live through a dead phase) and pings it 10 times a second (a ping each phase); the air
changes at each phase boundary (``air set``, live):

    clean     nothing lost
    per10     10 % frame error, data and ACKs
    weak      71 dB path loss: at the nodes' power (low, −12 dBm) 2 Mbit/s is 1 dB under
              its sensitivity (most attempts fail), 1 Mbit/s 2 dB over
    far       78 dB: only 250 kbit/s is above its sensitivity (+4 dB)
    wifi      a Wi-Fi interferer on channel 13 (busy 0.3 of its 1-ms slots) over both links
    clean2    nothing lost again

Per setting and phase: goodput (the base's TUN counter, after the phase's first --settle-s),
the time to settle (the first 0.5-s slice from which the rate stays within 5 % of the
phase's final rate, median of its last half), the share of packets the link itself lost
(the mobile's packets aborted after MAX_RT over packets sent; the queue's drops at this
offered load are not counted), the ping RTT p95. Then each phase's best fixed setting and
adaptation's share of it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from longge import testbed
from longge.air import control
from longge.daemon.status import DaemonClient
from longge.radio.options import RadioOptions
from longge.testbed_spec import node_socket

PHASES: list[tuple[str, dict[str, Any], str]] = [
    ("clean", {"per": 0.0, "path_loss": None}, "none"),
    ("per10", {"per": 0.1}, "none"),
    ("weak", {"per": 0.0, "path_loss": 71.0}, "none"),
    ("far", {"path_loss": 78.0}, "none"),
    ("wifi", {"path_loss": None}, "wifi:13:0.3"),
    ("clean2", {}, "none"),
]
SLICE_S = 0.5
#: The load: 1400-byte UDP datagrams to the base at a steady rate (argv: bit/s, seconds),
#: with no control connection to lose when the link is down for a phase (iperf3's is TCP
#: over the link: a client that started in a dead phase, or whose control connection died,
#: measured nothing after it). Delivered: the base's TUN counter.
BLASTER = """
import socket, sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload, gap = bytes(1400), 1400 * 8 / rate
t = time.monotonic()
end = t + seconds
while t < end:
    try:
        s.sendto(payload, ("10.24.0.1", 9))
    except OSError:
        pass
    t += gap
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
"""


def setting(name: str) -> RadioOptions:
    if name == "adapt":
        return RadioOptions(adapt=True)
    rate, arc = name.split("/")
    return RadioOptions(rate=rate, ard_us=500 if rate == "250k" else 250, arc=int(arc))


def _counter() -> int:
    out = subprocess.run(
        ["ip", "netns", "exec", "lg-base", "cat", "/sys/class/net/longge0/statistics/rx_bytes"],
        capture_output=True,
        text=True,
    ).stdout
    return int(out.strip() or 0)


def _tx() -> dict[str, Any]:
    tx: dict[str, Any] = DaemonClient(str(node_socket("mobile"))).status().raw["tx"]
    return tx


def run_setting(name: str, phase_s: float, offer: float) -> list[dict[str, Any]]:
    opts = setting(name)
    testbed.up(testbed.TestbedSpec(opts))
    air = str(testbed.paths()["air"])
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), _counter()))
            stop.wait(SLICE_S)

    try:
        time.sleep(2)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        bounds = []
        pings: list[subprocess.Popen[str]] = []
        load = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                "lg-mobile",
                sys.executable,
                "-c",
                BLASTER,
                str(offer),
                str(phase_s * len(PHASES) + 1),
            ],
        )
        for phase, changes, wifi in PHASES:
            control.apply(air, changes, interferer=wifi)
            t0 = time.monotonic()
            tx0 = _tx()
            # (a load and a ping of their own each phase: iperf3's control connection, or a
            # ping that met a full queue, may not have lived through the phase before)
            pings.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        "lg-mobile",
                        "ping",
                        "-D",
                        "-i",
                        "0.1",
                        "-W",
                        "2",
                        "-w",
                        str(int(phase_s)),
                        "10.24.0.1",
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            )
            time.sleep(phase_s)
            tx1 = _tx()
            bounds.append((phase, t0, time.monotonic(), tx0, tx1))
        stop.set()
        sampler.join()
        try:
            load.wait(timeout=10)
        except subprocess.TimeoutExpired:
            load.kill()
        ping_out = "".join(p.communicate(timeout=30)[0] for p in pings)
        adapt = _tx().get("adapt")
    finally:
        testbed.down()
    # ping -D prints the wall clock; the phases use the monotonic one: line them up by offset
    offset = time.time() - time.monotonic()
    rtts = [
        (float(t) - offset, float(ms))
        for t, ms in re.findall(r"\[([\d.]+)\].*time=([\d.]+)", ping_out)
    ]
    rows = []
    for phase, t0, t1, tx0, tx1 in bounds:
        rows.append(_phase_row(name, phase, t0, t1, tx0, tx1, samples, rtts))
    if adapt:
        print(f"  {name}: mobile's adapt at the end: {json.dumps(adapt)}", flush=True)
    return rows


def _phase_row(
    name: str,
    phase: str,
    t0: float,
    t1: float,
    tx0: dict[str, Any],
    tx1: dict[str, Any],
    samples: list[tuple[float, int]],
    rtts: list[tuple[float, float]],
) -> dict[str, Any]:
    inside = [(t, b) for t, b in samples if t0 <= t <= t1]
    rates = [
        (t, 8 * (b1 - b0) / (t - ta)) for (ta, b0), (t, b1) in itertools.pairwise(inside) if t > ta
    ]
    half = [r for _, r in rates[len(rates) // 2 :]] or [0.0]
    final = statistics.median(half)
    # settled: from the first slice on which every 2-s mean is within 5 % of the final rate
    # or above it
    n = max(1, int(2.0 / SLICE_S))
    means = [
        (rates[k][0], statistics.mean(r for _, r in rates[k : k + n]))
        for k in range(max(0, len(rates) - n + 1))
    ]
    settle = None
    for k in range(len(means)):
        if all(m >= 0.95 * final for _, m in means[k:]):
            settle = means[k][0] - SLICE_S - t0
            break
    sent = tx1.get("packets_sent", 0) - tx0.get("packets_sent", 0)
    aborted = tx1.get("packets_aborted", 0) - tx0.get("packets_aborted", 0)
    pings = sorted(ms for t, ms in rtts if t0 <= t <= t1)
    return {
        "setting": name,
        "phase": phase,
        "rates": rates,
        "final_bps": final,
        "settle_s": settle,
        "link_loss": aborted / sent if sent else None,
        "ping_p95_ms": pings[int(0.95 * (len(pings) - 1))] if pings else None,
        "pings": len(pings),
    }


def goodput_after(row: dict[str, Any], t_skip: float, t0: float = 0.0) -> float:
    rates = row["rates"]
    if not rates:
        return 0.0
    first = rates[0][0]
    kept = [r for t, r in rates if t - first >= t_skip]
    return statistics.mean(kept) if kept else 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--phase-s", type=float, default=40.0)
    p.add_argument("--settle-s", type=float, default=2.0)
    p.add_argument("--offer", type=float, default=700e3)
    p.add_argument("--settings", default="adapt,2M/2,2M/15,1M/15,250k/15")
    args = p.parse_args()
    rows: list[dict[str, Any]] = []
    for name in args.settings.split(","):
        print(f"== {name}", flush=True)
        got = run_setting(name, args.phase_s, args.offer)
        for r in got:
            r["goodput_bps"] = goodput_after(r, args.settle_s)
            print(
                f"  {r['phase']:7s} goodput {r['goodput_bps'] / 1e3:7.1f} kbit/s, settled "
                f"{'-' if r['settle_s'] is None else format(r['settle_s'], '.1f')} s, link loss "
                f"{'-' if r['link_loss'] is None else format(100 * r['link_loss'], '.2f')} %, "
                f"ping p95 {r['ping_p95_ms']} ms ({r['pings']} pings)",
                flush=True,
            )
        rows += got
    print("== adaptation against the best fixed setting, per phase")
    for phase, _, _ in PHASES:
        fixed = [r for r in rows if r["phase"] == phase and r["setting"] != "adapt"]
        ad = [r for r in rows if r["phase"] == phase and r["setting"] == "adapt"]
        if not fixed or not ad:
            continue
        best = max(fixed, key=lambda r: r["goodput_bps"])
        a = ad[0]
        share = a["goodput_bps"] / best["goodput_bps"] if best["goodput_bps"] else float("nan")
        losses = [r["link_loss"] for r in fixed if r["link_loss"] is not None]
        print(
            f"  {phase:7s} best fixed {best['setting']} {best['goodput_bps'] / 1e3:.1f} kbit/s; "
            f"adapt {a['goodput_bps'] / 1e3:.1f} = {share:.3f} of it; settled "
            f"{a['settle_s']} s; link loss adapt {a['link_loss']}, lowest fixed "
            f"{min(losses) if losses else None}",
            flush=True,
        )
    out = f"/tmp/adapt_phases_{int(time.time())}.json"
    with open(out, "w") as f:
        json.dump(rows, f)
    print(f"(rows in {out})")


if __name__ == "__main__":
    main()
