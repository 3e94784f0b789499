"""The RX radio process: radio -> frames -> packets -> TUN. One loop:

1. radio_rx     read every frame the RX FIFO holds (the air stops acknowledging when full);
2. reassembler  rebuild packets (``longge.protocol``): whole and checked, or counted drops;
3. tun_writer   hand each packet to the kernel; a keepalive only marks the peer as alive;
4. expire       a half-built packet that waited too long is dropped;
5. wait         sleep until the radio or the supervisor has something.
"""

from __future__ import annotations

import ipaddress
import select
import signal
import time
from multiprocessing.connection import Connection
from typing import Any

from longge.config import NodeConfig
from longge.daemon.child import Child, RxFifo, take_edges, waitable
from longge.daemon.keystate import make_opener
from longge.protocol import Reassembler, secure
from longge.tun import Tun


def make_reassembler(
    cfg: NodeConfig, opener: secure.Opener | None, timeout: float = 1.0, late_guard: int = 0
) -> Reassembler:
    """This node's reassembler: on a sealed link the opener checks order and duplicates;
    ``late_guard``: see Reassembler (stream mode)."""
    if opener is None:
        return Reassembler(cfg.mtu, timeout=timeout, late_guard=late_guard)
    return Reassembler(cfg.mtu + secure.OVERHEAD, timeout=timeout, authenticate=opener.open)


def deliver(tun: Tun, packet: bytes, c: dict[str, Any]) -> None:
    """3. tun_writer: hand a whole packet to the kernel."""
    if tun.write(packet) == len(packet):
        c["packets_out"] += 1
        c["bytes_out"] += len(packet)
    else:
        c["tun_refused"] += 1


#: The RX process's own counters (stream mode adds its ARQ's).
RX_COUNTERS = (
    "frames_in",
    "packets_out",
    "bytes_out",
    "tun_refused",
    "control_unknown",
    "source_not_allowed",
)
#: How often the RX process says, at most, that the peer's sender is stale (its floor
#: message may be lost on the air: said again while stale packets keep coming).
STALE_NOTICE_S = 1.0


class AllowedSources:
    """The peer's ``allowed_ips``: the sources its packets may carry (a mobile cannot send
    through the base as another host; the check WireGuard calls cryptokey routing)."""

    def __init__(self, networks: tuple[str, ...]) -> None:
        nets = [ipaddress.ip_network(n) for n in networks]
        self.v4 = [n for n in nets if n.version == 4]
        self.v6 = [n for n in nets if n.version == 6]
        self.any4 = any(n.prefixlen == 0 for n in self.v4)
        self.any6 = any(n.prefixlen == 0 for n in self.v6)

    def allows(self, packet: bytes) -> bool:
        version = packet[0] >> 4
        if version == 4 and len(packet) >= 20:
            return self.any4 or any(ipaddress.IPv4Address(packet[12:16]) in n for n in self.v4)
        if version == 6 and len(packet) >= 40:
            return self.any6 or any(ipaddress.IPv6Address(packet[8:24]) in n for n in self.v6)
        return False  # (not an IP packet: the kernel would refuse it too)


class Sealing:
    """What the RX process does with a whole, authentic packet: a link-control packet
    (``secure.py``: the supervisor is told what to pass to the TX process), a packet from a
    source the peer may not use (dropped, counted), or to the kernel."""

    def __init__(self, child: Child, opener: secure.Opener | None) -> None:
        self.child = child
        self.opener = opener
        self.sources = AllowedSources(child.cfg.allowed_ips)
        self._stale_told = 0
        self._told_at = -STALE_NOTICE_S

    def take(self, packet: bytes, tun: Tun, c: dict[str, Any]) -> None:
        if packet[:1] == b"\x00":  # (never an IP packet: version 0)
            epoch = secure.parse_floor_message(packet)
            if epoch is not None and self.opener is not None:
                self.child.tell("floor", epoch)
            else:
                c["control_unknown"] += 1
            return
        if not self.sources.allows(packet):
            c["source_not_allowed"] += 1
            return
        deliver(tun, packet, c)

    def tick(self, now: float) -> None:
        if self.opener is None:
            return
        stale = self.opener.drops[secure.SecureDrop.STALE]
        if stale > self._stale_told and now - self._told_at >= STALE_NOTICE_S:
            self._stale_told, self._told_at = stale, now
            self.child.tell("stale", self.opener.stale_floor)


def rx_stats(
    reassembler: Reassembler, opener: secure.Opener | None, last_heard: float | None, now: float
) -> dict[str, Any]:
    """The reassembler's and the opener's part of an RX process's counters."""
    return {
        "keepalives": reassembler.keepalives,
        "drops": {str(k): v for k, v in reassembler.drops.items()},
        "peer_last_heard_s": None if last_heard is None else round(now - last_heard, 3),
        "security": None
        if opener is None
        else {"opened": opener.opened, "drops": {str(k): v for k, v in opener.drops.items()}},
    }


def run(cfg: NodeConfig, tun: Tun, conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = Child(cfg, "rx", conn)
    opener = make_opener(cfg)
    reassembler = make_reassembler(cfg, opener)
    sealing = Sealing(child, opener)
    c: dict[str, Any] = dict.fromkeys(RX_COUNTERS, 0)
    last_heard: float | None = None
    fifo = RxFifo()
    control_ready = True  # the supervisor's pipe: looked at when select() found it readable
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        if radio is not None:
            # The pin's edges before each look at the RX FIFO: a frame after it leaves one.
            take_edges(radio)
            # 1. radio_rx
            for frame in fifo.frames(radio, radio.available()):
                c["frames_in"] += 1
                # 2. reassembler
                packet = reassembler.receive(frame, now)
                if packet is not None:  # (a whole packet that passed its checks and, on a
                    last_heard = now  # secured link, the AEAD: a stranger's frames move nothing)
                # 3. tun_writer
                if packet:
                    sealing.take(packet, tun, c)
        # 4. expire
        reassembler.expire(now)
        sealing.tick(now)
        if opener is not None:
            opener.tick()
        if control_ready:
            child.handle_control()
        if child.stats_due(now):
            child.send_stats({**c, **rx_stats(reassembler, opener, last_heard, now)})
        # 5. wait
        fds: list[Any] = [child.conn_fd]
        timeout = 0.25
        fd = waitable(radio)
        if radio is not None and fifo.more_waiting(radio):
            timeout = 0.0  # frames already there: no sleeping on them
        elif fd is not None:
            fds.append(fd)
        elif radio is not None:
            timeout = 0.0002  # a backend without a descriptor is polled
        control_ready = child.conn_fd in select.select(fds, [], [], timeout)[0]
    if opener is not None:
        opener.flush()
    child.close_radio()
