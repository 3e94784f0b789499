"""The TX radio process: TUN -> queue -> frames -> radio. One loop of non-blocking calls:

1. tun_reader   read every packet the kernel has for the link into the fair queue;
2. scheduler    when the previous packet is loaded, take the next one (fair, bounded, aged);
3. fragmenter   cut it into frames (``longge.protocol``);
4. radio_tx     load frames while the TX FIFO has room (``start_fast_write``: never blocks);
5. max_rt       a frame that exhausted its retries: flush, abandon the rest of its packet;
6. keepalive    nothing sent for ``keepalive_s``: send a keepalive frame so the peer knows;
   (adapt)      with ``adapt``: the retries (and with one peer the rate) chosen from the
                frames' fate (adapt_tx.py);
7. uplink       a base with several mobiles grants the shared uplink in turn; a mobile that
                heard a grant sends only in its grants and hands back what it does not need
                (``protocol/uplink*.py``; the RX process passes grants and releases on);
8. wait         sleep until the TUN, the radio, the RX process or the supervisor has
                something, or the grant's time is up.
"""

from __future__ import annotations

import signal
import socket
import sys
import time
from multiprocessing.connection import Connection

from longge.config import NodeConfig
from longge.daemon.adapt_tx import Adaptation
from longge.daemon.aside import BaseListening, MobileAside
from longge.daemon.aside import parts as aside_parts
from longge.daemon.child import FIFO_FULL, Child, on_irq, take_edges, waitable
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.peers import (
    PREEMPT_MAX,
    GoFirst,
    TxCounters,
    keepalives,
    make_queues,
    preempt,
    queue_parts,
    read_tun,
    senders_once_recorded,
    table_stats,
)
from longge.daemon.radio_owner import RadioOwner, Transmit, hears_aside
from longge.daemon.uplink_tx import UplinkSending
from longge.protocol.peer import PeerSender, PeerTable
from longge.protocol.secure import SecurityError
from longge.protocol.uplink_scheduler import UplinkScheduler
from longge.radio.interface import LinkRadio
from longge.tun import Tun, TunError

#: After this many MAX_RT in a row the radio is re-initialised (the interface stays up).
MAX_RT_STORM = 64


def link_control(child: Child, table: PeerTable[PeerSender]) -> None:
    """What the RX process passed on through the supervisor (child.py), for a peer: it
    refuses our epochs, or its sender is stale (``PeerSender.link_control``)."""
    if not child.skip_past and not child.floor_to_send:
        return
    for peer in table:
        i = peer.index
        try:
            peer.link_control(child.skip_past.pop(i, None), child.floor_to_send.pop(i, None))
        except SecurityError as exc:  # a new epoch that cannot be recorded: seal nothing
            print(f"longge-tx: {exc}; starting again", file=sys.stderr, flush=True)
            child.running = False  # (the supervisor starts it again: senders_once_recorded)
            return


class EsbSending(UplinkSending):
    """Which peer's frames the TX radio is loading, and whose address it sends to. The chip
    has one TX address: another peer's packet starts only once the TX FIFO has drained (its
    frames' fates known), and the address changes then. The shared uplink's part (a base's
    grants, a mobile's permit): UplinkSending."""

    def __init__(self, table: PeerTable[PeerSender], queues: PeerQueues, owner: RadioOwner) -> None:
        self.table = table
        self.queues = queues
        self.owner = owner
        self.sending: PeerSender | None = None  # whose frames are being loaded
        self.addressed = table.peers[0]  # whose address the radio has (RadioOwner.set_up)
        self.applied = 0  # child.applied when `addressed` was last known
        #: peers whose frames go before the rest, at once (a grant of the uplink: it counts
        #: from when it was made; a packet cut in); what is left of another's waits meanwhile
        self.first = GoFirst()
        #: a base's TX radio listening between bursts, a mobile's small packets sent there
        #: while it waits for a grant (aside.py); None: neither
        self.listen: BaseListening | None = None
        self.aside: MobileAside | None = None
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
            # the chip with this frame loaded; step 5 flushes it next turn and drops what is
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


def tx_stats(
    c: TxCounters,
    table: PeerTable[PeerSender],
    queues: PeerQueues,
    radio_part: dict[str, object],
    now: float,
) -> dict[str, object]:
    return {
        **table_stats(c, {p.name: p.stats() for p in table}, queue_parts(table, queues)),
        **queues.stats(now),
        **radio_part,
    }


def run(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when we stop
    child = Child(cfg, "tx", conn)
    table = senders_once_recorded(cfg, child)
    if table is None:
        return
    queues = make_queues(cfg, table)
    out = EsbSending(table, queues, child.owner)
    adapt = Adaptation(child.owner)
    if cfg.role == "base" and len(table) > 1:
        out.grants = UplinkScheduler(len(table), revoke_busy=not hears_aside(cfg))
    out.listen, out.aside = aside_parts(cfg, adapt, child.owner)
    out.uplink_start(cfg, time.monotonic())  # (a mobile that remembers its base's grants)
    c = TxCounters()
    start = time.monotonic()
    for peer in table:
        peer.last_sent = start
    storm = 0  # MAX_RT in a row, without a frame acknowledged in between
    pending_max_rt = False  # seen just before sleeping (what_happened may clear the flag)
    control_ready = True  # the supervisor's pipe: looked at when select() found it readable
    pair_ready = pair is not None  # the RX process's news: likewise
    pair_looked = 0.0
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        out.settings_applied(child)
        take_edges(radio)
        try:
            read_tun(tun, cfg.mtu, radio is not None, table, queues, c, now)
        except TunError as exc:
            child.fail(str(exc))
            break
        # the RX process's news of the uplink, read when select() found the pair readable (a
        # read that finds nothing costs a system call and an exception each loop turn)
        if pair_ready:
            out.uplink_news(pair, now)
        if radio is not None:
            # 5. max_rt (checked first: it decides what the FIFO holds)
            sent_ok, max_rt, _ = radio.what_happened()
            max_rt = max_rt or pending_max_rt
            pending_max_rt = False
            # (a rate trial's probe that met MAX_RT gives up nothing of the peer's: adapt_tx)
            aside = out.news(sent_ok, max_rt and not adapt.probing(), now)
            if sent_ok:
                storm = 0
                adapt.acknowledged(now)
            if max_rt:
                radio.flush_tx()
            if max_rt and not aside:  # (aside: the base was sending, not the link's MAX_RT)
                adapt.max_rt += 1
                storm += 1
                if storm >= MAX_RT_STORM:  # a wedged chip looks like this too: start it over
                    storm = 0
                    child.reinitialise(f"{MAX_RT_STORM} MAX_RT in a row")
                    continue
            adapt.step(child, radio, c, table, now, cell=out.permit is not None)
            # 6. keepalive (its frames wait with their peer, as a packet's)
            keepalives(table, queues, adapt.keepalive_s(cfg.keepalive_s), now)
            # 7. uplink
            out.uplink(now)
            if out.listen is not None:  # (a base with several mobiles: between its bursts)
                busy = any(p.frames for p in table) or bool(len(queues))  # (backed off too)
                out.listen.step(radio, pair, busy, out.addressed, now)
            listening = out.listen is not None and out.listen.listening  # (holding: aside.py)
            if adapt.may_load() and not listening:  # (nor while a new rate waits for the FIFO)
                out.fill(radio, now, c)
            if out.release(now):
                # its last frame loaded, nothing more queued: the release goes behind it now
                # (a wake-up later came after the grant's end on a busy machine: no release,
                # and the base took the mobile for busy)
                out.fill(radio, now, c)
        if control_ready:
            child.handle_control()
        if not out.loading():
            link_control(child, table)
        if child.stats_due(now):
            child.send_stats(
                tx_stats(
                    c,
                    table,
                    queues,
                    {
                        "retransmissions": None if radio is None else radio.retransmissions,
                        "uplink": out.uplink_stats(now),
                        "aside": out.aside_stats(),
                        "adapt": adapt.stats(now),
                    },
                    now,
                )
            )
        # 8. wait
        loading = out.loading()
        work = any(p.frames for p in table) or queues.sendable(now)  # (loading: frames too)
        if out.permit is not None and not out.permit.may_send(now) and not out.release_left:
            # (waiting for a grant: the RX process's news wakes us; a packet on the
            # downlink's channel meanwhile goes on)
            work = out.aside_busy()
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
                adapt.acknowledged(now)
                out.news(True, False, now)
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
        # (the pair is watched once the uplink is granted; before, looked at every 0.25 s
        # for a first grant: one descriptor less in each select() of a link with one mobile)
        watch_pair = pair is not None and (out.permit is not None or out.grants is not None)
        also = (() if loading else (tun,)) + ((pair,) if watch_pair else ())
        timeout = adapt.wait_s(now, out.wait_s(now, queues.wait_s(now, 0.25)))
        if out.listen is not None:
            timeout = out.listen.wait_s(now, timeout)
        if out.aside is not None:
            timeout = out.aside.wait_s(now, timeout, bool(len(queues)))
        ready = child.wait(radio, timeout, now=look_now, poll=poll, also=also)
        control_ready = child.conn_fd in ready
        pair_ready = pair in ready if watch_pair else now - pair_looked >= 0.25
        if pair_ready:
            pair_looked = now
    child.close_radio()
