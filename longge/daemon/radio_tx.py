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

import signal
import time
from multiprocessing.connection import Connection

from longge.config import NodeConfig
from longge.daemon.child import FIFO_FULL, Child, on_irq, take_edges, waitable
from longge.daemon.peers import (
    TxCounters,
    make_queue,
    next_packet,
    queue_stats,
    read_tun,
    senders,
    table_stats,
)
from longge.protocol.peer import PeerSender, PeerTable
from longge.tun import Tun, TunError

#: After this many MAX_RT in a row the radio is re-initialised (the interface stays up).
MAX_RT_STORM = 64


def link_control(child: Child, table: PeerTable[PeerSender]) -> None:
    """What the RX process passed on through the supervisor (child.py), for a peer between
    two packets: it refuses our epochs, or its sender is stale."""
    for peer in table:
        if not peer.frames:
            peer.link_control(child.skip_past, child.floor_to_send)
            child.skip_past = child.floor_to_send = None


def tx_stats(
    c: TxCounters,
    table: PeerTable[PeerSender],
    queue_part: dict[str, object],
    radio_part: dict[str, object],
) -> dict[str, object]:
    return {**table_stats(c, [p.stats() for p in table]), **queue_part, **radio_part}


def run(cfg: NodeConfig, tun: Tun, conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when we stop
    child = Child(cfg, "tx", conn)
    table = senders(cfg)
    queue = make_queue(cfg)
    c = TxCounters()
    sending: PeerSender | None = None  # the peer whose packet is being loaded
    last_sent = time.monotonic()
    storm = 0  # MAX_RT in a row, without a frame acknowledged in between
    pending_max_rt = False  # seen just before sleeping (what_happened may clear the flag)
    control_ready = True  # the supervisor's pipe: looked at when select() found it readable
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        take_edges(radio)
        try:
            read_tun(tun, cfg.mtu, radio is not None, queue, c, now)
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
                storm += 1
                if sending is not None:
                    sending.max_rt()
                if storm >= MAX_RT_STORM:  # a wedged chip looks like this too: start it over
                    storm = 0
                    child.reinitialise(f"{MAX_RT_STORM} MAX_RT in a row")
                    continue
            while radio.is_fifo(True) != FIFO_FULL:
                if sending is None or not sending.frames:
                    # 2. scheduler, 3. fragmenter (sealed, for its peer)
                    sending = next_packet(queue, table, c, now)
                    if sending is None:
                        break
                # 4. radio_tx: room just seen (write_fast would ask the chip again). A MAX_RT
                # meanwhile halts the chip with this frame loaded; step 5 flushes it next turn
                # and drops what is left of its packet.
                radio.start_fast_write(sending.frames.popleft())
                c.frames_sent += 1
                last_sent = now
            # 6. keepalive
            idle = sending is None or not sending.frames
            if now - last_sent >= cfg.keepalive_s and idle and not len(queue):
                for peer in table:
                    for frame in peer.keepalive():
                        radio.write_fast(frame)
                    sending = peer  # (a MAX_RT now is this peer's)
                last_sent = now
        if control_ready:
            child.handle_control()
        if sending is None or not sending.frames:
            link_control(child, table)
            sending = next((p for p in table if p.frames), sending)
        if child.stats_due(now):
            child.send_stats(
                tx_stats(
                    c,
                    table,
                    queue_stats(queue, now),
                    {"retransmissions": None if radio is None else radio.retransmissions},
                )
            )
        # 7. wait
        frames = sending is not None and bool(sending.frames)
        work = frames or bool(len(queue))  # a frame to load or a packet queued
        look_now = False
        if radio is not None and not on_irq(radio):
            # (On an IRQ pin, news since the look above left an edge: no second look.)
            # A MAX_RT taken in while loading (a backend may read the radio's news) leaves the
            # descriptor quiet: look now, or the radio would idle until the timeout. Looked at
            # before the descriptor: what_happened clears the chip's flags, and an IRQ pin
            # falls again only after that.
            sent_ok, pending_max_rt, _ = radio.what_happened()
            if sent_ok:
                storm = 0
            # A payload went out since the FIFO was loaded, and its news was taken in just
            # now: sleeping on the descriptor would wait for news that may never come (the
            # FIFO may have drained meanwhile): load first. It once slept 0.25 s so with a
            # packet half loaded on a busy machine (pings 255 ms late).
            look_now = pending_max_rt or (sent_ok and work)
        # A backend without a descriptor (pyrf24 without its IRQ pin) is polled while anything
        # is on its way: a frame to load, a packet queued, or frames in the chip's FIFO whose
        # fate is not known yet. (It slept 0.25 s once the FIFO held a packet's last frames,
        # with more queued: packets expired in a queue that should have moved every 1.5 ms.)
        poll = (
            radio is not None
            and waitable(radio) is None
            and (work or not radio.is_fifo(True, True))
        )
        ready = child.wait(radio, 0.25, now=look_now, poll=poll, also=() if frames else (tun,))
        control_ready = child.conn_fd in ready
    child.close_radio()
