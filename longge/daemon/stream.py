"""The radio processes in stream mode (``radio.mode = "stream"``, docs/design.md §4).

The chips send without acknowledgements; LongGe's ARQ (``protocol/arq.py``) acknowledges over
the reverse channel. Each node's RX process owns the receiving half (the peer's data in,
ACKs out) and its TX process the sending half (our data out, the peer's ACKs in), so the RX
process hands the TX process two kinds of message over a socket pair the supervisor made:

    ``o`` + control frame    send this ACK/RESYNC on our TX radio, ahead of our data
    ``i`` + control frame    the peer's ACK/RESYNC, for our sender

TX loop: read the TUN into the fair queue; control frames first, then whatever the ARQ
sender has (a RESET, a retransmission, a new frame of the next packet); keep the 4 ms rule
(after a burst of ``stream_burst_frames`` frames the TX FIFO is let drain, and the chip
returns to standby); sleep until the TUN, the radio, the RX process, the supervisor or the
ARQ's timer has something.

RX loop: read every frame; tell the receiver when the chip's RX FIFO was full (it asks the
sender to slow down); data and RESET to the ARQ receiver and what it delivers to the
reassembler and the TUN; the peer's ACKs to the TX process; our ACKs out through it.
"""

from __future__ import annotations

import select
import socket
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from longge.config import NodeConfig
from longge.daemon.child import (
    FIFO_EMPTY,
    FIFO_FULL,
    FIFO_OCCUPIED,
    Child,
    RxFifo,
    on_irq,
    take_edges,
    waitable,
)
from longge.daemon.fairqueue import FairQueue
from longge.protocol import Fragmenter, secure
from longge.protocol.arq import (
    CONTROL,
    MAX_INNER,
    MAX_WINDOW,
    RESET,
    ArqSender,
    ArqStats,
)
from longge.protocol.arq_receiver import ArqReceiver
from longge.tun import Tun, TunError

REASSEMBLY_TIMEOUT_S = 5.0
TO_TX, FOR_SENDER = b"o", b"i"
#: Frames the ARQ sender holds beyond its window: enough for the next FIFO refills, no more.
#: The fair queue decides what goes next; frames already handed to the sender wait in order,
#: and a backlog of a few hundred (the sender's default) kept a ping ~50 ms behind a UDP
#: stream at saturation.
SENDER_BACKLOG = 8
#: Control frames (ACKs, resyncs) from our RX process that wait for the TX radio at most.
CONTROL_BACKLOG = 16


def _arq_stats(s: ArqStats) -> dict[str, int]:
    return {k: v for k, v in vars(s).items() if v}


def run_tx(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket) -> None:
    from longge.daemon.keystate import make_sealer
    from longge.daemon.radio_tx import (
        keepalive_frames,
        queue_limit_bytes,
        queue_stats,
        read_tun,
        sealing_news,
    )

    child = Child(cfg, "tx", conn)
    sealer = make_sealer(cfg)
    overhead = secure.OVERHEAD if sealer is not None else 0
    fragmenter = Fragmenter(MAX_INNER, cfg.mtu + overhead)
    sender = ArqSender(backlog=SENDER_BACKLOG)
    burst = cfg.radio.timing().stream_burst_frames
    in_burst = 0
    # our receiver's ACKs, sent before any data; bounded, for a TX radio that is away while the
    # RX radio hears on (each ACK says all its older ones did, and the receiver repeats them)
    control: deque[bytes] = deque(maxlen=CONTROL_BACKLOG)
    waiting: deque[bytes] = deque()  # frames of the packet being loaded into the sender
    queue = FairQueue(queue_limit_bytes(cfg), cfg.queue_ms / 1000, fair=cfg.queue == "fair")
    c: dict[str, Any] = dict.fromkeys(
        ("packets_in", "bytes_in", "packets_sent", "frames_sent", "control_sent"), 0
    )
    c.update(dict.fromkeys(("keepalives_sent", "dropped_no_radio", "oversize", "max_rt"), 0))
    c.update(dict.fromkeys(("epoch_skips", "floors_sent"), 0))
    c.update(dict.fromkeys(("bursts", "bursts_short", "window_full"), 0))
    last_sent = time.monotonic()
    # What the last select() found readable; what it was not asked about is looked at anyway.
    # The loop runs once per frame or two: a look at a descriptor that has nothing costs more
    # than the frame's own work.
    asked: list[Any] = []
    ready: list[Any] = []

    def look(obj: Any) -> bool:
        return obj in ready or obj not in asked

    def seal(packet: bytes) -> bytes:
        return sealer.seal(packet) if sealer is not None else packet

    def fill(radio: Any, now: float) -> None:
        """Load the TX FIFO while it has room, within the burst (the 4 ms rule)."""
        nonlocal in_burst, last_sent
        state = radio.is_fifo(True)  # one look at the chip a frame (a syscall on sim)
        if in_burst and state == FIFO_EMPTY:
            # the FIFO drained: the chip is in standby again (a burst cut short: the sender
            # had nothing to send, or this process came back too late)
            c["bursts"] += 1
            if in_burst < burst:
                c["bursts_short"] += 1
            in_burst = 0
        while in_burst < burst and state in (FIFO_EMPTY, FIFO_OCCUPIED):
            frame = control.popleft() if control else sender.next_frame(now)
            if frame is None:
                if not sender.idle:
                    c["window_full"] += 1
                break
            radio.start_fast_write(frame)  # room: just seen (write_fast would ask again)
            in_burst += 1
            c["frames_sent"] += 1
            if frame[0] & CONTROL and frame[0] != RESET:
                c["control_sent"] += 1
            last_sent = now
            state = radio.is_fifo(True)

    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        if radio is not None and on_irq(radio):
            take_edges(radio)
            radio.what_happened()  # the IRQ pin falls again only once TX_DS is cleared
        while look(pair):  # from the RX process
            try:
                msg = pair.recv(64)
            except BlockingIOError:
                break
            if msg[:1] == TO_TX:
                control.append(msg[1:])
            elif msg[:1] == FOR_SENDER:
                sender.on_control(msg[1:], now)
        # The FIFO first: two frames' time after a slot frees it runs dry, and taking in a
        # packet (TUN read, seal, cut) can take a good part of that.
        if radio is not None:
            fill(radio, now)
        if look(tun):
            try:
                read_tun(tun, cfg, radio is not None, queue, c, now)
            except TunError as exc:
                child.fail(str(exc))
                break
        # the packets the sender has room for, cut into frames
        offered = False
        while True:
            if not waiting:
                next_packet = queue.pop(now) if radio is not None else None
                if next_packet is None:
                    break
                waiting.extend(fragmenter.fragment(seal(next_packet)))
                c["packets_sent"] += 1
            if not sender.offer(waiting[0]):
                break
            waiting.popleft()
            offered = True
        if radio is not None:
            if now - last_sent >= cfg.keepalive_s and sender.idle and not len(queue):
                for frame in keepalive_frames(fragmenter, sealer):
                    sender.offer(frame)
                c["keepalives_sent"] += 1
                last_sent = now
                offered = True
            if offered:
                fill(radio, time.monotonic())
        if look(child.conn_fd):
            child.handle_control()
        if not waiting:
            waiting.extend(sealing_news(child, sealer, fragmenter, c))
        if child.stats_due(now):
            stats = {**c, **queue_stats(queue, now)}
            stats["queue_packets"] += 1 if waiting else 0  # the packet being loaded
            stats.update(
                retransmissions=sender.stats.retransmitted,
                arq={**_arq_stats(sender.stats), "in_flight": sender.in_flight},
                mode="stream",
                sealed=None if sealer is None else sealer.sealed,
                epoch=None if sealer is None else sealer.epoch,
            )
            child.send_stats(stats)
        # (the TUN is always asked: a read that finds nothing costs more than its place here)
        fds: list[Any] = [child.conn_fd, pair, tun]
        timeout = 0.25
        deadline = sender.next_deadline()
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - now))
        fd = waitable(radio)
        if fd is not None:
            fds.append(fd)
            if (
                in_burst >= burst
                and radio is not None
                and not on_irq(radio)
                and radio.is_fifo(True, True)
            ):
                # Waiting for the FIFO to drain (the 4 ms rule), each frame's news wakes us;
                # the last one's, taken in by a look since, would not: a new burst now. (On
                # an IRQ pin a frame that ended since the look at the top left an edge.)
                timeout = 0.0
        elif radio is not None and (waiting or control or in_burst or not sender.idle):
            # a backend without a descriptor (pyrf24) is polled while frames are on their way
            timeout = min(timeout, 0.0002)
        asked = fds
        ready = select.select(fds, [], [], timeout)[0]
    child.close_radio()


def run_rx(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket) -> None:
    from longge.daemon.keystate import make_opener
    from longge.daemon.radio_rx import RX_COUNTERS, Sealing, make_reassembler, rx_stats

    child = Child(cfg, "rx", conn)
    opener = make_opener(cfg)
    # The ARQ delivers a packet's frames late rather than never (its timers back off under
    # heavy loss): a packet in progress waits longer than with ESB before it is given up.
    reassembler = make_reassembler(cfg, opener, REASSEMBLY_TIMEOUT_S, late_guard=MAX_WINDOW)
    receiver = ArqReceiver()
    sealing = Sealing(child, opener)
    c: dict[str, Any] = dict.fromkeys((*RX_COUNTERS, "acks_in", "pair_full"), 0)
    last_heard: float | None = None
    control_ready = True  # the supervisor's pipe: looked at when select() found it readable

    def to_tx(kind: bytes, frame: bytes) -> None:
        try:
            pair.send(kind + frame)
        except BlockingIOError:
            c["pair_full"] += 1  # the TX process is behind: an ACK is repeated anyway

    fifo = RxFifo()
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        if radio is not None:
            # The pin's edges before each look at the RX FIFO: a frame after it leaves one.
            take_edges(radio)
            state = radio.is_fifo(False)  # one look: empty, full or neither
            if state == FIFO_FULL:
                receiver.fell_behind()
            # (not a chip that reads 0xFF: is_fifo 3)
            for frame in fifo.frames(radio, state in (FIFO_OCCUPIED, FIFO_FULL)):
                c["frames_in"] += 1
                if frame and frame[0] & CONTROL and frame[0] != RESET:
                    c["acks_in"] += 1
                    to_tx(FOR_SENDER, frame)
                    continue
                for inner in receiver.on_frame(frame, now):
                    packet = reassembler.receive(inner, now)
                    if packet is not None:  # heard: a packet that passed its checks (and the
                        last_heard = now  # AEAD), not any frame (nor an ARQ ACK) on the air
                    if packet:
                        sealing.take(packet, tun, c)
        ack = receiver.control(now)
        if ack is not None:
            to_tx(TO_TX, ack)
        reassembler.expire(now)
        sealing.tick(now)
        if opener is not None:
            opener.tick()
        if control_ready:
            child.handle_control()
        if child.stats_due(now):
            stats = {**c, **rx_stats(reassembler, opener, last_heard, now)}
            stats.update(arq=_arq_stats(receiver.stats), mode="stream")
            child.send_stats(stats)
        fds: list[Any] = [child.conn_fd]
        timeout = 0.25
        deadline = receiver.next_deadline()
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - now))
        fd = waitable(radio)
        if radio is not None and fifo.more_waiting(radio):
            timeout = 0.0
        elif fd is not None:
            fds.append(fd)
        elif radio is not None:
            timeout = min(timeout, 0.0002)
        control_ready = child.conn_fd in select.select(fds, [], [], timeout)[0]
    if opener is not None:
        opener.flush()
    child.close_radio()
