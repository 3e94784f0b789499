"""Several mobiles on one base, a first look (issue 41): stock iperf3 UDP from every mobile at
once, downlink then uplink, per mobile, in sum and as Jain's fairness index. Run by hand, as
root:

    .venv/bin/python -m tools.multinode_look [--mobiles 3] [--rate 300k] [--seconds 10]
        [--stagger 0] [--mode esb|stream] [--per 0.05] [--idle-ping]

Brings up ``testbed up --mobiles N`` (ESB or stream mode, 2 Mbit/s, secured), loads every
mobile at once (``longge.measure.multinode``: stock iperf3, 1400-byte datagrams, ``--rate``
each, the clients ``--stagger`` s apart), and prints each mobile's received rate, the aggregate
as a share of one link's model bound, Jain's index, and the packets each receiver counted
missing meanwhile (the link's own loss: on a lossy cell, ``--per``, what ESB's retries did not
save); takes the testbed down. A client that fails counts 0 and says why (iperf3 3.12 does
not resend its UDP connect: one lost on a lossy cell fails its client).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from longge import testbed
from longge.air.loss import AirLoss
from longge.daemon.status import DaemonClient
from longge.measure.analysis import percentile
from longge.measure.model import udp_goodput_bps
from longge.measure.multinode import load_all, ping_rtts
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions
from longge.testbed_spec import node_socket


def _rtt_line(what: str, rtts: list[float | None]) -> str:
    got = sorted(r for r in rtts if r is not None)
    if not got:
        return f"{what}: no answer of {len(rtts)}"
    p95 = percentile(got, 0.95)
    lost = [i + 1 for i, r in enumerate(rtts) if r is None]
    where = f" (icmp_seq {lost[0]}-{lost[-1]})" if lost else ""
    return (
        f"{what}: RTT median {statistics.median(got):.2f} ms, p95 {p95:.2f} ms, "
        f"{len(lost)} of {len(rtts)} lost{where}"
    )


def missing(direction: str, mobiles: int) -> list[int]:
    """The packets each mobile's receiver has counted missing so far (its RX process's
    ``missing``: numbers a later packet skipped): the base's per mobile for the uplink, each
    mobile's own for the downlink."""
    names = testbed.mobile_names(mobiles)
    if direction == "up":
        peers = DaemonClient(str(node_socket("base"))).status().raw["rx"].get("peers", {})
        return [int(peers.get(n, {}).get("missing", 0)) for n in names]
    raw = [DaemonClient(str(node_socket(n))).status().raw["rx"] for n in names]
    return [int(rx.get("missing", 0)) for rx in raw]


def idle_ping(mobiles: int, rate: str, seconds: int) -> None:
    """The last mobile's ping, to the base and from it (20/s), alone, then while the others
    are loaded (each direction): the idle mobile's wait for its turn on the shared uplink."""
    last = testbed.mobile_names(mobiles)[-1]
    count = seconds * 20
    pings = {
        "from the mobile": (f"lg-{last}", testbed.BASE_IP),
        "from the base": ("lg-base", testbed.mobile_ip(mobiles - 1)),
    }
    for how, (ns, dst) in pings.items():
        print(_rtt_line(f"{how}, alone", ping_rtts(ns, dst, count, 0.05)), flush=True)
    for direction in ("up", "down"):
        for how, (ns, dst) in pings.items():
            with ThreadPoolExecutor(1) as pool:
                load = pool.submit(
                    load_all, direction, mobiles, rate, seconds + 2, 0.0, list(range(mobiles - 1))
                )
                time.sleep(1.5)
                rtts = ping_rtts(ns, dst, count, 0.05)
                sh = load.result()
            failed = "".join(f"; mobile {i + 1}: {e}" for i, e in enumerate(sh.errors) if e)
            print(
                _rtt_line(f"{how}, beside {mobiles - 1} loaded mobiles ({direction})", rtts)
                + f"; they carried {[round(k, 1) for k in sh.kbps]} kbit/s{failed}",
                flush=True,
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mobiles", type=int, default=3)
    ap.add_argument("--rate", default="300k")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--stagger", type=float, default=0.0, help="seconds between clients' starts")
    ap.add_argument("--mode", choices=("esb", "stream"), default="esb")
    ap.add_argument("--adapt", action="store_true", help="every node adapts (docs/design.md §5)")
    ap.add_argument("--per", type=float, default=0.0, help="frame error rate on every link")
    ap.add_argument(
        "--idle-ping",
        action="store_true",
        help="the last mobile pings the base (20/s) while the others are loaded, and alone",
    )
    ns = ap.parse_args()
    options = RadioOptions(mode=ns.mode, adapt=ns.adapt)
    bound = udp_goodput_bps(RadioOptions(mode=ns.mode), 1400, OVERHEAD) / 1000
    loss = AirLoss(per=ns.per)
    testbed.up(testbed.TestbedSpec(options=options, mobiles=ns.mobiles, loss=loss))
    try:
        if ns.idle_ping:
            idle_ping(ns.mobiles, ns.rate, ns.seconds)
            return 0
        for direction in ("down", "up"):
            before = missing(direction, ns.mobiles)
            sh = load_all(direction, ns.mobiles, ns.rate, ns.seconds, ns.stagger)
            lost = [b - a for a, b in zip(before, missing(direction, ns.mobiles), strict=True)]
            failed = [f"{i + 1}: {e}" for i, e in enumerate(sh.errors) if e]
            steady = sh.steady_total
            print(
                f"{direction}: per mobile {[round(r, 1) for r in sh.kbps]} kbit/s (iperf3 "
                f"receivers), Jain {sh.jain:.3f}; aggregate "
                + (
                    f"{steady:.1f} = {steady / bound:.3f} of one link's bound ({bound:.1f}) "
                    "in the trial's middle (TUN counters), "
                    if steady is not None
                    else ""
                )
                + f"receivers' sum {sh.total:.1f} = {sh.total / bound:.3f}; "
                + f"packets missing at the receivers (the link's loss) {lost}"
                + (f"; failed clients: {failed}" if failed else ""),
                flush=True,
            )
            time.sleep(2)
    finally:
        testbed.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
