"""Several mobiles on one base loaded at once, each with stock iperf3 (UDP, 1400-byte
datagrams): what each received, their sum, Jain's index over them. The running testbed's
mobiles (``testbed up --mobiles N``), one direction at a time.

Downlink: an ``iperf3 -s`` in each mobile's namespace, the clients in lg-base; uplink: one
``iperf3 -s`` per mobile in lg-base, on a port of its own, the clients in the mobiles'
namespaces. The clients start together unless ``stagger_s`` says otherwise (on a base that
grants the uplink, their first datagrams do not collide). A client that fails (its control
connection, or no result) counts 0 and says why. A mobile's rate is what its receiver got
over the receiver's own time (iperf3's ``sum_received``): the sender's rate less the loss
overstates it by what still waited in the queues when the sender stopped.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from dataclasses import dataclass, field

from longge import testbed
from longge.config import NodeConfig
from longge.measure.analysis import jain_index
from longge.measure.model import IP_UDP_HEADERS

PORT = 5301
DATAGRAM = 1400
TUN = NodeConfig.tun  # (the testbed's nodes keep the default name)


def ping_rtts(namespace: str, address: str, count: int, interval_s: float) -> list[float | None]:
    """``ping`` from ``namespace``: each echo's RTT (ms) by sequence, None where none came."""
    out = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            namespace,
            "ping",
            "-n",
            "-c",
            str(count),
            "-i",
            str(interval_s),
            "-W",
            "2",
            address,
        ],
        capture_output=True,
        text=True,
        timeout=count * interval_s + 30,
    ).stdout
    rtts: list[float | None] = [None] * count
    for line in out.splitlines():
        if "icmp_seq=" in line and "time=" in line:
            seq = int(line.split("icmp_seq=")[1].split()[0])
            if 1 <= seq <= count:
                rtts[seq - 1] = float(line.split("time=")[1].split()[0])
    return rtts


@dataclass
class Shares:
    """One direction's trial: kbit/s received per mobile (in the testbed's order)."""

    direction: str  # "up" (mobiles -> base) or "down"
    kbps: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # "" where the client succeeded
    #: UDP payload kbit/s the receivers' TUN counters saw in the trial's middle (its first
    #: STEADY_SKIP_S and last second left out): per mobile on the downlink, in sum on the
    #: uplink (one entry). The aggregate that one clock measures: the iperf3 receivers'
    #: windows differ, and their rates' sum read 1.04 of the air's bound once.
    steady_kbps: list[float] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(self.kbps)

    @property
    def measured(self) -> list[float]:
        """kbit/s of the mobiles whose clients succeeded. A client that failed measured
        nothing (iperf3 3.12 does not resend its UDP "connect" datagram: one lost, on a lossy
        channel, and the client gives up after 30 s): its 0 is not the mobile's share."""
        return [k for k, e in zip(self.kbps, self.errors, strict=True) if not e]

    @property
    def jain(self) -> float:
        """Jain's index over the measured mobiles (NaN: none received anything, or a client
        failed and fewer than two are left to compare)."""
        got = self.measured
        if not any(got) or (len(got) < len(self.kbps) and len(got) < 2):
            return math.nan
        return jain_index(got)

    @property
    def steady_total(self) -> float | None:
        return sum(self.steady_kbps) if self.steady_kbps else None


#: The start of a trial the steady counters leave out (the clients' control connections, the
#: queues filling).
STEADY_SKIP_S = 2.0


def rx_bytes(namespace: str) -> int:
    """The bytes the namespace's TUN has received."""
    out = subprocess.run(
        ["ip", "netns", "exec", namespace, "cat", f"/sys/class/net/{TUN}/statistics/rx_bytes"],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout
    return int(out.strip() or 0)


def steady_bps(receivers: list[str], seconds: float, share: float) -> list[float]:
    """Payload bit/s into each receiver namespace's TUN between STEADY_SKIP_S and one second
    before the end of a trial of ``seconds`` that starts now (IP bytes times ``share``, the
    payload's part of them); none for a trial too short to have a middle."""
    if seconds < STEADY_SKIP_S + 1.5:
        return []
    time.sleep(STEADY_SKIP_S)
    t0, b0 = time.monotonic(), [rx_bytes(ns) for ns in receivers]
    time.sleep(seconds - STEADY_SKIP_S - 1)
    t1, b1 = time.monotonic(), [rx_bytes(ns) for ns in receivers]
    return [(y - x) * 8 * share / (t1 - t0) for x, y in zip(b0, b1, strict=True)]


def _ns(namespace: str, *cmd: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ip", "netns", "exec", namespace, *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _received_kbps(out: str) -> tuple[float, str]:
    """A UDP client's JSON: what the server received (kbit/s), or 0 and the error."""
    try:
        result = json.loads(out)
    except ValueError:
        return 0.0, out.strip()[-200:] or "no output"
    end = result.get("end", {})
    received = end.get("sum_received", {})  # the receiver's bytes over its own time (3.x)
    if not result.get("error") and "bits_per_second" in received:
        return received["bits_per_second"] / 1000, ""
    total = end.get("sum", {})  # (older: what was sent, less what was lost)
    if result.get("error") or "bits_per_second" not in total:
        return 0.0, str(result.get("error") or "no result")
    return total["bits_per_second"] * (1 - total.get("lost_percent", 0) / 100) / 1000, ""


def load_all(
    direction: str,
    mobiles: int,
    rate: str,
    seconds: int,
    stagger_s: float = 0.0,
    only: list[int] | None = None,
) -> Shares:
    """Every mobile of the testbed (or those indexed by ``only``) sends (``up``) or is sent
    (``down``) ``rate`` at once for ``seconds``; what each received."""
    if direction not in ("up", "down"):
        raise ValueError(f"direction: up or down, not {direction!r}")
    every = testbed.mobile_names(mobiles)
    chosen = list(range(mobiles)) if only is None else only
    names = [every[i] for i in chosen]
    servers = []
    for i, name in zip(chosen, names, strict=True):
        if direction == "up":
            where, address = "lg-base", testbed.BASE_IP
        else:
            where, address = f"lg-{name}", testbed.mobile_ip(i)
        servers.append(_ns(where, "iperf3", "-s", "-1", "-p", str(PORT + i), "-B", address))
    clients = []
    try:
        time.sleep(1)  # (the servers listening)
        for i, name in zip(chosen, names, strict=True):
            if direction == "up":
                where, target = f"lg-{name}", testbed.BASE_IP
            else:
                where, target = "lg-base", testbed.mobile_ip(i)
            udp = ["-u", "-b", rate, "-l", str(DATAGRAM), "-t", str(seconds), "-J"]
            clients.append(_ns(where, "iperf3", "-c", target, "-p", str(PORT + i), *udp))
            time.sleep(stagger_s)
        receivers = ["lg-base"] if direction == "up" else [f"lg-{n}" for n in names]
        share = DATAGRAM / (DATAGRAM + IP_UDP_HEADERS)
        steady = [b / 1000 for b in steady_bps(receivers, seconds, share)]
        shares = Shares(direction, steady_kbps=steady)
        for client in clients:
            out, _ = client.communicate(timeout=seconds + 60)
            kbps, error = _received_kbps(out)
            shares.kbps.append(kbps)
            shares.errors.append(error)
        return shares
    finally:
        for proc in [*clients, *servers]:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
