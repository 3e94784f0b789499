"""The TX radio process, one pump for both link modes: TUN -> queue -> frames -> radio. One
loop of non-blocking calls, the link mode's sending half (``Sending``, sending.py; chosen
once, below) taking its steps between the pump's:

   radio        the radio brought up (again) where it is not (``Child.ensure_radio``);
   news         (mode) what the chip said of the frames on their way (ESB: acknowledged,
                or MAX_RT: the rest of the packet is given up; stream mode: the peers' ACKs
                and ours, from the RX process), what the RX process heard of the shared
                uplink, the adaptation (``before_tun``);
1. tun_reader   read every packet the kernel has for the link into the fair queue;
   send         (mode) the shared uplink's grants and releases, keepalives, a base's
                listening between its bursts, and:
2. scheduler    the next packet when the previous one is loaded (fair, bounded, aged);
3. fragmenter   cut into frames (``longge.protocol``; stream mode: through the ARQ);
4. radio_tx     frames loaded while the TX FIFO has room (``after_tun``);
   control      the supervisor's messages, link control for the peers, the counters;
5. wait         sleep until the TUN, the radio, the RX process or the supervisor has
                something (``wake``), or the soonest of the parts' moments (the mode's
                timers, the uplink's, the adaptation's, the radio owner's schedule:
                ``Sending.parts``, protocol/part.py).

ESB's sending half is ``esb_tx.py``, stream mode's ``stream_tx.py`` (docs/design.md §1, "One
pump").
"""

from __future__ import annotations

import signal
import socket
import time
from multiprocessing.connection import Connection
from typing import Any

from longge.config import NodeConfig
from longge.daemon.child import LONGEST_WAIT_S, Child
from longge.daemon.esb_tx import EsbSending
from longge.daemon.messages import Sent, send
from longge.daemon.peers import TxCounters, make_queues, read_tun, senders_once_recorded
from longge.daemon.radio_owner import hears_aside
from longge.daemon.sending import Sending, link_control
from longge.daemon.stream_tx import StreamSending
from longge.protocol.part import wake_in
from longge.protocol.uplink_scheduler import UplinkScheduler
from longge.radio.interface import LinkRadio
from longge.tun import Tun, TunError

#: A link that may move (agile): our sending's counts to the RX process this often (its
#: windows judge the channel: agility.py).
SENT_EVERY_S = 0.05


class TxPump:
    """The loop's state between turns: the mode's sending half, what the last ``select()``
    found readable (``ready``) and what it asked about beside the supervisor's pipe and the
    radio (``also``): a descriptor it did not ask about is looked at anyway. The loop runs
    once per frame or two: a look at a descriptor that has nothing costs more than the
    frame's own work."""

    def __init__(self, out: Sending, child: Child, tun: Tun, pair: socket.socket) -> None:
        self.out, self.child, self.tun, self.pair = out, child, tun, pair
        self.ready: list[Any] = []
        self.also: tuple[Any, ...] = ()
        self.asked = False  # (before the first sleep: nothing was asked, all is looked at)

    def turn(self, radio: LinkRadio | None, now: float) -> bool:
        """One turn's moves, the sleep apart: the mode's news, 1. tun_reader, the mode's
        sending. False: the radio was started over (the turn ends). TunError: the TUN
        interface is gone."""
        out, child, tun, pair = self.out, self.child, self.tun, self.pair
        ready, also, asked = self.ready, self.also, self.asked
        if child.owner.later:
            child.owner.due(now)  # (the radio's settings given for now)
        out.settings_applied(child)
        news = pair in ready or not asked or pair not in also
        if not out.before_tun(child, radio, pair, news, now):
            return False
        read = tun in ready or not asked or tun not in also
        if read:  # 1. tun_reader
            read_tun(tun, child.cfg.mtu, radio is not None, out.table, out.queues, out.c, now)
        out.after_tun(child, radio, pair, read, now)
        return True

    def wait(self, radio: LinkRadio | None, now: float) -> None:
        """5. wait: as ``sleep`` says."""
        timeout, at_once, poll, also = self.sleep(radio, now)
        self.also, self.asked = also, True
        self.ready = self.child.wait(radio, timeout, now=at_once, poll=poll, also=also)

    def sleep(
        self, radio: LinkRadio | None, now: float
    ) -> tuple[float, bool, bool, tuple[Any, ...]]:
        """How the pump may sleep: as the mode says (``Sending.wake``), till the soonest of
        its moment and its parts' (``Sending.parts``), LONGEST_WAIT_S at most."""
        out = self.out
        at, at_once, poll, also = out.wake(radio, self.tun, self.pair, now)
        return wake_in(now, LONGEST_WAIT_S, out.parts(), at), at_once, poll, also


def run(cfg: NodeConfig, tun: Tun, conn: Connection, pair: socket.socket) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when we stop
    kind: type[Sending] = StreamSending if cfg.radio.mode == "stream" else EsbSending
    child = Child(cfg, "tx", conn, beside_air=kind.BESIDE_AIR)  # (the one place, above)
    table = senders_once_recorded(cfg, child, kind.ARQ)
    if table is None:
        return
    queues = make_queues(cfg, table)
    c = TxCounters()
    out = kind(cfg, table, queues, c, child.owner)
    if cfg.role == "base" and len(table) > 1:
        out.grants = UplinkScheduler(len(table), revoke_busy=not hears_aside(cfg))
    out.uplink_start(cfg, time.monotonic())  # (a mobile that remembers its base's grants)
    pump = TxPump(out, child, tun, pair)
    conn_fd = child.conn_fd
    sent_at = 0.0  # (agile: our fates to the RX process each SENT_EVERY_S)
    while child.running:
        now = time.monotonic()
        radio = child.ensure_radio(now)
        try:
            if not pump.turn(radio, now):
                continue  # (the radio was started over)
        except TunError as exc:
            child.fail(str(exc))
            break
        if conn_fd in pump.ready or not pump.asked:
            child.handle_control()
        if out.control_now():
            link_control(child, table)
        if child.stats_due(now):
            child.send_stats(out.stats(radio, now))
        if cfg.radio.agile and now - sent_at >= SENT_EVERY_S:
            sent_at = now
            send(pair, Sent(*out.fates(radio)))
        pump.wait(radio, now)
    child.close_radio()
