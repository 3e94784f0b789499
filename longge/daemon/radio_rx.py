"""The RX radio process, one pump for both link modes: radio -> frames -> packets -> TUN.

1. radio_rx     read every frame the RX FIFO holds (the air stops acknowledging when full),
                each with the pipe it came on, and hand it to the link mode's receiving
                half (``Receiving``, receiving.py; chosen once, below: ESB's, where the chip
                acknowledged it, or stream mode's ARQ receivers, stream_rx.py);
2. reassembler  the peer rebuilds packets (``longge.protocol``): whole and checked, or
                counted drops;
3. tun_writer   each whole packet to the kernel; a keepalive only marks the peer as alive;
   uplink       what a peer's packet said of the shared uplink, to the TX process over the
                pair (receiving.py);
   (adapt)      with ``adapt`` and one peer: the RX radio at the rate the peer announced
                (protocol/rate_listening.py);
   aside        a base with several mobiles: the frames its TX radio heard on the downlink's
                channel between its bursts come over the pair, taken as this radio's
                (listening.py);
   turn         what goes out for the frames (stream mode: the ARQs' ACKs, to the TX
                process);
4. expire       a half-built packet that waited too long is dropped; link control for the
                supervisor (``tend``);
5. wait         sleep until the radio, the pair or the supervisor has something, or the
                parts' next moment (the mode's timers, the rate's trial, the radio owner's
                schedule: protocol/part.py).
"""

from __future__ import annotations

import signal
import socket
import time
from multiprocessing.connection import Connection
from typing import Any

from longge.config import NodeConfig
from longge.daemon.agility import RxAgility
from longge.daemon.child import LONGEST_WAIT_S, Child, RxFifo
from longge.daemon.messages import Message, Sent, SwitchAt
from longge.daemon.peers import RxCounters, receivers
from longge.daemon.radio_owner import hears_aside
from longge.daemon.receiving import EsbReceiving, Receiving, flush, heard_aside, rx_stats, tend
from longge.daemon.stream_rx import StreamReceiving
from longge.protocol.actions import Channel
from longge.protocol.part import wake_in
from longge.protocol.peer import PeerReceiver, PeerTable
from longge.protocol.rate_listening import HeardTurn, RateListening
from longge.radio.interface import LinkRadio
from longge.tun import Tun


class RxPump:
    """The loop's state between turns: the mode's receiving half, the rate it listens at, and
    what the last ``select()`` found readable (the supervisor's pipe, the pair)."""

    def __init__(
        self,
        mode: Receiving,
        rates: RateListening,
        child: Child,
        table: PeerTable[PeerReceiver],
        c: RxCounters,
        pair: socket.socket,
        aside: bool,
        agility: RxAgility | None = None,
    ) -> None:
        self.mode, self.rates, self.child, self.table, self.c = mode, rates, child, table, c
        self.pair = pair
        self.aside = aside  # (frames our TX radio heard: HeardAside on the pair)
        self.agility = agility  # (agile: the link's channels, agility.py)
        self.watch_pair = aside or agility is not None
        self.fifo = RxFifo()
        self.control_ready = True  # the supervisor's pipe: looked at when select() said so
        self.pair_ready = self.watch_pair
        #: what the pump's sleep asks (``sleep``; a mode without work of its own is not, nor
        #: the radio's owner while it holds nothing for later)
        parts: tuple[Any, ...] = (rates, mode) if mode.OWN_TURN else (rates,)
        self.parts = parts if agility is None else (*parts, agility)
        self.with_owner = (child.owner, *self.parts)
        self.also = (pair,) if self.watch_pair else ()
        self.owner = child.owner
        #: what the rate's part is told, made again when the config is (applied) again
        self._heard: HeardTurn | None = None
        self._heard_cfg: object = None

    def _heard_turn(self) -> HeardTurn:
        """What the rate's part is told, made again (the config was applied again)."""
        child = self.child
        opts = child.cfg.radio
        adapts = opts.adapt and (opts.acked or self.mode.ARQ)
        self._heard = HeardTurn(adapts, opts.rate, self.owner.applied, self.table)
        self._heard_cfg = child.cfg
        return self._heard

    def turn(self, radio: LinkRadio | None, now: float) -> None:
        """One turn's moves, the sleep apart: 1.-4., the supervisor's messages, the counters."""
        mode, child, owner = self.mode, self.child, self.owner
        if owner.later:
            owner.due(now)  # (the radio's settings given for now)
        if radio is not None:
            # The pin's edges before each look at the RX FIFO: a frame after it leaves one.
            radio.take_edges()
            # 1. radio_rx
            take = mode.take
            came = False
            for pipe, frame in self.fifo.frames(radio, mode.first_pipe(radio)):
                take(pipe, frame, now)
                came = True
            if came and self.agility is not None:
                self.agility.frame(now)
            heard, rates = self._heard, self.rates
            if heard is None or self._heard_cfg is not child.cfg or heard.applied != owner.applied:
                heard = self._heard_turn()
            if heard.adapt or rates.follower is not None:  # (else nothing to follow)
                for action in rates.step(heard, now):
                    owner.apply(action)
                if rates.announced:
                    mode.rate_switched(now)
        if self.pair_ready:
            heard_aside(self.pair, self.c, mode.take, now, self._from_tx)
        if self.agility is not None:
            self.agility.turn(self.table, now)
        if mode.OWN_TURN:  # (what goes out for the frames: stream mode's ACKs)
            mode.turn(now)
        tend(child, self.table, now)
        if self.control_ready:
            child.handle_control()
        if child.stats_due(now):
            stats = rx_stats(self.c, self.table, now)
            if self.agility is not None:
                stats["channels"] = self.agility.stats(now)
            child.send_stats({**stats, **mode.stats(), "adapt": self.rates.stats(now)})

    def _from_tx(self, msg: Message, now: float) -> None:
        """What else the TX process sent: its counts, a base's move for our radio."""
        agility = self.agility
        if agility is None:
            return
        match msg:
            case Sent():
                agility.sent(msg, now)
            case SwitchAt(_, rx, at):
                self.owner.schedule(at, Channel(rx, home=True))

    def sleep(self, radio: LinkRadio | None, now: float) -> tuple[float, bool, tuple[Any, ...]]:
        """5. wait: how long (till the soonest of the parts' moments, LONGEST_WAIT_S at most),
        whether a frame waits already (no sleeping), what else to wake on."""
        parts = self.with_owner if self.owner.later else self.parts
        timeout = wake_in(now, LONGEST_WAIT_S, parts, None)
        more = radio is not None and self.fifo.more_waiting(radio)  # frames there: no sleeping
        return timeout, more, self.also

    def wait(self, radio: LinkRadio | None, now: float) -> None:
        """5. wait, as ``sleep`` says."""
        timeout, more, also = self.sleep(radio, now)
        ready = self.child.wait(radio, timeout, now=more, poll=True, also=also)
        self.control_ready = self.child.conn_fd in ready
        self.pair_ready = self.watch_pair and self.pair in ready


def run(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when we stop
    child = Child(cfg, "rx", conn)
    kind: type[Receiving] = StreamReceiving if cfg.radio.mode == "stream" else EsbReceiving
    table = receivers(cfg, kind.ARQ)
    c = RxCounters()
    rates = RateListening(kind.ARQ)  # (adapt = true, one peer: the rate the peer announced)
    agility = (
        RxAgility(cfg, child.owner, pair, time.monotonic(), acks_apart=kind.ARQ)
        if cfg.radio.agile
        else None
    )
    mode = kind(tun, pair, table, c)
    pump = RxPump(mode, rates, child, table, c, pair, hears_aside(cfg), agility)
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        pump.turn(radio, now)
        pump.wait(radio, now)
    flush(table)
    child.close_radio()
