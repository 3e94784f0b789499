"""The radio processes in stream mode (``radio.mode = "stream"``, docs/design.md §4).

The chips send without acknowledgements; LongGe's ARQ (``protocol/arq.py``) acknowledges over
the reverse channel. Each node's RX process owns the receiving half (the peer's data in,
ACKs out) and its TX process the sending half (our data out, the peer's ACKs in), so the RX
process hands the TX process two kinds of message over a socket pair the supervisor made
(messages.py): ``AckToSend`` (an ACK/RESYNC of ours to send to the peer, ahead of our data)
and ``PeerAck`` (the peer's ACK/RESYNC, for our sender to it), and what it heard of the shared
uplink (radio_rx.py, "uplink"; ``FramesCame``: a base heard a mobile's frames); a base's TX
process hands its RX process what its TX radio heard between its bursts (``HeardAside``: a
light mobile's frames on the downlink's channel, aside.py).

TX loop: read the TUN into the fair queue; a base with several mobiles grants the uplink, a
mobile in its grant releases it (uplink_tx.py); control frames first, then whatever the ARQs
have (a RESET, a retransmission, a new frame of the next packet), a burst to one peer at a
time (stream_tx.py); keep the 4 ms rule (after a burst of ``stream_burst_frames`` frames the
TX FIFO is let drain, and the chip returns to standby); sleep until the TUN, the radio, the
RX process, the supervisor, the ARQ's timer or the uplink's has something.

RX loop: read every frame; tell the receiver when the chip's RX FIFO was full (it asks the
sender to slow down); data and RESET to the ARQ receiver and what it delivers to the
reassembler and the TUN; the peer's ACKs to the TX process; our ACKs out through it.
"""

from __future__ import annotations

import socket
import time
from multiprocessing.connection import Connection
from typing import Any

from longge.config import NodeConfig
from longge.daemon.adapt_rx import RateListening
from longge.daemon.child import (
    FIFO_FULL,
    FIFO_OCCUPIED,
    Child,
    RxFifo,
    on_irq,
    take_edges,
    waitable,
)
from longge.daemon.messages import (
    MAX_LEN,
    AckToSend,
    FramesCame,
    Message,
    PeerAck,
    decode,
    encode,
)
from longge.daemon.peers import (
    PREEMPT_MAX,
    RxCounters,
    TxCounters,
    deliver,
    make_queues,
    queue_parts,
    read_tun,
    receivers,
    senders_once_recorded,
    table_stats,
)
from longge.daemon.radio_owner import hears_aside
from longge.daemon.radio_rx import answer_news, flush, heard_aside, rx_stats, tend, uplink_news
from longge.daemon.radio_tx import link_control
from longge.daemon.stream_tx import StreamSending, arq_timeout, peer_arqs
from longge.protocol import rate as rt
from longge.protocol.arq_frames import CONTROL, RESET, ArqStats
from longge.protocol.uplink_scheduler import UplinkScheduler
from longge.tun import Tun, TunError

#: A base with several mobiles tells its TX process a mobile's frames came (``f``) at most this
#: often.
HEARD_EVERY_S = 0.005
#: ... and only while a whole authentic packet of the mobile's came within this long: a data
#: frame's sequence byte is anyone's, and frames on an absent mobile's pipe kept it "alive"
#: (full grants instead of backed-off probes: uplink_scheduler.py). A live mobile whose packet
#: waits behind a lost frame has sent one within its last grants; a stranger can so keep a
#: mobile that left alive for this long at most.
FRAMES_COUNT_S = 1.0
#: After the RX radio switched on an announcement (adapt), its ACK is sent again this often
#: until the sender's frames come at the new rate (or rate.STREAM_TRIAL_S): the sender
#: switches once it has it, and until then sends nothing the receiver can hear
ACK_REPEAT_S = 0.005


def _arq_stats(stats: list[ArqStats]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in stats:
        for k, v in vars(s).items():
            if v:
                out[k] = out.get(k, 0) + v
    return out


def from_rx(out: StreamSending, pair: socket.socket, now: float) -> None:
    """What the RX process sent: our receiver's ACKs to go, the peer's ACKs for our sender,
    the shared uplink's news."""
    while True:
        try:
            msg = decode(pair.recv(MAX_LEN + 1))
        except BlockingIOError:
            return
        match msg:
            case None:
                continue
            case AckToSend(peer, frame, urgent) if peer < len(out.arqs):
                out.ack(peer, frame, now, urgent=urgent)
            case PeerAck(peer, frame) if peer < len(out.arqs):
                out.arqs[peer].on_control(frame, now)
            case AckToSend() | PeerAck():
                continue
            case _:
                out.uplink_message(msg, now)  # (the shared uplink's)


def run_tx(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket) -> None:
    child = Child(cfg, "tx", conn)
    table = senders_once_recorded(cfg, child)
    if table is None:
        return
    queues = make_queues(cfg, table)
    c = TxCounters()
    out = StreamSending(cfg, table, queues, c, child.owner)
    if cfg.role == "base" and len(table) > 1:
        out.grants = UplinkScheduler(len(table), revoke_busy=out.listen is None)
    out.uplink_start(cfg, time.monotonic())  # (a mobile that remembers its base's grants)
    arqs = out.arqs
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
        out.settings_applied(child)
        if radio is not None and (on_irq(radio) or (out.aside is not None and out.aside.on)):
            take_edges(radio)
            _, max_rt, _ = radio.what_happened()  # (on an IRQ pin: it falls again once cleared)
            if out.aside_news(max_rt, now):  # (a frame sent on the downlink's channel)
                radio.flush_tx()
        if look(pair):
            from_rx(out, pair, now)
        # The FIFO first: two frames' time after a slot frees it runs dry, and taking in a
        # packet (TUN read, seal, cut) can take a good part of that.
        if radio is not None:
            cell = out.permit is not None  # (our base grants the uplink: no rate of ours)
            out.adapt.step(
                child, child.owner, table.peers, now, cell
            )  # (the rate: adapt_stream.py)
            if out.listen is not None and out.listen.listening:
                out.listen.hand_on(radio, pair, now)  # (a packet heard in part holds: fill)
            out.fill(radio, now)
        if look(tun):
            try:
                read_tun(tun, cfg.mtu, radio is not None, table, queues, c, now)
            except TunError as exc:
                child.fail(str(exc))
                break
            if out.aside is not None and len(queues):
                # (the RX process's news since the look above: a grant that came with the
                # packet this one answers decides its way)
                from_rx(out, pair, now)
        offered = False
        if radio is not None:
            out.uplink(now)  # a base's grant, a mobile's release (into its peer's frames)
            offered = out.load(now)
            keepalive_s = out.adapt.keepalive_s(cfg.keepalive_s)
            if now - out.last_sent >= keepalive_s and out.idle() and not len(queues):
                for peer, arq in zip(table, arqs, strict=True):
                    for frame in peer.keepalive(now):
                        arq.offer(frame)
                out.last_sent = now
                offered = True
            if offered or (out.aside is not None and len(queues)):  # (or a packet to go aside)
                out.fill(radio, time.monotonic())
            if out.listen is not None:  # (a base with several mobiles: between its bursts)
                # (more to send: it would be deaf between its bursts anyway, and each turn to
                # listening and back cost the loaded downlink)
                acks = out.acks_waiting() and not out.awaits_answer(now)
                work = out.chip_busy or acks or out.more_to_send()
                out.listen.step(radio, pair, work, out.addressed, time.monotonic())
        if look(child.conn_fd):
            child.handle_control()
        link_control(child, table)
        if child.stats_due(now):
            stats = {
                **table_stats(c, {p.name: p.stats() for p in table}, queue_parts(table, queues)),
                **queues.stats(now),
                "retransmissions": sum(a.stats.retransmitted for a in arqs),
                "arq": {
                    **_arq_stats([a.stats for a in arqs]),
                    "in_flight": sum(a.in_flight for a in arqs),
                },
                "uplink": out.uplink_stats(now),
                "mode": "stream",
                "adapt": out.adapt.stats(now),
                "aside": out.aside_stats(),
            }
            stats["queue_packets"] += sum(1 for p in table if p.frames)  # packets being loaded
            child.send_stats(stats)
        # (the TUN is always asked: a read that finds nothing costs more than its place here)
        timeout = out.timeout(now)
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
        busy = (
            out.acks_waiting()
            or (out.aside is not None and out.aside.busy())
            or out.in_burst
            or (out.may_send(now) and (any(p.frames for p in table) or not out.idle()))
        )
        fd = waitable(radio)
        asked = [child.conn_fd, pair, tun] if fd is None else [child.conn_fd, pair, tun, fd]
        ready = child.wait(radio, timeout, now=look_now, poll=bool(busy), also=(pair, tun))
    child.close_radio()


def run_rx(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket) -> None:
    child = Child(cfg, "rx", conn)
    table = receivers(cfg)
    arqs = peer_arqs([p.arq for p in table])
    c = RxCounters()
    control_ready = True  # the supervisor's pipe: looked at when select() found it readable

    def to_tx(msg: Message) -> None:
        try:
            pair.send(encode(msg))
        except BlockingIOError:
            c.pair_full += 1  # the TX process is behind: an ACK is repeated anyway

    fifo = RxFifo()
    rates = RateListening()  # (adapt = true, one peer: the rate the peer announced)
    #: after a switch on an announcement: (frames in then, until when, last repeat)
    repeat: tuple[int, float, float] | None = None
    # a base with several mobiles: when each one's frames were last said to have come (a
    # packet behind a lost frame completes only after its retransmission, and a mobile whose
    # frames came is not silent: uplink_scheduler.py)
    told = [-1.0] * len(table) if len(table) > 1 else []
    aside = hears_aside(cfg)  # (frames our TX radio heard: ``x`` on the pair)
    pair_ready = aside

    def take(pipe: int, frame: bytes, now: float) -> None:
        """One frame, the pipe it came on (our radio's, or one our TX radio heard on the
        downlink's channel between its bursts: ``x`` on the pair, aside_stream.py)."""
        c.frames_in += 1
        peer = table.by_pipe(pipe)
        if peer is None:
            c.no_peer += 1
            return
        if frame and frame[0] & CONTROL and frame[0] != RESET:
            c.acks_in += 1
            to_tx(PeerAck(peer.index, frame))
            return
        i, arq = peer.index, arqs[peer.index]
        if told and frame and not frame[0] & CONTROL and now - told[i] >= HEARD_EVERY_S:
            lately = peer.last_heard is not None and now - peer.last_heard < FRAMES_COUNT_S
            if lately:  # (a whole authentic packet lately: FRAMES_COUNT_S)
                told[i] = now
                to_tx(FramesCame(i))
        for inner in arq.on_frame(frame, now):
            heard = peer.heard
            packet = peer.receive(inner, now)
            if peer.heard != heard:  # a whole packet (a keepalive, link control)
                if peer.grant_heard is not None or peer.release_heard is not None:
                    # our base grants us the uplink: our ACK goes in it, before the
                    # grant reaches the TX process (an ACK later meets the next
                    # holder's frames, and is lost); a mobile released its grant:
                    # acknowledged at once (an idle mobile releases its next only
                    # once all it sent is acknowledged: uplink_tx.py)
                    arq.ack_now()
                    ack = arq.control(now)
                    if ack is not None:
                        to_tx(AckToSend(i, ack))
                uplink_news(pair, table, peer, c, now, packet is not None)
                if peer.rate_heard is not None:  # (its sender waits for it to pass;
                    arq.ack_now()  # the ACK goes once the radio switched, below)
            if packet is not None:
                if told and len(packet) <= PREEMPT_MAX:
                    # a mobile's interactive packet (a ping's): acknowledged at once,
                    # so that the mobile, idle then, releases its grant soon (slower,
                    # it held it more than LIGHT_USE_S and waited its turn behind
                    # the busy ones)
                    arq.ack_now()
                deliver(tun, packet, c)
                answer_news(pair, peer, packet, c, now)

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
                take(pipe, frame, now)
            # (before our ACKs: the sender switches once its announcement was acknowledged)
            if rates.step(child, table, now):
                repeat = (c.frames_in, now + max(rt.STREAM_TRIAL_S.values()), now)
            if repeat is not None:  # that ACK again until the sender's frames come
                heard_since, until, last = repeat
                if c.frames_in != heard_since or now >= until:
                    repeat = None
                elif now - last >= ACK_REPEAT_S:
                    arqs[0].ack_now()
                    repeat = (heard_since, until, now)
        if pair_ready:
            heard_aside(pair, c, take, now)
        for index, arq in enumerate(arqs):
            prompt = arq.prompt  # (a hole, a repeat, a ping's packet: it may end a burst)
            ack = arq.control(now)
            if ack is not None:
                # (urgent: a hole, a repeat, a mobile's interactive packet: it may end a burst
                # to another mobile, stream_tx.py ``_cut``)
                to_tx(AckToSend(index, ack, urgent=bool(prompt and told)))
        tend(child, table, now)
        if control_ready:
            child.handle_control()
        if child.stats_due(now):
            stats = rx_stats(c, table, now)
            stats.update(
                arq=_arq_stats([a.stats for a in arqs]), mode="stream", adapt=rates.stats(now)
            )
            child.send_stats(stats)
        timeout = rates.wait_s(now, arq_timeout(arqs, now))
        if repeat is not None:
            timeout = min(timeout, max(0.0, repeat[2] + ACK_REPEAT_S - now))
        more = radio is not None and fifo.more_waiting(radio)
        ready = child.wait(radio, timeout, now=more, poll=True, also=(pair,) if aside else ())
        control_ready = child.conn_fd in ready
        pair_ready = aside and pair in ready
    flush(table)
    child.close_radio()
