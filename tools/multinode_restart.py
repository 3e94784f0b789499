"""Several mobiles on one base, a daemon killed (issue 41): what it costs the others. Run by
hand, as root:

    .venv/bin/python -m tools.multinode_restart [--mobiles 3] [--direction down]
        [--seconds 20] [--kill-at 7] [--mode esb|stream]

1. *A mobile's daemon killed during a saturated run*: every mobile loaded with more than its
   share (stock iperf3, 1400-byte UDP, ``multinode.load_all``), the last mobile's daemon killed
   (SIGKILL to its process group) ``--kill-at`` s in; the testbed's keeper starts it again.
   The others' service: what they received every 50 ms (downlink: the other mobiles' TUN
   counters; uplink: the base's iptables counters of the other mobiles' source addresses, in
   a chain of the tool's own, removed after) over 0.2-s windows; how long they spent below
   half their rate before the kill, the service they lost (``shortfall_s``; beside it, the
   same over as long before the kill: what chance alone costs), and when the killed mobile
   answered a ping again.
2. *The base's daemon killed*, the link idle: how long until each mobile answers the base's
   ping again (no manual step: the keeper starts the daemon again).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from longge import testbed
from longge.daemon.control import ControlError
from longge.daemon.status import DaemonClient
from longge.measure.model import udp_goodput_bps
from longge.measure.multinode import DATAGRAM, TUN, load_all, rx_bytes
from longge.measure.multinode_experiment import OVERSHARE
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions
from longge.testbed_spec import node_socket

WINDOW_S = 0.2
#: A mobile not back this long after the base's kill: what the nodes say is kept (slow_said)
SLOW_S = 3.0
#: the tool's own iptables chain in lg-base (mangle table, PREROUTING): a rule per source
COUNT_CHAIN = "lg-restart-count"


def _base_iptables(*args: str, check: bool = True) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", "lg-base", "iptables", "-t", "mangle", *args],
        capture_output=True,
        text=True,
        timeout=10,
        check=check,
    ).stdout


def count_sources(addresses: list[str]) -> None:
    """A counting rule (no target) per source address for what comes in on the base's TUN."""
    _base_iptables("-N", COUNT_CHAIN)
    _base_iptables("-I", "PREROUTING", "-i", TUN, "-j", COUNT_CHAIN)
    for address in addresses:
        _base_iptables("-A", COUNT_CHAIN, "-s", address)


def uncount_sources() -> None:
    for args in (
        ("-D", "PREROUTING", "-i", TUN, "-j", COUNT_CHAIN),
        ("-F", COUNT_CHAIN),
        ("-X", COUNT_CHAIN),
    ):
        _base_iptables(*args, check=False)


def source_bytes() -> int:
    """The bytes counted by COUNT_CHAIN's rules, in all."""
    out = _base_iptables("-L", COUNT_CHAIN, "-v", "-x", "-n")
    return sum(int(line.split()[1]) for line in out.splitlines()[2:] if line.split())


def kill(name: str) -> float:
    """SIGKILL to the testbed process ``name``'s group (the daemon and its radio processes);
    when."""
    pid = json.loads(testbed.paths()["state"].read_text())["pids"][name]
    os.killpg(pid, signal.SIGKILL)
    return time.monotonic()


def answers(address: str, timeout_s: float = 0.2) -> bool:
    return (
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                "lg-base",
                "ping",
                "-n",
                "-c",
                "1",
                "-W",
                str(timeout_s),
                address,
            ],
            capture_output=True,
            timeout=10,
        ).returncode
        == 0
    )


def back_after(address: str, since: float, limit_s: float = 30.0) -> float | None:
    """Seconds from ``since`` until ``address`` answers the base's ping (every 0.1 s)."""
    while time.monotonic() - since < limit_s:
        if answers(address):
            return time.monotonic() - since
        time.sleep(0.1)
    return None


def mobile_killed(
    mobiles: int, direction: str, seconds: int, kill_at: float, mode: str = "esb"
) -> None:
    bound = udp_goodput_bps(RadioOptions(mode=mode), DATAGRAM, OVERHEAD)
    rate = f"{round(OVERSHARE * bound / mobiles / 1000)}k"
    names = testbed.mobile_names(mobiles)
    victim = names[-1]
    watched = [f"lg-{n}" for n in names[:-1]]
    if direction == "up":
        count_sources([testbed.mobile_ip(i) for i in range(mobiles - 1)])
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def received() -> int:
        return source_bytes() if direction == "up" else sum(rx_bytes(ns) for ns in watched)

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), received()))
            time.sleep(0.05)

    load = threading.Thread(target=load_all, args=(direction, mobiles, rate, seconds))
    t0 = time.monotonic()
    load.start()
    sampler = threading.Thread(target=sample)
    sampler.start()
    time.sleep(kill_at + 1.0)  # (load_all waits 1 s for its servers)
    killed = kill(victim)
    back = back_after(testbed.mobile_ip(mobiles - 1), killed)
    load.join()
    stop.set()
    sampler.join()
    if direction == "up":
        uncount_sources()
    # the others' received rate over each WINDOW_S ending at a sample (kbit/s of IP bytes;
    # 50 ms holds one or two 1400-byte packets: a window of it reads low by chance)
    rates: list[tuple[float, float]] = []
    k = round(WINDOW_S / 0.05)
    for (ta, ba), (tb, bb) in zip(samples, samples[k:], strict=False):
        rates.append((tb - killed, (bb - ba) * 8 / (tb - ta) / 1000))
    before = [r for t, r in rates if -4.0 < t < 0]
    after = [(t, r) for t, r in rates if 0 <= t < seconds - kill_at - 1.5]
    if not before or not after:
        print("mobile killed: too few samples", flush=True)
        return
    base = statistics.median(before)
    low = [t for t, r in after if r < 0.5 * base]
    span = (back if back is not None else 2.0) + 1.0
    lost, floor = shortfall_s(rates, base, 0.0, span), shortfall_s(rates, base, -span, 0.0)
    gap = len(low) * 0.05  # (a window ends every 50 ms)
    print(
        f"mobile killed ({victim}, {direction}, {mobiles} mobiles): the others received "
        f"{base:.0f} kbit/s before (median over {WINDOW_S:.1f}-s windows); after the kill, "
        f"{gap:.2f} s below half of that (first at {low[0]:.2f} s, last at {low[-1]:.2f} s)"
        if low
        else f"mobile killed ({victim}, {direction}, {mobiles} mobiles): the others received "
        f"{base:.0f} kbit/s before; never below half of that after the kill (lowest "
        f"{min(r for _, r in after):.0f})",
        flush=True,
    )
    print(
        f"  service the others lost from the kill till {span:.1f} s after: {lost:.2f} s "
        f"(in as long before the kill, by chance: {floor:.2f} s)",
        flush=True,
    )
    print(
        f"  {victim} answered again {back:.2f} s after the kill"
        if back is not None
        else f"  {victim} did not answer within 30 s",
        f"(t0 {killed - t0:.1f} s into the run)",
        flush=True,
    )


def shortfall_s(rates: list[tuple[float, float]], base: float, start: float, end: float) -> float:
    """Seconds of service lost between ``start`` and ``end`` (from the kill): over the
    WINDOW_S windows that do not overlap, each one's shortfall below ``base`` (a window
    above it makes up for none below: the others take the killed one's share meanwhile),
    as a part of the window's time."""
    lost, last = 0.0, -math.inf
    for t, r in rates:
        if start + WINDOW_S <= t <= end and t - last >= WINDOW_S - 1e-6:
            lost += max(0.0, 1.0 - r / base) * WINDOW_S
            last = t
    return lost


def slow_said(since: float, name: str) -> None:
    """A mobile not back SLOW_S after the base's kill: the keeper's restarts and the base's
    and the mobile's status (JSON, to a file named here)."""
    state = json.loads(testbed.paths()["state"].read_text())
    where = Path(tempfile.mkstemp(prefix="multinode-restart-", suffix=".json")[1])
    said = {"seconds": time.monotonic() - since, "restarts": state.get("restarts")}
    for node in ("base", name):
        try:
            said[node] = DaemonClient(str(node_socket(node))).status().raw
        except ControlError as exc:  # (not running, or not answering)
            said[node] = str(exc)
    keeper = testbed.STATE_DIR / "keeper.log"
    said["keeper"] = keeper.read_text()[-4000:] if keeper.exists() else None
    where.write_text(json.dumps(said, indent=1))
    print(
        f"  {name} not back {SLOW_S:.0f} s after the base's kill: restarts "
        f"{state.get('restarts')}, the nodes' status in {where}",
        flush=True,
    )


def base_killed(mobiles: int) -> None:
    for i in range(mobiles):
        if not answers(testbed.mobile_ip(i), 1.0):
            print(f"base killed: mobile {i + 1} did not answer before", flush=True)
    killed = kill("base")
    backs = []
    for i in range(mobiles):  # (in turn: each measured from the kill)
        back = back_after(testbed.mobile_ip(i), killed, limit_s=SLOW_S)
        if back is None:  # (slow: what the nodes say now, then wait on)
            slow_said(killed, testbed.mobile_names(mobiles)[i])
            back = back_after(testbed.mobile_ip(i), killed)
        backs.append(back)
    said = ", ".join("never" if b is None else f"{b:.2f} s" for b in backs)
    print(f"base killed ({mobiles} mobiles): each mobile answered again after {said}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mobiles", type=int, default=3)
    ap.add_argument("--direction", choices=("up", "down"), default="down")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--kill-at", type=float, default=7.0)
    ap.add_argument("--mode", choices=("esb", "stream"), default="esb")
    ns = ap.parse_args()
    testbed.up(testbed.TestbedSpec(options=RadioOptions(mode=ns.mode), mobiles=ns.mobiles))
    try:
        mobile_killed(ns.mobiles, ns.direction, ns.seconds, ns.kill_at, ns.mode)
        time.sleep(3)
        base_killed(ns.mobiles)
    finally:
        testbed.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
