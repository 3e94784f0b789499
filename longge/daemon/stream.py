"""The radio processes in stream mode (``radio.mode = "stream"``, docs/design.md §4).

The chips send without acknowledgements; LongGe's ARQ (``protocol/arq.py``) acknowledges over
the reverse channel. Each node's RX process owns the receiving half (the peer's data in,
ACKs out) and its TX process the sending half (our data out, the peer's ACKs in), so the RX
process hands the TX process two kinds of message over a socket pair the supervisor made:

    ``o`` + peer + control frame    send this ACK/RESYNC to the peer, ahead of our data
    ``i`` + peer + control frame    the peer's ACK/RESYNC, for our sender to it

(peer: one byte, the peer's index in the node's table).

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

import socket
import time
from collections import deque
from collections.abc import Sequence
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
from longge.daemon.peers import (
    RxCounters,
    TxCounters,
    deliver,
    make_queues,
    next_packet,
    preempt,
    queue_parts,
    read_tun,
    receivers,
    senders_once_recorded,
    table_stats,
)
from longge.daemon.radio_rx import flush, rx_stats, tend
from longge.daemon.radio_tx import link_control
from longge.protocol.arq import CONTROL, RESET, ArqSender, ArqStats
from longge.protocol.arq_receiver import ArqReceiver
from longge.protocol.peer import PeerReceiver, PeerSender, PeerTable
from longge.radio.interface import LinkRadio
from longge.tun import Tun, TunError

TO_TX, FOR_SENDER = b"o", b"i"
#: Control frames (ACKs, resyncs) from our RX process that wait for the TX radio at most.
CONTROL_BACKLOG = 16


def sender_arqs(table: PeerTable[PeerSender]) -> list[ArqSender]:
    """The peers' ARQ senders, in the table's order (every peer has one in stream mode)."""
    arqs = [p.arq for p in table if p.arq is not None]
    if len(arqs) != len(table):
        raise ValueError("stream mode: a peer without its ARQ")
    return arqs


def receiver_arqs(table: PeerTable[PeerReceiver]) -> list[ArqReceiver]:
    arqs = [p.arq for p in table if p.arq is not None]
    if len(arqs) != len(table):
        raise ValueError("stream mode: a peer without its ARQ")
    return arqs


def arq_timeout(arqs: Sequence[ArqSender | ArqReceiver], now: float) -> float:
    """How long a stream-mode process may sleep: until its ARQs' next timer, 0.25 s at most."""
    deadlines = [d for a in arqs if (d := a.next_deadline()) is not None]
    return max(0.0, min([0.25, *(d - now for d in deadlines)]))


def _arq_stats(stats: list[ArqStats]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in stats:
        for k, v in vars(s).items():
            if v:
                out[k] = out.get(k, 0) + v
    return out


class StreamSending:
    """The TX process's stream-mode state beside its peers: our receiver's ACKs waiting to go
    (bounded, for a TX radio that is away while the RX radio hears on: each ACK says all its
    older ones did, and the receiver repeats them), and the burst the chip is in."""

    def __init__(self, cfg: NodeConfig, table: PeerTable[PeerSender], c: TxCounters) -> None:
        self.arqs = sender_arqs(table)
        self.c = c
        self.control: deque[bytes] = deque(maxlen=CONTROL_BACKLOG)
        self.burst = cfg.radio.timing().stream_burst_frames
        self.in_burst = 0
        self.last_sent = time.monotonic()

    def idle(self) -> bool:
        return all(a.idle for a in self.arqs)

    def _next(self, now: float) -> bytes | None:
        if self.control:
            return self.control.popleft()
        for arq in self.arqs:
            frame = arq.next_frame(now)
            if frame is not None:
                return frame
        return None

    def fill(self, radio: LinkRadio, now: float) -> None:
        """Load the TX FIFO while it has room, within the burst (the 4 ms rule)."""
        c = self.c
        state = radio.is_fifo(True)  # one look at the chip a frame (a syscall on sim)
        if self.in_burst and state == FIFO_EMPTY:
            # the FIFO drained: the chip is in standby again (a burst cut short: the sender
            # had nothing to send, or this process came back too late)
            c.bursts += 1
            if self.in_burst < self.burst:
                c.bursts_short += 1
            self.in_burst = 0
        while self.in_burst < self.burst and state in (FIFO_EMPTY, FIFO_OCCUPIED):
            frame = self._next(now)
            if frame is None:
                if not self.idle():
                    c.window_full += 1
                break
            radio.start_fast_write(frame)  # room: just seen (write_fast would ask again)
            self.in_burst += 1
            c.frames_sent += 1
            if frame[0] & CONTROL and frame[0] != RESET:
                c.control_sent += 1
            self.last_sent = now
            state = radio.is_fifo(True)


def run_tx(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket) -> None:
    child = Child(cfg, "tx", conn)
    table = senders_once_recorded(cfg, child)
    if table is None:
        return
    queues = make_queues(cfg, table)
    c = TxCounters()
    out = StreamSending(cfg, table, c)
    arqs = out.arqs
    loading: PeerSender | None = None  # the peer whose packet is being offered to its ARQ
    # What the last select() found readable; what it was not asked about is looked at anyway.
    # The loop runs once per frame or two: a look at a descriptor that has nothing costs more
    # than the frame's own work.
    asked: list[Any] = []
    ready: list[Any] = []

    def look(obj: Any) -> bool:
        return obj in ready or obj not in asked

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
            if len(msg) < 3 or msg[1] >= len(arqs):
                continue
            if msg[:1] == TO_TX:
                out.control.append(msg[2:])
            elif msg[:1] == FOR_SENDER:
                arqs[msg[1]].on_control(msg[2:], now)
        # The FIFO first: two frames' time after a slot frees it runs dry, and taking in a
        # packet (TUN read, seal, cut) can take a good part of that.
        if radio is not None:
            out.fill(radio, now)
        if look(tun):
            try:
                read_tun(tun, cfg.mtu, radio is not None, table, queues, c, now)
            except TunError as exc:
                child.fail(str(exc))
                break
        # the packets the peers' ARQs have room for, cut into frames
        offered = False
        while radio is not None:
            if loading is None or not loading.frames:
                loading = next_packet(queues, table, now)
                if loading is None:
                    break
            else:
                preempt(queues, loading, now)  # an interactive packet goes first
            if not loading.feed_arq():
                break
            offered = True
        if radio is not None:
            if now - out.last_sent >= cfg.keepalive_s and out.idle() and not len(queues):
                for peer, arq in zip(table, arqs, strict=True):
                    for frame in peer.keepalive(now):
                        arq.offer(frame)
                out.last_sent = now
                offered = True
            if offered:
                out.fill(radio, time.monotonic())
        if look(child.conn_fd):
            child.handle_control()
        if loading is None or not loading.frames:
            link_control(child, table)
            loading = next((p for p in table if p.frames), loading)
        if child.stats_due(now):
            stats = {
                **table_stats(c, {p.name: p.stats() for p in table}, queue_parts(table, queues)),
                **queues.stats(now),
                "retransmissions": sum(a.stats.retransmitted for a in arqs),
                "arq": {
                    **_arq_stats([a.stats for a in arqs]),
                    "in_flight": sum(a.in_flight for a in arqs),
                },
                "mode": "stream",
            }
            stats["queue_packets"] += sum(1 for p in table if p.frames)  # packets being loaded
            child.send_stats(stats)
        # (the TUN is always asked: a read that finds nothing costs more than its place here)
        timeout = arq_timeout(arqs, now)
        # Waiting for the FIFO to drain (the 4 ms rule), each frame's news wakes us; the last
        # one's, taken in by a look since, would not: a new burst now. (On an IRQ pin a frame
        # that ended since the look at the top left an edge.)
        look_now = (
            out.in_burst >= out.burst
            and radio is not None
            and waitable(radio) is not None
            and not on_irq(radio)
            and bool(radio.is_fifo(True, True))
        )
        # a backend without a descriptor (pyrf24) is polled while frames are on their way
        busy = any(p.frames for p in table) or out.control or out.in_burst or not out.idle()
        fd = waitable(radio)
        asked = [child.conn_fd, pair, tun] if fd is None else [child.conn_fd, pair, tun, fd]
        ready = child.wait(radio, timeout, now=look_now, poll=bool(busy), also=(pair, tun))
    child.close_radio()


def run_rx(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket) -> None:
    child = Child(cfg, "rx", conn)
    table = receivers(cfg)
    arqs = receiver_arqs(table)
    c = RxCounters()
    control_ready = True  # the supervisor's pipe: looked at when select() found it readable

    def to_tx(kind: bytes, index: int, frame: bytes) -> None:
        try:
            pair.send(kind + bytes((index,)) + frame)
        except BlockingIOError:
            c.pair_full += 1  # the TX process is behind: an ACK is repeated anyway

    fifo = RxFifo()
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        if radio is not None:
            # The pin's edges before each look at the RX FIFO: a frame after it leaves one.
            take_edges(radio)
            state = radio.is_fifo(False)  # one look: empty, full or neither
            if state == FIFO_FULL:
                for arq in arqs:
                    arq.fell_behind()
            # (not a chip that reads 0xFF: is_fifo 3; the look's STATUS names the pipe)
            waiting = state in (FIFO_OCCUPIED, FIFO_FULL)
            first = (radio.get_status_flags() >> 1) & 7 if waiting else 7
            for pipe, frame in fifo.frames(radio, first):
                c.frames_in += 1
                peer = table.by_pipe(pipe)
                if peer is None:
                    c.no_peer += 1
                    continue
                if frame and frame[0] & CONTROL and frame[0] != RESET:
                    c.acks_in += 1
                    to_tx(FOR_SENDER, peer.index, frame)
                    continue
                for inner in arqs[peer.index].on_frame(frame, now):
                    packet = peer.receive(inner, now)
                    if packet is not None:
                        deliver(tun, packet, c)
        for index, arq in enumerate(arqs):
            ack = arq.control(now)
            if ack is not None:
                to_tx(TO_TX, index, ack)
        tend(child, table, now)
        if control_ready:
            child.handle_control()
        if child.stats_due(now):
            stats = rx_stats(c, table, now)
            stats.update(arq=_arq_stats([a.stats for a in arqs]), mode="stream")
            child.send_stats(stats)
        timeout = arq_timeout(arqs, now)
        more = radio is not None and fifo.more_waiting(radio)
        ready = child.wait(radio, timeout, now=more, poll=True)
        control_ready = child.conn_fd in ready
    flush(table)
    child.close_radio()
