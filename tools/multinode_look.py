"""Several mobiles on one base, a first look (issue 41): stock iperf3 UDP from every mobile at
once, downlink then uplink, per mobile, in sum and as Jain's fairness index. Run by hand, as
root:

    .venv/bin/python -m tools.multinode_look [--mobiles 3] [--rate 300k] [--seconds 10]

Brings up ``testbed up --mobiles N`` (ESB, 2 Mbit/s, secured), starts an ``iperf3 -s`` per
mobile (downlink: in each mobile's namespace; uplink: in lg-base, a port each), runs the
clients 0.5 s apart (1400-byte datagrams, ``--rate`` each), and prints each mobile's received
rate, the aggregate as a share of one link's model bound, and Jain's index; takes the
testbed down. A client whose control connection fails counts 0 and says so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from longge import testbed
from longge.measure.model import udp_goodput_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions

PORT = 5301
STAGGER_S = 0.5


def _ns(namespace: str, *cmd: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ip", "netns", "exec", namespace, *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def jain(rates: list[float]) -> float:
    """Jain's fairness index: 1 when all are equal, 1/n when one takes everything."""
    total = sum(rates)
    return total * total / (len(rates) * sum(r * r for r in rates)) if total else 0.0


def one_way(direction: str, n: int, rate: str, seconds: int) -> list[float]:
    """Received kbit/s per mobile, all sending (or sent to) at once."""
    names = testbed.mobile_names(n)
    servers = []
    for i, name in enumerate(names):
        if direction == "up":
            where, address = "lg-base", testbed.BASE_IP
        else:
            where, address = f"lg-{name}", testbed.mobile_ip(i)
        servers.append(_ns(where, "iperf3", "-s", "-1", "-p", str(PORT + i), "-B", address))
    time.sleep(1)
    clients = []
    for i, name in enumerate(names):
        if direction == "up":
            where, target = f"lg-{name}", testbed.BASE_IP
        else:
            where, target = "lg-base", testbed.mobile_ip(i)
        udp = ["-u", "-b", rate, "-l", "1400", "-t", str(seconds), "-J"]
        clients.append(_ns(where, "iperf3", "-c", target, "-p", str(PORT + i), *udp))
        # (iperf3's UDP start is one datagram each way, not repeated: started together, the
        # mobiles' answers collide on the shared uplink and a lost one fails the client)
        time.sleep(STAGGER_S)
    rates = []
    for i, client in enumerate(clients):
        out, _ = client.communicate(timeout=seconds + 60)
        try:
            result = json.loads(out)
        except ValueError:
            result = {"error": out.strip()[-200:]}
        end = result.get("end", {}).get("sum", {})
        if result.get("error") or "bits_per_second" not in end:
            print(f"{direction} {names[i]}: the client failed: {result.get('error')}")
            rates.append(0.0)
            continue
        rates.append(end["bits_per_second"] * (1 - end["lost_percent"] / 100) / 1000)
    for server in servers:
        server.kill()
        server.wait()
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mobiles", type=int, default=3)
    ap.add_argument("--rate", default="300k")
    ap.add_argument("--seconds", type=int, default=10)
    ns = ap.parse_args()
    bound = udp_goodput_bps(RadioOptions(), 1400, OVERHEAD) / 1000
    testbed.up(testbed.TestbedSpec(mobiles=ns.mobiles))
    try:
        for direction in ("down", "up"):
            rates = one_way(direction, ns.mobiles, ns.rate, ns.seconds)
            print(
                f"{direction}: per mobile {[round(r, 1) for r in rates]} kbit/s, aggregate "
                f"{sum(rates):.1f} = {sum(rates) / bound:.3f} of one link's bound "
                f"({bound:.1f}), Jain {jain(rates):.3f}",
                flush=True,
            )
            time.sleep(2)
    finally:
        testbed.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
