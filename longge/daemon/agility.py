"""A link that moves off a busy channel, in the RX radio process (``[radio] agile = true``;
docs/design.md §6): the decisions are the protocol's parts (band.py, channel_plan.py,
channel_follow.py); this is where they meet the node.

The RX process is where the link's channels are decided, because it hears what they depend
on: its radio's power detector (dwells on other channels while it is idle, ``read_power``),
the base's MOVE and HERE (a mobile), the mobiles' BAND reports (a base). The TX process is
the hands: it tells its sending's counts (``Sent``), sends what it is given to say (``Say``:
MOVE, HERE, BAND through the peer's sender, between the frames of a packet on its way) and
puts its radio on the channel it is given at the moment it is given (``SwitchAt``, through
its radio's owner). messages.py carries them.

    base    its plan (both channels): the downlink's windows from ``Sent``, the uplink's from
            its mobiles' BAND; a move: MOVE to every mobile each MOVE_EVERY_S till its
            moment, then both radios switch; HERE to every mobile each HERE_S (BEACON_S to
            one not heard for a while: channel_follow.py's rendezvous).
    mobile  its follower: a MOVE or HERE heard, both radios switch at its moment; nothing
            heard for a while, the RX radio searches; its BAND each REPORT_S (or sooner
            while its uplink fails), with ``Sent``'s counts.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
from pathlib import Path
from typing import Any

from longge.config import NodeConfig
from longge.daemon.keystate import identities
from longge.daemon.messages import Say, Sent, SwitchAt, send
from longge.daemon.radio_owner import RadioOwner
from longge.protocol import channel_control as cc
from longge.protocol.actions import Channel
from longge.protocol.band import Band
from longge.protocol.channel_follow import (
    RX,
    TX,
    ChannelFollower,
    Reporting,
    Switch,
    here_every,
)
from longge.protocol.channel_plan import DOWNLINK, ChannelPlan
from longge.protocol.peer import PeerReceiver, PeerTable

#: A dwell on another channel every DWELL_EVERY_S while the RX radio is idle (nothing came
#: for IDLE_S), and at least every DWELL_BUSY_S when it is not: a frame that comes while it is
#: away (about 0.5 ms) is sent again by the sender's retries (ESB) or its ARQ.
DWELL_EVERY_S = 0.01
DWELL_BUSY_S = 0.25
IDLE_S = 0.005
#: The base's MOVE again and again till the move's moment (its HERE: channel_follow.py's
#: ``here_every``).
MOVE_EVERY_S = 0.01


def kept_file(cfg: NodeConfig) -> Path:
    """Where a node keeps its link's channels (its own file: nodes may share a state folder)."""
    own, _ = identities(cfg, cfg.peers[0])
    return Path(cfg.state_dir) / f"{cfg.tun}.{own}.channels"


class RxAgility:
    """The RX process's part of a link that moves."""

    def __init__(
        self,
        cfg: NodeConfig,
        owner: RadioOwner,
        pair: socket.socket,
        now: float,
        acks_apart: bool = False,
    ):
        """``acks_apart``: the link's frames are acknowledged by LongGe's ARQ, across the
        other direction's channel (stream mode: channel_plan.py counts so)."""
        self.owner, self.pair = owner, pair
        self.base = cfg.role == "base"
        # the link's (uplink, downlink): a base's RX radio is on the uplink, a mobile's on
        # the downlink
        mine = cfg.tx_channel, cfg.rx_channel
        home = mine[::-1] if self.base else mine
        #: where the link's channels are kept across restarts (a restarted node starts where
        #: its link was, not at home)
        self.kept = kept_file(cfg)
        up, down = self._kept(cfg.channels) or home
        self.band = Band(cfg.channels)
        #: a link without security stays where it is (its mobiles would refuse the moves:
        #: docs/design.md §6, anyone could send them)
        pinned = cfg.insecure
        self.plan = ChannelPlan(self.band, up, down, now, pinned, acks_apart) if self.base else None
        self.follower = (
            None if self.base else ChannelFollower(home, cfg.channels, now, current=(up, down))
        )
        self.keep_failed = 0
        self.said = self.unsaid = 0
        if (up, down) != home:  # (both radios where the link was)
            tx, rx = (down, up) if self.base else (up, down)
            owner.link_channel = rx  # (the radio is set up there: RadioOwner.set_up)
            self._tell(SwitchAt(tx, rx, now))
        self.reporting = None if self.base else Reporting(now)
        self.last_frame = -math.inf
        self._last_dwell = -math.inf
        self._next_here: dict[int, float] = {}  # (each mobile's next HERE)
        self._started = now
        self._next_move = now
        self._sent: tuple[int, int] | None = None
        self._heard: dict[int, float | None] = {}
        self._again: dict[int, int] = {}  # (each peer's frames received again, last read)
        self._was = (up, down)
        self._due = now  # (the parts' next moment: ``turn``)

    # -- the link's channels --------------------------------------------------------------------
    def channels(self) -> tuple[int, int]:
        """(uplink, downlink) as this node has them now."""
        if self.plan is not None:
            return self.plan.uplink, self.plan.downlink
        assert self.follower is not None
        return self.follower.uplink, self.follower.downlink

    # -- what comes in --------------------------------------------------------------------------
    def sent(self, msg: Sent, now: float) -> None:
        """Our TX process's counts since it began: the changes go to the plan (the downlink's
        windows) or the mobile's report (the uplink's)."""
        last, self._sent = self._sent, (msg.attempts, msg.failures)
        if last is None or msg.attempts < last[0] or msg.failures < last[1]:
            return  # (the first, or a TX process started again: counted from here)
        attempts, failures = msg.attempts - last[0], msg.failures - last[1]
        self._due = now  # (a window may have ended: the plan decides)
        if self.plan is not None:
            self.plan.sent(DOWNLINK, attempts, failures, now)
        elif self.reporting is not None:
            self.reporting.sent(attempts, failures)

    def frame(self, now: float) -> None:
        """A frame came (the RX radio is busy: no dwell just now)."""
        self.last_frame = now

    # -- each turn ------------------------------------------------------------------------------
    def turn(self, table: PeerTable[PeerReceiver], now: float) -> None:
        """Each turn of the RX pump: the parts' work when one of their moments came or news
        did (a report, a move, a HERE, a packet of the base's), else nothing (the pump turns
        for every frame: thousands of times a second on a loaded link)."""
        if now < self._due and not self._news(table):
            return
        if self.plan is not None:
            self._base(table, now)
        else:
            self._mobile(table, now)
        self._keep()
        self._dwell(now)
        due = self.wake_at(now)
        self._due = now if due is None else due

    def _news(self, table: PeerTable[PeerReceiver]) -> bool:
        if self.plan is not None:
            return any(peer.band_heard is not None for peer in table)
        base = table.peers[0]
        heard = base.last_heard is not None and base.last_heard != self._heard.get(0)
        return heard or base.move_heard is not None or base.here_heard is not None

    def _base(self, table: PeerTable[PeerReceiver], now: float) -> None:
        plan = self.plan
        assert plan is not None
        for peer in table:
            if peer.band_heard is not None:
                report, at = peer.band_heard
                peer.band_heard = None
                again = self._received_again(peer)
                plan.report(report.attempts, report.failures, report.echoed, again, at)
                self.band.peer_levels(report.levels, at)
                plan.peer_near(report.near, at)
        if plan.pending is not None and now >= plan.pending.at:
            plan.done(now)
        elif plan.pending is None:
            move = plan.step(now)
            if move is not None:
                self.owner.schedule(move.at, Channel(move.uplink))
                self._tell(SwitchAt(move.downlink, move.uplink, move.at))
                self._next_move = now
        p = plan.pending
        if p is not None and now >= self._next_move:
            self._next_move = now + MOVE_EVERY_S
            for peer in table:
                self._say(peer.index, cc.move_message(p.seq, p.uplink, p.downlink, p.at - now))
        if plan.pending is not None:  # (no HERE with the old channels and the new move's
            return  # number: MOVE says it now)
        due = [peer for peer in table if now >= self._next_here.get(peer.index, now)]
        if not due:
            return
        nxt = plan.announce(now)
        for peer in due:  # (more often to one not heard for a while: the rendezvous's beacon)
            heard = self._started if peer.last_heard is None else peer.last_heard
            self._next_here[peer.index] = now + here_every(now - heard)
            self._say(peer.index, cc.here_message(plan.seq, plan.uplink, plan.downlink, nxt))

    def _mobile(self, table: PeerTable[PeerReceiver], now: float) -> None:
        follower, reporting = self.follower, self.reporting
        assert follower is not None and reporting is not None
        base = table.peers[0]
        switches: list[Switch] = []
        if base.last_heard is not None and base.last_heard != self._heard.get(0):
            self._heard[0] = base.last_heard
            switches += follower.heard(base.last_heard)
        if base.move_heard is not None:
            move, at = base.move_heard
            base.move_heard = None
            switches += follower.move(move, at)
        if base.here_heard is not None:
            here, at = base.here_heard
            base.here_heard = None
            switches += follower.here(here, at)
        switches += follower.step(now)
        self._switch(switches, now)
        reporting.received_again(self._received_again(base))
        counts = reporting.take(now)
        if counts is not None:
            up, down = self.channels()
            busy, total = self.band.near((up, down), now - 1.0)
            near = busy / total if total else None
            attempts, failures, echoed = counts
            levels = self.band.levels(now)
            self._say(0, cc.band_message(attempts, failures, near, levels, echoed))

    def _received_again(self, peer: PeerReceiver) -> int:
        """The frames of ``peer`` our receiver got again since the last call (stream mode's
        ARQ: a copy of one that came through, its ACK lost on the other channel; 0 in ESB)."""
        if peer.arq is None:
            return 0
        total = peer.arq.stats.duplicates
        last = self._again.get(peer.index)
        self._again[peer.index] = total
        return 0 if last is None or total < last else total - last

    def _switch(self, switches: list[Switch], now: float) -> None:
        """The follower's switches: the RX radio's ours (now, or at their moment), the TX
        radio's told to the TX process."""
        for s in switches:
            if s.radio == RX:
                if s.at <= now:
                    self.owner.apply(Channel(s.channel))
                else:
                    self.owner.schedule(s.at, Channel(s.channel))
            elif s.radio == TX:
                assert self.follower is not None
                self._tell(SwitchAt(s.channel, self.follower.downlink, s.at))

    def _dwell(self, now: float) -> None:
        """A reading of the power detector on another channel, when it is time (and the radio
        idle, or it has been long)."""
        if now < self._next_dwell(now):
            return
        channel = self.band.next_channel(self.channels())
        self._last_dwell = now
        if channel is None:
            return
        busy = self.owner.read_power(channel)
        if busy is not None:
            self.band.reading(channel, busy, now)

    def _say(self, peer: int, packet: bytes) -> None:
        if send(self.pair, Say(peer, packet)):
            self.said += 1
        else:
            self.unsaid += 1

    def _tell(self, msg: SwitchAt) -> None:
        if not send(self.pair, msg):
            self.unsaid += 1

    def _keep(self) -> None:
        """The link's channels, written where a restarted node finds them (when they moved)."""
        now = self.channels()
        if now == self._was:
            return
        self._was = now
        tmp = self.kept.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps({"uplink": now[0], "downlink": now[1]}))
            os.replace(tmp, self.kept)
        except OSError:
            self.keep_failed += 1  # (a read-only state folder: the link works, a restart
            with contextlib.suppress(OSError):  # starts at home and searches)
                tmp.unlink()

    def _kept(self, allowed: tuple[int, ...]) -> tuple[int, int] | None:
        try:
            saved = json.loads(self.kept.read_text())
            up, down = saved["uplink"], saved["downlink"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        fine = type(up) is int and type(down) is int and up in allowed and down in allowed
        return (up, down) if fine and abs(up - down) >= 2 else None

    # -- the pump's questions -------------------------------------------------------------------
    def _next_dwell(self, now: float) -> float:
        """When ``_dwell`` may read the power detector next: DWELL_EVERY_S after the last;
        while frames come (one within IDLE_S), once they stop or DWELL_BUSY_S after the last;
        not while the search has the RX radio (a moment past then kept the pump awake)."""
        if self.follower is not None and self.follower.searching:
            return math.inf
        at = self._last_dwell + DWELL_EVERY_S
        if now - self.last_frame < IDLE_S:
            at = max(at, min(self.last_frame + IDLE_S, self._last_dwell + DWELL_BUSY_S))
        return at

    def wake_at(self, now: float) -> float | None:
        soonest = self._next_dwell(now)
        if self.plan is not None:
            soonest = min([soonest, *self._next_here.values()])
            if self.plan.pending is not None:
                soonest = min(soonest, self._next_move, self.plan.pending.at)
        else:
            assert self.follower is not None and self.reporting is not None
            for part in (self.follower, self.reporting):
                at = part.wake_at(now)
                if at is not None:
                    soonest = min(soonest, at)
        return soonest

    def stats(self, now: float) -> dict[str, Any]:
        part = self.plan if self.plan is not None else self.follower
        assert part is not None
        return {
            **part.stats(now),
            "band": self.band.stats(now),
            "dwells": self.owner.dwells,
            "said": self.said,
            "unsaid": self.unsaid,
        }
