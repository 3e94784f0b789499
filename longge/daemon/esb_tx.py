"""ESB's sending half (``radio.mode = "esb"``: the chip acknowledges every frame and retries
it itself), as the TX pump (radio_tx.py) drives it: which peer's frames the TX radio loads
and to whose address; what the chip says of them (acknowledged, or MAX_RT: the rest of the
packet is given up); the adaptation of retries, rate and power (protocol/adapt_esb.py: what
it decides, the pump's turn applies); keepalives; the shared uplink's grants (uplink_tx.py);
a base listening between its bursts (listening.py) and a light mobile's small packets on the
downlink's channel (aside.py)."""

from __future__ import annotations

import socket
import time
from typing import Any, ClassVar

from longge.config import NodeConfig
from longge.daemon.aside import MobileAside, mobile_aside
from longge.daemon.child import FIFO_FULL, Child, TxFifoEmpty, on_irq, take_edges, waitable
from longge.daemon.listening import BaseListening
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.peers import (
    PREEMPT_MAX,
    GoFirst,
    TxCounters,
    keepalives,
    preempt,
    queue_parts,
    table_stats,
)
from longge.daemon.radio_owner import RadioOwner, hears_aside
from longge.daemon.sending import Wake
from longge.daemon.uplink_tx import UplinkSending
from longge.protocol.actions import Transmit
from longge.protocol.adapt_esb import EsbAction, EsbAdaptation, EsbTurn, Load
from longge.protocol.part import Part
from longge.protocol.peer import PeerSender, PeerTable
from longge.radio.interface import LinkRadio

#: After this many MAX_RT in a row the radio is re-initialised (the interface stays up).
MAX_RT_STORM = 64
#: s: the RX process's news of the uplink is looked at this often while the pair is not
#: watched (no grant heard yet: one descriptor less in each select() of a link with one
#: mobile)
PAIR_LOOK_S = 0.25


class EsbSending(UplinkSending):
    """Which peer's frames the TX radio is loading, and whose address it sends to. The chip
    has one TX address: another peer's packet starts only once the TX FIFO has drained (its
    frames' fates known), and the address changes then. The shared uplink's part (a base's
    grants, a mobile's permit): UplinkSending."""

    ARQ: ClassVar[bool] = False
    BESIDE_AIR: ClassVar[bool] = False

    def __init__(
        self,
        cfg: NodeConfig,
        table: PeerTable[PeerSender],
        queues: PeerQueues,
        c: TxCounters,
        owner: RadioOwner,
    ) -> None:
        self.table = table
        self.queues = queues
        self.c = c
        self.owner = owner
        self.agile = cfg.radio.agile  # (the RX process's agility.py: Say and SwitchAt come)
        self.adapt = EsbAdaptation()  # (adapt = true: retries, and with one peer the rate)
        self._fifo_empty = TxFifoEmpty()  # (the adaptation's question, of this turn's radio)
        self.storm = 0  # MAX_RT in a row, without a frame acknowledged in between
        self.pending_max_rt = False  # seen just before sleeping (what_happened may clear it)
        #: the RX process's news: watched once the uplink is granted (``wake``); before,
        #: looked at every PAIR_LOOK_S for a first grant
        self.pair_watched = False
        self.pair_looked = 0.0
        start = time.monotonic()
        for peer in table:
            peer.last_sent = start
        self.sending: PeerSender | None = None  # whose frames are being loaded
        self.addressed = table.peers[0]  # whose address the radio has (RadioOwner.set_up)
        self.applied = 0  # child.applied when `addressed` was last known
        #: peers whose frames go before the rest, at once (a grant of the uplink: it counts
        #: from when it was made; a packet cut in); what is left of another's waits meanwhile
        self.first = GoFirst()
        #: a base's TX radio listening between bursts, a mobile's small packets sent there
        #: while it waits for a grant (aside.py); None: neither
        self.listen = BaseListening(owner) if hears_aside(cfg) else None
        self.aside: MobileAside | None = mobile_aside(cfg, self.adapt, owner, queues)
        self.uplink_init()

    def loading(self) -> bool:
        return self.sending is not None and bool(self.sending.frames)

    def settings_applied(self, child: Child) -> None:
        """The radio's settings were applied again: its TX address is the first peer's, and
        what is left of another peer's packet is given up (it would go to the first)."""
        if child.applied != self.applied:
            self.applied = child.applied
            self.addressed = self.table.peers[0]
            left = self.sending
            if left is not None and left is not self.addressed and left.frames:
                left.give_up()
                self.sending = None
            if self.listen is not None:
                self.listen.listening = False  # (in TX mode, on its own channel)
            if self.aside is not None:
                self.aside.reset(self.addressed)

    def next(self, radio: LinkRadio, now: float) -> PeerSender | None:
        """The peer whose frames go next, its address set; None: nothing to send now, or the
        FIFO must drain before the address changes."""
        while True:
            peer = next((p for p in self.table if p.frames), None)  # keepalive, link control
            if peer is None:
                index = self.queues.next_peer(now)
                if index is None:
                    return None
                peer = self.table.peers[index]
            if peer is not self.addressed:
                if not radio.is_fifo(True, True):
                    return None  # (its news wakes the process)
                self.owner.apply(Transmit(peer.radio_address))
                self.addressed = peer
            if peer.frames:
                return peer
            packet = self.queues.pop(peer.index, now)
            if packet is not None:
                peer.load(packet, now, self.queues.last_key(peer.index))
                self._poke(peer.index, packet, now)
                return peer

    def cut_in(self, now: float, c: TxCounters) -> None:
        """Several peers: an interactive packet (a sparse flow's, PeerQueues.pop_sparse) for
        another peer than the one whose packet is on its way goes next, once the FIFO has
        drained and the address changed (as lanes do within a peer: frame.py); the rest of
        that packet waits meanwhile. A peer backed off after MAX_RT is not served so."""
        sending = self.sending
        if len(self.table) < 2 or self.first.peer() is not None or sending is None:
            return
        if not sending.frames:
            return  # (nothing in the way: the queues' order serves it)
        for peer in self.table:
            i = peer.index
            if peer is sending or peer.urgent or self.queues.backoff_until[i] > now:
                continue
            # (its own packet's flow is never overtaken, but only while that packet is on its
            # way: a flow whose last packet went whole is sparse again; keyed on peer.flow
            # alone, a ping flow cut in once and never again)
            busy = peer.flow if peer.frames else b""
            # (PREEMPT_MAX only: a grant queued behind a longer lane-1 packet would wait for it)
            packet = self.queues.pop_sparse(i, now, PREEMPT_MAX, busy)
            if packet is None:
                continue
            if peer.frames:
                peer.preempt(packet, now)  # (lane 1, before the rest of its own packet)
            else:
                peer.load(packet, now, self.queues.last_key(i))
                peer.counters.preempted += 1
            self._poke(i, packet, now)
            self.first.add(peer)
            c.cut_in += 1
            return

    def fill_aside(self, radio: LinkRadio, now: float, c: TxCounters) -> bool:
        """A mobile waiting for a grant: a small packet on the downlink's channel (aside.py);
        may the uplink's frames be loaded now (in a grant, the radio back on its channel)?"""
        aside, peer = self.aside, self.table.peers[0]
        if aside is None:
            return True
        if not self.waiting(now):
            return aside.back(radio, peer, False, now)
        if not aside.on and self.permit is not None and self.permit.base_deaf(now):
            return False  # (the base said it does not listen: the packet waits for a grant)
        loaded = aside.fill(radio, peer, self.queues, now)
        if loaded:
            self.sending = peer
            c.frames_sent += loaded
        else:
            aside.back(radio, peer, True, now)
        return False

    def aside_stats(self) -> dict[str, int]:
        """The downlink channel's counters (aside.py): a base's, a mobile's (empty: neither)."""
        if self.listen is not None:
            return self.listen.stats()
        return {} if self.aside is None else self.aside.stats()

    def aside_busy(self) -> bool:
        """A mobile's packet on its way on the downlink's channel (its frames go meanwhile)."""
        return self.aside is not None and self.aside.busy(self.table.peers[0])

    def fill(self, radio: LinkRadio, now: float, c: TxCounters) -> None:
        """2. scheduler, 3. fragmenter, 4. radio_tx: load frames while the TX FIFO has room."""
        if not self.fill_aside(radio, now, c):
            return
        self.cut_in(now, c)
        sending = self.sending
        permit = self.permit
        while radio.is_fifo(True) != FIFO_FULL:
            if permit is not None and permit.granted(now):
                if permit.released:  # only the frames up to the release go (uplink.py)
                    if self.release_left <= 0:
                        break
                    self.release_left -= 1
                    sending = self.sending = self.table.peers[0]
                    radio.start_fast_write(sending.next_frame())
                    c.frames_sent += 1
                    continue
                if not permit.may_send(now):
                    break
            first = self.first.peer()
            if first is not None:
                sending = self.sending = first
            if sending is None or not sending.frames:
                if permit is not None and not permit.may_load(now):
                    break
                sending = self.sending = self.next(radio, now)
                if sending is None:
                    break
            elif permit is None or permit.may_load(now):
                preempt(self.queues, sending, now)  # an interactive packet goes first
            if sending is not self.addressed:  # (a peer's that goes first, or a packet's rest)
                if not radio.is_fifo(True, True):
                    break  # the FIFO drains first (its news wakes the process)
                self.owner.apply(Transmit(sending.radio_address))
                self.addressed = sending
            # room just seen (write_fast would ask the chip again). A MAX_RT meanwhile halts
            # the chip with this frame loaded; before_tun flushes it next turn and drops what is
            # left of its packets.
            radio.start_fast_write(sending.next_frame())
            c.frames_sent += 1

    def news(self, sent_ok: bool, max_rt: bool, now: float) -> bool:
        """What the chip said of the addressed peer's frames; True: of a frame sent on the
        downlink's channel (a MAX_RT there is not the link's: aside.py)."""
        if self.aside is not None and self.aside.news(self.addressed, max_rt, now):
            return True
        if sent_ok:
            self.queues.delivered(self.addressed.index)
        if max_rt:
            self.addressed.max_rt()
            self.queues.max_rt(self.addressed.index, now)
            self.release_left = 0  # (given up with the rest: the base waits it out)
        return False

    # -- the pump's turn (sending.Sending) ------------------------------------------------

    def before_tun(
        self,
        child: Child,
        radio: LinkRadio | None,
        pair: socket.socket,
        news: bool,
        now: float,
    ) -> bool:
        """The IRQ pin's edges; the RX process's news of the uplink; the chip's news (first: it
        decides what the FIFO holds); the adaptation."""
        take_edges(radio)
        # (a read that finds nothing costs a system call and an exception each loop turn)
        if news if self.pair_watched else now - self.pair_looked >= PAIR_LOOK_S:
            self.pair_looked = now
            self.uplink_news(pair, now)
        if radio is None:
            return True
        adapt = self.adapt
        sent_ok, max_rt, _ = radio.what_happened()
        max_rt = max_rt or self.pending_max_rt
        self.pending_max_rt = False
        # (a rate trial's probe that met MAX_RT gives up nothing of the peer's: adapt_esb)
        aside = self.news(sent_ok, max_rt and not adapt.probing(), now)
        if sent_ok:
            self.storm = 0
            adapt.acknowledged(now)
        if max_rt:
            radio.flush_tx()
        if max_rt and not aside:  # (aside: the base was sending, not the link's MAX_RT)
            adapt.max_rt += 1
            self.storm += 1
            if self.storm >= MAX_RT_STORM:  # a wedged chip looks like this too: start it over
                self.storm = 0
                child.reinitialise(f"{MAX_RT_STORM} MAX_RT in a row")
                return False
        opts = child.cfg.radio
        on = opts.adapt and opts.acked
        if on or adapt.adapter is not None:  # (its counts are read only while it adapts)
            self._fifo_empty.radio = radio
            one = len(self.table) == 1 and self.permit is None  # (a cell: the configured rate)
            turn = EsbTurn(
                on,
                opts.rate,
                child.cfg.pa_value,
                one,
                child.applied,
                self.c.frames_sent,
                radio.retransmissions,
                radio.fifo_depth,
                self._fifo_empty,
                self.table.peers[0],
            )
            self._carry(radio, adapt.step(turn, now))
        else:
            adapt.max_rt = 0  # (counted for the adaptation's next turn: none)
        return True

    def _carry(self, radio: LinkRadio, actions: list[EsbAction]) -> None:
        """The adaptation's decisions, in order: settings to the radio's owner, our
        link-control packets into the TX FIFO."""
        for action in actions:
            if isinstance(action, Load):
                for frame in action.frames:
                    radio.start_fast_write(frame)
                self.c.frames_sent += len(action.frames)
            else:
                self.owner.apply(action)

    def after_tun(
        self, child: Child, radio: LinkRadio | None, pair: socket.socket, read: bool, now: float
    ) -> None:
        """Keepalives, the uplink, a base's listening, then 2.-4.: frames into the FIFO."""
        if radio is None:
            return
        adapt, table, queues, c = self.adapt, self.table, self.queues, self.c
        # keepalives (their frames wait with their peer, as a packet's)
        keepalives(table, queues, adapt.keepalive_s(child.cfg.keepalive_s), now)
        # the uplink
        self.uplink(now)
        if self.listen is not None:  # (a base with several mobiles: between its bursts)
            busy = any(p.frames for p in table) or bool(len(queues))  # (backed off too)
            self.listen.turn(radio, pair, busy, self.addressed, now)
        listening = self.listen is not None and self.listen.listening  # (holding: listening.py)
        if adapt.may_load() and not listening:  # (nor while a new rate waits for the FIFO)
            self.fill(radio, now, c)
        if self.release(now):
            # its last frame loaded, nothing more queued: the release goes behind it now
            # (a wake-up later came after the grant's end on a busy machine: no release,
            # and the base took the mobile for busy)
            self.fill(radio, now, c)

    def control_now(self) -> bool:
        return not self.loading()  # (between packets: a new epoch seals the next whole)

    def stats(self, radio: LinkRadio | None, now: float) -> dict[str, Any]:
        table, queues = self.table, self.queues
        return {
            **table_stats(self.c, {p.name: p.stats() for p in table}, queue_parts(table, queues)),
            **queues.stats(now),
            "retransmissions": None if radio is None else radio.retransmissions,
            "uplink": self.uplink_stats(now),
            "aside": self.aside_stats(),
            "adapt": self.adapt.stats(now),
        }

    def wake(self, radio: LinkRadio | None, tun: Any, pair: socket.socket, now: float) -> Wake:
        """5. wait: until the TUN, the radio, the RX process or the supervisor has
        something (the parts' times: ``parts``)."""
        adapt, queues = self.adapt, self.queues
        loading = self.loading()
        work = any(p.frames for p in self.table) or queues.sendable(now)  # (loading: too)
        if self.permit is not None and not self.permit.may_send(now) and not self.release_left:
            # (waiting for a grant: the RX process's news wakes us; a packet on the
            # downlink's channel meanwhile goes on)
            work = self.aside_busy()
        look_now = False
        if radio is not None and not on_irq(radio):
            # (On an IRQ pin, news since the look above left an edge: no second look.)
            # A MAX_RT taken in while loading (a backend may read the radio's news) leaves the
            # descriptor quiet: look now, or the radio would idle until the timeout. Looked at
            # before the descriptor: what_happened clears the chip's flags, and an IRQ pin
            # falls again only after that.
            sent_ok, self.pending_max_rt, _ = radio.what_happened()
            if sent_ok:
                self.storm = 0
                adapt.acknowledged(now)
                self.news(True, False, now)
            # A payload went out since the FIFO was loaded, and its news was taken in just
            # now: sleeping on the descriptor would wait for news that may never come (the
            # FIFO may have drained meanwhile): load first. It once slept 0.25 s so with a
            # packet half loaded on a busy machine (pings 255 ms late).
            look_now = self.pending_max_rt or (sent_ok and work)
        # A backend without a descriptor (pyrf24 without its IRQ pin) is polled while anything
        # is on its way: a frame to load, a packet queued, or frames in the chip's FIFO whose
        # fate is not known yet. (It slept 0.25 s once the FIFO held a packet's last frames,
        # with more queued: packets expired in a queue that should have moved every 1.5 ms.)
        poll = (
            radio is not None
            and waitable(radio) is None
            and (work or not radio.is_fifo(True, True))
        )
        # (the pair is watched once the uplink is granted; before, looked at every
        # PAIR_LOOK_S for a first grant)
        self.pair_watched = self.permit is not None or self.grants is not None or self.agile
        also = (() if loading else (tun,)) + ((pair,) if self.pair_watched else ())
        return None, look_now, poll, also

    def fates(self, radio: LinkRadio | None) -> tuple[int, int]:
        """Our attempts and failed ones since we began (agility.py's ``Sent``): the frames
        loaded and the chip's retransmissions; failed, those and each MAX_RT's first try."""
        retransmissions = 0 if radio is None else radio.retransmissions
        max_rt = sum(p.counters.max_rt for p in self.table)
        return self.c.frames_sent + retransmissions, retransmissions + max_rt

    def parts(self) -> tuple[Part | None, ...]:
        owner = self.owner if self.owner.later else None  # (asked only while it holds some)
        a, q, up, listen, aside = self.adapt, self.queues, self.grants, self.listen, self.aside
        return (owner, a, q, up, self.permit, listen, aside)
