"""The TX radio process: TUN -> queue -> frames -> radio. One loop of non-blocking calls:

1. tun_reader   read every packet the kernel has for the link into the fair queue;
2. scheduler    when the previous packet is loaded, take the next one (fair, bounded, aged);
3. fragmenter   cut it into frames (``longge.protocol``);
4. radio_tx     load frames while the TX FIFO has room (``start_fast_write``: never blocks);
5. max_rt       a frame that exhausted its retries: flush, abandon the rest of its packet;
6. keepalive    nothing sent for ``keepalive_s``: send a keepalive frame so the peer knows;
7. wait         sleep until the TUN, the radio or the supervisor has something.
"""

from __future__ import annotations

import select
import signal
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from longge.config import NodeConfig
from longge.daemon.child import FIFO_FULL, Child, on_irq, take_edges, waitable
from longge.daemon.fairqueue import SOJOURN_EDGES_MS, FairQueue
from longge.daemon.keystate import make_sealer
from longge.protocol import Fragmenter, secure
from longge.tun import Tun, TunError

#: After this many MAX_RT in a row the radio is re-initialised (the interface stays up).
MAX_RT_STORM = 64
#: Packets a sender reads from the TUN in one loop turn before it sees to the radio.
TUN_READ_BURST = 64


def queue_limit_bytes(cfg: NodeConfig) -> int:
    """The byte budget: what the air carries in ``queue_ms`` (at least three packets)."""
    rate = cfg.radio.air_bound_bps()
    return max(3 * (cfg.mtu + 14), int(rate / 8 * cfg.queue_ms / 1000))


def keepalive_frames(fragmenter: Fragmenter, sealer: secure.Sealer | None) -> list[bytes]:
    """6. keepalive: a packet of nothing, sealed on a secured link (the peer learns we live)."""
    return fragmenter.fragment(sealer.seal(b"")) if sealer else fragmenter.keepalive()


def sealing_news(
    child: Child, sealer: secure.Sealer | None, fragmenter: Fragmenter, c: dict[str, Any]
) -> list[bytes]:
    """What the RX process passed on (child.py), between two packets: the peer refuses our
    epochs (seal past them), or its sender is stale (the frames of a floor message for it)."""
    if sealer is None:
        child.skip_past = child.floor_to_send = None
        return []
    if child.skip_past is not None:
        if sealer.skip_past(child.skip_past):
            c["epoch_skips"] += 1
        child.skip_past = None
    if child.floor_to_send is None:
        return []
    frames = fragmenter.fragment(sealer.seal(secure.floor_message(child.floor_to_send)))
    child.floor_to_send = None
    c["floors_sent"] += 1
    return frames


def read_tun(
    tun: Tun, cfg: NodeConfig, ready: bool, queue: FairQueue, c: dict[str, Any], now: float
) -> None:
    """1. tun_reader: every packet the kernel has for the link into the queue (dropped, and
    counted, while the radio is down: ``ready`` False)."""
    for _ in range(TUN_READ_BURST):
        packet = tun.read()
        if not packet:
            break
        c["packets_in"] += 1
        c["bytes_in"] += len(packet)
        if len(packet) > cfg.mtu:
            c["oversize"] += 1
        elif not ready:
            c["dropped_no_radio"] += 1
        else:
            queue.push(packet, now)


def queue_stats(queue: FairQueue, now: float) -> dict[str, Any]:
    """The queue's part of a TX process's counters."""
    return {
        "queue_packets": len(queue),
        "queue_bytes": queue.bytes,
        "queue_limit_bytes": queue.limit_bytes,
        "queue_oldest_ms": round(queue.oldest_age(now) * 1000, 1),
        "queue_drops": dict(queue.drops),
        "queue_shared": queue.shared,
        "queue_delay_hist": list(queue.sojourn),
        "queue_delay_edges_ms": list(SOJOURN_EDGES_MS),
    }


def run(cfg: NodeConfig, tun: Tun, conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when we stop
    child = Child(cfg, "tx", conn)
    sealer = make_sealer(cfg)
    overhead = secure.OVERHEAD if sealer is not None else 0
    fragmenter = Fragmenter(cfg.radio.payload, cfg.mtu + overhead)

    def seal(packet: bytes) -> bytes:
        return sealer.seal(packet) if sealer is not None else packet

    queue = FairQueue(queue_limit_bytes(cfg), cfg.queue_ms / 1000, fair=cfg.queue == "fair")
    frames: deque[bytes] = deque()
    c: dict[str, Any] = dict.fromkeys(
        (
            "packets_in",
            "bytes_in",
            "packets_sent",
            "frames_sent",
            "max_rt",
            "packets_aborted",
            "keepalives_sent",
            "dropped_no_radio",
            "oversize",
            "epoch_skips",
            "floors_sent",
        ),
        0,
    )
    last_sent = time.monotonic()
    storm = 0  # MAX_RT in a row, without a frame acknowledged in between
    pending_max_rt = False  # seen just before sleeping (what_happened may clear the flag)
    control_ready = True  # the supervisor's pipe: looked at when select() found it readable
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        take_edges(radio)
        try:
            read_tun(tun, cfg, radio is not None, queue, c, now)
        except TunError as exc:
            child.fail(str(exc))
            break
        if radio is not None:
            # 5. max_rt (checked first: it decides what the FIFO holds)
            sent_ok, max_rt, _ = radio.what_happened()
            if sent_ok:
                storm = 0
            if max_rt or pending_max_rt:
                pending_max_rt = False
                radio.flush_tx()
                c["max_rt"] += 1
                storm += 1
                if frames:
                    frames.clear()
                    c["packets_aborted"] += 1
                if storm >= MAX_RT_STORM:  # a wedged chip looks like this too: start it over
                    storm = 0
                    child.reinitialise(f"{MAX_RT_STORM} MAX_RT in a row")
                    continue
            while radio.is_fifo(True) != FIFO_FULL:
                if not frames:
                    # 2. scheduler, 3. fragmenter
                    next_packet = queue.pop(now)
                    if next_packet is None:
                        break
                    frames.extend(fragmenter.fragment(seal(next_packet)))
                    c["packets_sent"] += 1
                # 4. radio_tx: room just seen (write_fast would ask the chip again). A MAX_RT
                # meanwhile halts the chip with this frame loaded; step 5 flushes it next turn
                # and drops what is left of its packet.
                radio.start_fast_write(frames.popleft())
                c["frames_sent"] += 1
                last_sent = now
            # 6. keepalive
            if now - last_sent >= cfg.keepalive_s and not frames and not len(queue):
                for frame in keepalive_frames(fragmenter, sealer):
                    radio.write_fast(frame)
                c["keepalives_sent"] += 1
                last_sent = now
        if control_ready:
            child.handle_control()
        if not frames:
            frames.extend(sealing_news(child, sealer, fragmenter, c))
        if child.stats_due(now):
            stats = {**c, **queue_stats(queue, now)}
            stats.update(
                retransmissions=None if radio is None else radio.retransmissions,
                sealed=None if sealer is None else sealer.sealed,
                epoch=None if sealer is None else sealer.epoch,
            )
            child.send_stats(stats)
        # 7. wait
        fds: list[Any] = [child.conn_fd]
        timeout = 0.25
        work = bool(frames or len(queue))  # a frame to load or a packet queued
        if radio is not None and not on_irq(radio):
            # (On an IRQ pin, news since the look above left an edge: no second look.)
            # A MAX_RT taken in while loading (a backend may read the radio's news) leaves the
            # descriptor quiet: look now, or the radio would idle until the timeout. Looked at
            # before the descriptor: what_happened clears the chip's flags, and an IRQ pin
            # falls again only after that.
            sent_ok, pending_max_rt, _ = radio.what_happened()
            if sent_ok:
                storm = 0
            if pending_max_rt:
                timeout = 0.0
            elif sent_ok and work:
                # A payload went out since the FIFO was loaded, and its news was taken in
                # just now: sleeping on the descriptor would wait for news that may never come
                # (the FIFO may have drained meanwhile): load first. It once slept 0.25 s so
                # with a packet half loaded on a busy machine (pings 255 ms late).
                timeout = 0.0
        fd = waitable(radio)
        if fd is not None:
            fds.append(fd)
        elif radio is not None and (work or not radio.is_fifo(True, True)):
            # A backend without a descriptor (pyrf24 without its IRQ pin) is polled while
            # anything is on its way: a frame to load, a packet queued, or frames in the
            # chip's FIFO whose fate is not known yet. (It slept 0.25 s once the FIFO held a
            # packet's last frames, with more queued: packets expired in a queue that should
            # have moved every 1.5 ms.)
            timeout = 0.0002
        if not frames:
            fds.append(tun)
        control_ready = child.conn_fd in select.select(fds, [], [], timeout)[0]
    child.close_radio()
