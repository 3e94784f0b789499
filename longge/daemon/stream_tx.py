"""Stream mode's sending half, as the TX pump (``radio_tx.py``) drives it (docs/design.md §4):
which frame goes next, to which peer, within the 4 ms rule's bursts; the ARQs' timers."""

from __future__ import annotations

import socket
import time
from collections import deque
from dataclasses import replace
from typing import Any, ClassVar

from longge.config import NodeConfig
from longge.daemon.aside import StreamAside, stream_part
from longge.daemon.child import FIFO_EMPTY, FIFO_OCCUPIED, Child, on_irq, take_edges, waitable
from longge.daemon.listening import BaseListening
from longge.daemon.messages import AckToSend, Message, PeerAck, Say, received
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.peers import (
    TxCounters,
    arq_wake_at,
    peer_arqs,
    preempt,
    queue_parts,
    table_stats,
)
from longge.daemon.radio_owner import RadioOwner, hears_aside
from longge.daemon.sending import Wake
from longge.daemon.uplink_tx import UplinkSending
from longge.protocol.actions import Transmit
from longge.protocol.adapt_stream import StreamAdaptation, StreamTurn
from longge.protocol.arq_frames import CONTROL, RESET, arq_totals
from longge.protocol.listen_timing import STREAM_LISTEN_AFTER_S
from longge.protocol.part import Part
from longge.protocol.peer import PeerSender, PeerTable
from longge.protocol.uplink import asks_answer
from longge.radio.interface import LinkRadio

#: Control frames (ACKs, resyncs) from our RX process that wait for the TX radio at most.
CONTROL_BACKLOG = 16
#: s: a mobile whose base keeps sending (the grant's deaf bit) sends a small packet's last
#: frame again this much later (ArqSender.tail_after): the mobiles the base sends to
#: acknowledge on the uplink's channel outside their grants, and a lost last frame waited
#: for the tail's probe, 2 x srtt (3-5 ms), in one ping in ten (docs/design.md §4)
TAIL_BESIDE_LOAD_S = 0.0005
#: s: a base that listens between its bursts and has just sent a light mobile a packet that
#: asks for an answer (a ping) keeps listening this long, its ACKs to the others waiting: the
#: answer comes on the downlink's channel, and met the base sending its ACKs to the busy
#: mobiles one time in eight (the ping from the base p95 4.5-6.8 ms)
ANSWER_LISTEN_S = 0.003


class StreamSending(UplinkSending):
    """The TX process's stream-mode state beside its peers: our receiver's ACKs waiting to go,
    each with its peer (bounded, for a TX radio that is away while the RX radio hears on: each
    ACK says all its older ones did, and the receiver repeats them), and the burst the chip is
    in. The chip has one TX address: a burst goes to one peer, and the address changes between
    bursts, when the FIFO has drained (the 4 ms rule drains it anyway). Which peer's burst is
    next: one with an ACK waiting, then one the uplink's grant is for, then the peers in turn.
    A mobile that heard a grant sends its ARQ's frames only in its grants; its ACKs go at any
    time (one short frame every 16 of the base's: docs/design.md §4, "Several mobiles")."""

    ARQ: ClassVar[bool] = True
    #: Both directions at once, four radio processes each handling ~6000 frames/s and the air
    #: do not fit on one CPU (measured: each direction fell to 0.72 of its one-way figure).
    #: The receivers stay with the air, which waits for them; a sender runs beside it, on the
    #: other CPUs, since a late one only lets its FIFO drain (a settle the link pays, counted
    #: as a short burst), never loses a frame; left free to run on the world's CPU too, the
    #: senders carried ~0.035 less (docs/emulator.md).
    BESIDE_AIR: ClassVar[bool] = True

    def __init__(
        self,
        cfg: NodeConfig,
        table: PeerTable[PeerSender],
        queues: PeerQueues,
        c: TxCounters,
        owner: RadioOwner,
    ) -> None:
        self.table = table
        self.owner = owner
        self.queues = queues
        self.arqs = peer_arqs([p.arq for p in table])
        self.c = c
        #: per peer (one peer's ACKs never push out another's), each with its place in the
        #: order they came in
        self.control: list[deque[tuple[int, bytes]]] = [
            deque(maxlen=CONTROL_BACKLOG) for _ in table
        ]
        self._came = 0
        self._burst = cfg.radio.timing().stream_burst_frames
        self.adapt = StreamAdaptation()  # (adapt = true, one peer: the rate)
        self._opts = cfg.radio  # (the config's at this turn: ``_burst_at``)
        self._turn: StreamTurn | None = None  # (``_adapt_turn``)
        self._turn_key: tuple[object, int, bool] = (None, -1, False)
        self.in_burst = 0
        #: frames in the TX FIFO at the last look: each one's news wakes the loop
        self.chip_busy = False
        self.burst_peer: int | None = None  # whose frames the burst in the chip carries
        self.turn = 0  # the peer whose burst went last in turn
        self.last_sent = time.monotonic()
        self.addressed = table.peers[0]  # whose address the radio has (RadioOwner.set_up)
        self.applied = 0  # child.applied when `addressed` was last known
        self.priority: PeerSender | None = None  # a grant's peer: its burst goes next
        self.urgent: set[int] = set()  # peers with an ACK of an interactive packet waiting
        #: a base's: when a packet asking for an answer went to a light mobile, and till when
        #: its listening radio waits for that answer (ANSWER_LISTEN_S)
        self.answer_from = (0.0, 0.0)
        #: the downlink's channel as a light mobile's way (listening.py, aside.py): a
        #: base's TX radio listens between its bursts; a mobile sends a small packet there
        self.listen = (
            BaseListening(owner, STREAM_LISTEN_AFTER_S, arq_byte=True) if hears_aside(cfg) else None
        )
        self.aside: StreamAside | None = stream_part(cfg, owner, queues)
        self.uplink_init()

    @property
    def burst(self) -> int:
        """Frames per burst (the 4 ms rule) at the rate the TX radio runs at."""
        return self.adapt.burst or self._burst

    def idle(self) -> bool:
        return all(a.idle for a in self.arqs)

    def ack(self, index: int, frame: bytes, now: float, urgent: bool = False) -> None:
        """Our receiver's ACK (or RESYNC), or our sender's CHANNEL frame, for peer ``index``,
        to go before its data; ``urgent``: sent at once for an interactive packet (it may end
        a burst: ``_cut``)."""
        self._came += 1
        self.control[index].append((self._came, frame))
        if urgent:
            self.urgent.add(index)
        if self.aside is not None:
            self.aside.route.asked(now)

    def acks_waiting(self) -> bool:
        return any(self.control)

    def awaits_answer(self, now: float) -> bool:
        """A base that listens, with nothing but ACKs to send, ANSWER_LISTEN_S after a
        packet asking for an answer went to a light mobile, no packet's last frame heard on
        the downlink's channel since: its ACKs wait, the answer comes."""
        since, until = self.answer_from
        listen = self.listen
        return (
            listen is not None
            and listen.listening
            and since <= now < until
            and listen.last_end < since
            and not self.more_to_send()
        )

    def more_to_send(self) -> bool:
        """Packets queued, or frames of ours not yet sent (a packet's, the ARQs')?"""
        return (
            bool(len(self.queues))
            or any(p.frames for p in self.table)
            or any(a.queued for a in self.arqs)
        )

    def acknowledged(self) -> bool:
        return self.idle()

    def goes_first(self, peer: PeerSender) -> None:
        self.priority = peer

    def before_grant(self, index: int, now: float) -> None:
        """What the mobile has not acknowledged goes again before its grant: a frame it lacks
        holds the grant up behind it (delivered in order), and its ACK saying so, sent outside
        its grant, met a busy mobile's frames; the retransmission waited for a timeout backed
        off to 0.3 s (idle pings waited as long)."""
        self.arqs[index].resend_unacked(now)

    def may_send(self, now: float) -> bool:
        """May the ARQs' frames go now (a mobile: only in its grant, once it heard one; not
        while the receiver is on a trial the adaptation left)?"""
        return self.adapt.may_send() and (self.permit is None or self.permit.may_send(now))

    def may_load(self, now: float) -> bool:
        """May a packet be taken from the queue for the ARQ now?"""
        return self.adapt.may_load() and (self.permit is None or self.permit.may_load(now))

    def settings_applied(self, child: Child) -> None:
        """The radio's settings were applied again: its TX address is the first peer's."""
        if child.applied != self.applied:
            self.applied = child.applied
            self.addressed = self.table.peers[0]
            if self.aside is not None:
                self.aside.reset(self.arqs[0], self.control[0])
            if self.listen is not None:
                self.listen.listening = False

    def fill_aside(self, radio: LinkRadio, now: float) -> bool:
        """A mobile waiting for a grant: a small packet on the downlink's channel
        (aside.py); may our frames go on the uplink's channel now?"""
        aside, permit = self.aside, self.permit
        if aside is None:
            return True
        between = permit is not None and (permit.released or now >= permit.until)
        if permit is None or not permit.granted(now) or not between or permit.base_deaf(now):
            # (in its grant: the rest; a base that does not listen: the grant)
            return aside.back(radio, self.control[0], False, now)
        loaded = aside.fill(radio, self.table.peers[0], self.control[0], self.queues, now)
        if loaded:
            self.c.frames_sent += loaded
            self.last_sent = now
            return False
        return aside.back(radio, self.control[0], True, now)

    def aside_news(self, max_rt: bool, now: float) -> bool:
        """A MAX_RT: of a frame sent on the downlink's channel (the caller flushes the FIFO)?"""
        aside = self.aside
        return aside is not None and aside.news(self.arqs[0], self.control[0], max_rt, now)

    def aside_stats(self) -> dict[str, int]:
        """The downlink channel's counters: a base's, a mobile's (empty: neither)."""
        if self.listen is not None:
            return self.listen.stats()
        return {} if self.aside is None else self.aside.stats()

    def _take(self, index: int, now: float) -> bytes | None:
        """Peer ``index``'s next frame: an ACK of ours for it, else its ARQ's."""
        if self.control[index]:
            if len(self.control[index]) == 1:
                self.urgent.discard(index)
            return self.control[index].popleft()[1]
        if not self.may_send(now):
            return None
        arq = self.arqs[index]
        timeouts = arq.stats.timeouts
        frame = arq.next_frame(now)
        if arq.stats.timeouts != timeouts and self.grants is not None:
            # A base's frames to a mobile went unacknowledged: its ACKs, sent outside its
            # grants, met a busy mobile's frames. It is asked next (its ACK goes first in its
            # grant): else the window filled with replies and grants that waited for ACKs,
            # and its pings waited up to 0.5 s.
            self.grants.poke(index, aside=False)  # (its ACKs did not come that way either)
        return frame

    def _light(self) -> list[int]:
        """Peers whose ARQ has a small packet's frames to send and little else (at most
        ArqSender.TAIL_FRAMES queued and in flight: a ping's answer, a few TCP ACKs)."""
        return [
            p.index
            for p, arq in zip(self.table, self.arqs, strict=True)
            if arq.queued and not p.frames and arq.queued + arq.in_flight <= arq.TAIL_FRAMES
        ]

    def _cut(self) -> bool:
        """Does the burst in the chip end now, for a light peer's frames or an ACK sent at
        once to another peer (they go in the next burst)? A burst of the 4 ms rule is 25
        frames at 2 Mbit/s: a ping's answer to another mobile waited up to two of them, a
        median 3.3 ms more than with the others quiet (docs/design.md §4, "Several
        mobiles"). Not for a grant (it goes first in the next burst): ending bursts for
        grants too cost a loaded downlink 1.5 % more, and the pings nothing."""
        burst = self.burst_peer
        if burst is None:
            return False
        acks = [i for i in self.urgent if self.control[i]]
        return any(i != burst for i in self._light() + acks)

    def _next(self, now: float, empty: bool) -> tuple[int, bytes] | None:
        """The next frame and its peer: the burst's peer's, or, between bursts (the FIFO
        ``empty``), the next peer's that has one."""
        if self.burst_peer is None and not empty:  # (frames in the FIFO: to the addressed)
            self.burst_peer = self.addressed.index
        if self.burst_peer is not None:
            frame = self._take(self.burst_peer, now)
            return None if frame is None else (self.burst_peer, frame)
        n = len(self.arqs)
        order = [(self.turn + step) % n for step in range(1, n + 1)]
        first = []
        waiting = [i for i, c in enumerate(self.control) if c]
        if waiting:  # (the peer whose ACK came first)
            first.append(min(waiting, key=lambda i: self.control[i][0][0]))
        if self.priority is not None:
            first.append(self.priority.index)
        if n > 1:
            first += self._light()
        for index in first + order:
            frame = self._take(index, now)
            if frame is not None:
                if index not in first:
                    self.turn = index
                if self.priority is not None and index == self.priority.index:
                    self.priority = None  # (its grant goes in this burst)
                self.burst_peer = index
                return index, frame
        self.priority = None
        return None

    def fill(self, radio: LinkRadio, now: float) -> None:
        """Load the TX FIFO while it has room, within the burst (the 4 ms rule)."""
        c = self.c
        listen = self.listen
        if listen is not None and listen.listening and now < listen.hold_until:
            return  # (a mobile's packet heard in part: its rest comes)
        if self.awaits_answer(now):
            return  # (a light mobile's answer comes)
        if not self.fill_aside(radio, now):
            return
        state = radio.is_fifo(True)  # one look at the chip a frame (a syscall on sim)
        if self.in_burst and state == FIFO_EMPTY:
            # the FIFO drained: the chip is in standby again (a burst cut short: the sender
            # had nothing to send, or this process came back too late)
            c.bursts += 1
            if self.in_burst < self.burst:
                c.bursts_short += 1
            self.in_burst = 0
        if state == FIFO_EMPTY:
            self.burst_peer = None  # (the next burst may go to another peer)
        cut = state == FIFO_OCCUPIED and self.in_burst < self.burst and len(self.arqs) > 1
        if cut and self._cut():
            c.cut_in += 1  # (the FIFO drains; the next burst is theirs)
            self.in_burst = self.burst
            if self.burst_peer is not None:  # (and the one after it the cut one's again)
                self.turn = (self.burst_peer - 1) % len(self.arqs)
        while self.in_burst < self.burst and state in (FIFO_EMPTY, FIFO_OCCUPIED):
            got = self._next(now, state == FIFO_EMPTY)
            if got is None:
                if not self.idle():
                    c.window_full += 1
                break
            index, frame = got
            peer = self.table.peers[index]
            if peer is not self.addressed or (listen is not None and listen.listening):
                self.owner.apply(Transmit(peer.radio_address))  # (between bursts: FIFO empty)
                self.addressed = peer
                if listen is not None:
                    listen.listening = False
            radio.start_fast_write(frame)  # room: just seen (write_fast would ask again)
            self.in_burst += 1
            c.frames_sent += 1
            if frame[0] & CONTROL and frame[0] != RESET:
                c.control_sent += 1
            else:  # (our ACKs are no packet the peer can take as a sign of life: keepalives)
                self.last_sent = now
            state = radio.is_fifo(True)
        self.chip_busy = state != FIFO_EMPTY

    def load(self, now: float) -> bool:
        """The packets the peers' ARQs have room for, cut into frames (an interactive packet
        first); did any frame go to an ARQ?"""
        offered = False
        if self.permit is not None:  # (a mobile: its base grants the uplink)
            deaf = self.permit.base_deaf(now)
            self.arqs[0].tail_after = TAIL_BESIDE_LOAD_S if deaf else None
        if not self.adapt.may_feed():  # (nothing behind a rate's announcement)
            return offered
        for peer in self.table:
            i = peer.index
            while True:
                if not peer.frames:
                    if not self.may_load(now) or not len(self.queues.queues[i]):
                        break
                    packet = self.queues.pop(i, now)
                    if packet is None:
                        continue  # (expired: the next one)
                    peer.load(packet, now, self.queues.last_key(i))
                    self._poke(i, packet, now)
                    if self.listen is not None and asks_answer(packet):
                        self.answer_from = (now, now + ANSWER_LISTEN_S)
                else:
                    preempt(self.queues, peer, now)
                if not peer.feed_arq():
                    break
                offered = True
        return offered

    def wake_at(self, now: float) -> float | None:
        """The mode's own moment: the ARQs' timers (while they may send and the chip has no
        frame in its FIFO: its frames' news wake the pump, and an ARQ's frame due then could
        not go before; a SCHED_FIFO process that woke for it would spin, and starve the other
        radio processes on its core); a base's wait for a light mobile's answer (its ACKs go
        when that wait is over)."""
        at = arq_wake_at(self.arqs) if self.may_send(now) and not self.chip_busy else None
        if self.listen is not None and self.awaits_answer(now):
            answered = self.answer_from[1]
            at = answered if at is None else min(at, answered)
        return at

    def fates(self, radio: LinkRadio | None) -> tuple[int, int]:
        """Our frames' fates the ARQs learnt since we began (agility.py's ``Sent``): found
        acknowledged or lost, and lost."""
        lost = sum(a.stats.lost for a in self.arqs)
        return sum(a.stats.acked for a in self.arqs) + lost, lost

    def parts(self) -> tuple[Part | None, ...]:
        owner = self.owner if self.owner.later else None  # (asked only while it holds some)
        a, up, listen, aside = self.adapt, self.grants, self.listen, self.aside
        return (owner, a, up, self.permit, listen, aside)

    # -- the pump's turn (sending.Sending) ------------------------------------------------

    def _adapt_turn(self, child: Child) -> StreamTurn:
        """What the adaptation is told: made again when the config is (applied) again, or a
        first grant made this a cell's mobile (our base grants the uplink: the configured
        rate)."""
        cfg, cell, turn = child.cfg, self.permit is not None, self._turn
        seen_cfg, applied, was_cell = self._turn_key
        if turn is None or cfg is not seen_cfg or child.applied != applied or cell != was_cell:
            self._opts = cfg.radio
            on = cfg.radio.adapt and len(self.table) == 1 and not cell
            turn = StreamTurn(
                on, cfg.radio.rate, cfg.pa_value, child.applied, self._burst_at, self.table.peers
            )
            self._turn, self._turn_key = turn, (cfg, child.applied, cell)
        return turn

    def _burst_at(self, rate: str) -> int:
        """The 4 ms rule's frames per burst at ``rate`` (the adaptation's rate in force)."""
        return replace(self._opts, rate=rate).timing().stream_burst_frames

    def uplink_message(self, msg: Message, now: float) -> None:
        """A MOVE or HERE to say goes outside the window (a CHANNEL frame, ahead of the data:
        arq_frames.py); a BAND, too long for one, and the rest as UplinkSending has them."""
        if isinstance(msg, Say) and 0 <= msg.peer < len(self.arqs):
            frame = self.arqs[msg.peer].channel_frame(msg.packet)
            if frame is not None:
                self.ack(msg.peer, frame, now)
                return
        super().uplink_message(msg, now)

    def from_rx(self, pair: socket.socket, now: float) -> None:
        """What the RX process sent: our receiver's ACKs to go, the peer's ACKs for our
        sender, the shared uplink's news."""
        for msg in received(pair):
            match msg:
                case AckToSend(peer, frame, urgent) if peer < len(self.arqs):
                    self.ack(peer, frame, now, urgent=urgent)
                case PeerAck(peer, frame) if peer < len(self.arqs):
                    self.arqs[peer].on_control(frame, now)
                case AckToSend() | PeerAck():
                    continue
                case _:
                    self.uplink_message(msg, now)  # (the shared uplink's)

    def before_tun(
        self,
        child: Child,
        radio: LinkRadio | None,
        pair: socket.socket,
        news: bool,
        now: float,
    ) -> bool:
        """A frame sent on the downlink's channel that met MAX_RT; the RX process's news;
        the adaptation; then the FIFO first: two frames' time after a slot frees it runs
        dry, and taking in a packet (TUN read, seal, cut) can take a good part of that."""
        if radio is not None and (on_irq(radio) or (self.aside is not None and self.aside.on)):
            take_edges(radio)
            _, max_rt, _ = radio.what_happened()  # (on an IRQ pin: it falls again once cleared)
            if self.aside_news(max_rt, now):  # (a frame sent on the downlink's channel)
                radio.flush_tx()
        if news:
            self.from_rx(pair, now)
        if radio is not None:
            for action in self.adapt.step(self._adapt_turn(child), now):
                self.owner.apply(action)
            if self.listen is not None and self.listen.listening:
                self.listen.hand_on(radio, pair, now)  # (a packet heard in part holds: fill)
            self.fill(radio, now)
        return True

    def after_tun(
        self, child: Child, radio: LinkRadio | None, pair: socket.socket, read: bool, now: float
    ) -> None:
        """A base's grant, a mobile's release; the next packets to the ARQs; keepalives;
        frames into the FIFO; a base's listening between its bursts."""
        queues = self.queues
        if read and self.aside is not None and len(queues):
            # (the RX process's news since the look above: a grant that came with the
            # packet this one answers decides its way)
            self.from_rx(pair, now)
        if radio is None:
            return
        self.uplink(now)  # a base's grant, a mobile's release (into its peer's frames)
        offered = self.load(now)
        keepalive_s = self.adapt.keepalive_s(child.cfg.keepalive_s)
        if now - self.last_sent >= keepalive_s and self.idle() and not len(queues):
            for peer, arq in zip(self.table, self.arqs, strict=True):
                for frame in peer.keepalive(now):
                    arq.offer(frame)
            self.last_sent = now
            offered = True
        if offered or (self.aside is not None and len(queues)):  # (or a packet to go aside)
            self.fill(radio, time.monotonic())
        if self.listen is not None:  # (a base with several mobiles: between its bursts)
            # (more to send: it would be deaf between its bursts anyway, and each turn to
            # listening and back cost the loaded downlink)
            acks = self.acks_waiting() and not self.awaits_answer(now)
            work = self.chip_busy or acks or self.more_to_send()
            self.listen.turn(radio, pair, work, self.addressed, time.monotonic())

    def control_now(self) -> bool:
        return True  # (the ARQ carries a packet's frames whole, under the epoch it began in)

    def stats(self, radio: LinkRadio | None, now: float) -> dict[str, Any]:
        table, queues, arqs = self.table, self.queues, self.arqs
        stats = {
            **table_stats(self.c, {p.name: p.stats() for p in table}, queue_parts(table, queues)),
            **queues.stats(now),
            "retransmissions": sum(a.stats.retransmitted for a in arqs),
            "arq": {
                **arq_totals([a.stats for a in arqs]),
                "in_flight": sum(a.in_flight for a in arqs),
            },
            "uplink": self.uplink_stats(now),
            "mode": "stream",
            "adapt": self.adapt.stats(now),
            "aside": self.aside_stats(),
        }
        stats["queue_packets"] += sum(1 for p in table if p.frames)  # packets being loaded
        return stats

    def wake(self, radio: LinkRadio | None, tun: Any, pair: socket.socket, now: float) -> Wake:
        """Until the TUN, the radio, the RX process, the supervisor, an ARQ's timer or the
        uplink's has something (the TUN is always asked: a read that finds nothing costs
        more than its place here)."""
        # Waiting for the FIFO to drain (the 4 ms rule), each frame's news wakes us; the last
        # one's, taken in by a look since, would not: a new burst now. (On an IRQ pin a frame
        # that ended since the look at the top left an edge.)
        look_now = (
            self.in_burst >= self.burst
            and radio is not None
            and waitable(radio) is not None
            and not on_irq(radio)
            and bool(radio.is_fifo(True, True))
        )
        # a backend without a descriptor (pyrf24) is polled while frames are on their way
        busy = (
            self.acks_waiting()
            or (self.aside is not None and self.aside.busy())
            or self.in_burst
            or (self.may_send(now) and (any(p.frames for p in self.table) or not self.idle()))
        )
        return self.wake_at(now), look_now, bool(busy), (pair, tun)
