"""The RX radio process: radio -> frames -> packets -> TUN. One loop:

1. radio_rx     read every frame the RX FIFO holds (the air stops acknowledging when full);
2. reassembler  rebuild packets (``longge.protocol``): whole and checked, or counted drops;
3. tun_writer   hand each packet to the kernel; a keepalive only marks the peer as alive;
   uplink       what a peer's packet said of the shared uplink (protocol/uplink.py) goes to
                the TX process over the pair: ``g`` + peer + the grant (Grant.wire) + when
                (a double, the monotonic clock: our base grants us the uplink), ``a`` + peer
                + when (we were delivered a packet that asks for an answer), ``r`` + peer
                + the grant's number (a mobile ends its grant), ``h`` + peer (a base with
                several mobiles heard one's IP packet: it sent in its grant), ``k`` + peer
                (its keepalive, or other link control: it lives, but sends no traffic);
   aside        a base with several mobiles: frames its TX radio heard on the downlink's
                channel between its bursts come over the pair (``x`` + pipe + frame), taken
                as this radio's (aside.py);
   (adapt)      with ``adapt`` and one peer: the RX radio at the rate the peer announced
                (adapt_rx.py);
4. expire       a half-built packet that waited too long is dropped;
5. wait         sleep until the radio or the supervisor has something.
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

from longge.config import NodeConfig
from longge.daemon.adapt_rx import RateListening
from longge.daemon.child import Child, RxFifo, take_edges
from longge.daemon.messages import (
    MAX_LEN,
    AnswerAsked,
    GrantHeard,
    Heard,
    HeardAside,
    Message,
    Released,
    decode,
    encode,
)
from longge.daemon.peers import RxCounters, deliver, receivers, table_stats
from longge.daemon.radio_owner import hears_aside
from longge.protocol.peer import PeerReceiver, PeerTable
from longge.protocol.uplink import asks_answer
from longge.tun import Tun


def tend(child: Child, table: PeerTable[PeerReceiver], now: float) -> None:
    """4. expire, and the link control each peer's packets asked for: a floor the peer sent
    (for our TX process), a stale sender of the peer's (tell it its floor): both through the
    supervisor (child.py)."""
    for peer in table:
        stale = peer.tick(now)
        if stale is not None:
            child.tell("stale", peer.index, stale)
        floor = peer.take_floor()
        if floor is not None:
            child.tell("floor", peer.index, floor)


def uplink_news(
    pair: socket.socket | None,
    table: PeerTable[PeerReceiver],
    peer: PeerReceiver,
    c: RxCounters,
    now: float,
    sent: bool = True,
) -> None:
    """3. uplink: a whole packet of ``peer``'s came (``sent``: an IP packet); what it said of
    the uplink, for our TX process (the pair: made by the supervisor)."""
    grant, release = peer.take_uplink()
    if pair is None:
        return
    msg: Message
    if grant is not None:  # (with when it came: the TX process may read it later)
        msg = GrantHeard(peer.index, grant, now)
    elif release is not None:
        msg = Released(peer.index, release)
    elif len(table) > 1:  # (a keepalive, or another link-control packet: it lives)
        msg = Heard(peer.index, sent)
    else:
        return
    to_tx(pair, msg, c)


def to_tx(pair: socket.socket, msg: Message, c: RxCounters) -> None:
    try:
        pair.send(encode(msg))
    except OSError:  # (BlockingIOError: the pair is full)
        c.pair_full += 1  # the TX process is behind (or gone): a grant ends by its time anyway


def answer_news(
    pair: socket.socket | None, peer: PeerReceiver, packet: bytes, c: RxCounters, now: float
) -> None:
    """3. uplink: a mobile whose base grants the uplink was delivered a packet that asks for
    an answer (a ping, a TCP segment): its TX process keeps a grant that finds it idle a
    while for the answer (uplink.ANSWER_S)."""
    if pair is not None and peer.grants_heard and asks_answer(packet):
        to_tx(pair, AnswerAsked(peer.index, now), c)


def take(
    tun: Tun,
    pair: socket.socket | None,
    table: PeerTable[PeerReceiver],
    c: RxCounters,
    pipe: int,
    frame: bytes,
    now: float,
) -> None:
    """1. one frame, the pipe it came on: 2. reassembler (and, on a secured link, the AEAD:
    a stranger's frames move nothing); 3. tun_writer."""
    c.frames_in += 1
    peer = table.by_pipe(pipe)
    if peer is None:
        c.no_peer += 1
        return
    heard = peer.heard
    packet = peer.receive(frame, now)
    if peer.heard != heard:  # a whole packet (a keepalive, link control)
        uplink_news(pair, table, peer, c, now, packet is not None)
    if packet is not None:
        deliver(tun, packet, c)
        answer_news(pair, peer, packet, c, now)


def heard_aside(
    pair: socket.socket, c: RxCounters, take: Callable[[int, bytes, float], None], now: float
) -> None:
    """1. (a base with several mobiles) the frames our TX radio heard on the downlink's
    channel between its bursts (``HeardAside``: aside.py), taken as our radio's (``take``:
    pipe, frame, now)."""
    while True:
        try:
            msg = decode(pair.recv(MAX_LEN + 1))
        except OSError:  # (BlockingIOError: nothing more)
            return
        if isinstance(msg, HeardAside):
            c.frames_aside += 1
            take(msg.pipe, msg.frame, now)


def rx_stats(c: RxCounters, table: PeerTable[PeerReceiver], now: float) -> dict[str, Any]:
    return table_stats(c, {p.name: p.stats(now) for p in table})


def flush(table: PeerTable[PeerReceiver]) -> None:
    """At the end: the replay marks written."""
    for peer in table:
        if peer.opener is not None:
            peer.opener.flush()


def run(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = Child(cfg, "rx", conn)
    table = receivers(cfg)
    c = RxCounters()
    fifo = RxFifo()
    rates = RateListening()
    control_ready = True  # the supervisor's pipe: looked at when select() found it readable
    aside = hears_aside(cfg) and pair is not None
    pair_ready = aside
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        if radio is not None:
            # The pin's edges before each look at the RX FIFO: a frame after it leaves one.
            take_edges(radio)
            waiting, first = radio.available_pipe()
            # 1. radio_rx
            for pipe, frame in fifo.frames(radio, first if waiting else 7):
                take(tun, pair, table, c, pipe, frame, now)
            rates.step(child, table, now)
        if pair is not None and pair_ready:
            heard_aside(pair, c, partial(take, tun, pair, table, c), now)
        tend(child, table, now)
        if control_ready:
            child.handle_control()
        if child.stats_due(now):
            child.send_stats({**rx_stats(c, table, now), "adapt": rates.stats(now)})
        # 5. wait
        more = radio is not None and fifo.more_waiting(radio)  # frames there: no sleeping
        also = (pair,) if aside else ()
        ready = child.wait(radio, rates.wait_s(now, 0.25), now=more, poll=True, also=also)
        control_ready = child.conn_fd in ready
        pair_ready = aside and pair in ready
    flush(table)
    child.close_radio()
