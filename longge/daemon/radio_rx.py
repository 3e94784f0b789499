"""The RX radio process: radio -> frames -> packets -> TUN. One loop:

1. radio_rx     read every frame the RX FIFO holds (the air stops acknowledging when full);
2. reassembler  rebuild packets (``longge.protocol``): whole and checked, or counted drops;
3. tun_writer   hand each packet to the kernel; a keepalive only marks the peer as alive;
4. expire       a half-built packet that waited too long is dropped;
5. wait         sleep until the radio or the supervisor has something.
"""

from __future__ import annotations

import select
import signal
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from longge.config import NodeConfig
from longge.daemon.child import Child, RxFifo, take_edges, waitable
from longge.protocol import Reassembler, secure
from longge.tun import Tun


def make_opener(cfg: NodeConfig) -> secure.Opener | None:
    """This node's opener (None on an open link): the peer's direction key (and the previous
    one while rotating), with the replay mark kept in the state directory."""
    if cfg.key is None:
        return None
    peer = "mobile" if cfg.role == "base" else "base"
    keys = [secure.direction_key(k, peer) for k in (cfg.key, cfg.previous_key) if k is not None]
    return secure.Opener(keys, mark_file(cfg), clock=time.monotonic)


def mark_file(cfg: NodeConfig) -> Path:
    return Path(cfg.state_dir) / f"{cfg.tun}.{cfg.role}.rx-mark"


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


def rx_stats(
    reassembler: Reassembler, opener: secure.Opener | None, last_heard: float | None, now: float
) -> dict[str, Any]:
    """The reassembler's and the opener's part of an RX process's counters."""
    return {
        "keepalives": reassembler.keepalives,
        "drops": {str(k): v for k, v in reassembler.drops.items()},
        "peer_last_heard_s": None if last_heard is None else round(now - last_heard, 3),
        "retransmissions": None,
        "security": None
        if opener is None
        else {"opened": opener.opened, "drops": {str(k): v for k, v in opener.drops.items()}},
    }


def run(cfg: NodeConfig, tun: Tun, conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = Child(cfg, "rx", conn)
    opener = make_opener(cfg)
    reassembler = make_reassembler(cfg, opener)
    c: dict[str, Any] = dict.fromkeys(("frames_in", "packets_out", "bytes_out", "tun_refused"), 0)
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
                    deliver(tun, packet, c)
        # 4. expire
        reassembler.expire(now)
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
