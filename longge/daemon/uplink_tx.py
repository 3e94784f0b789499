"""The TX process's part in the shared uplink (``protocol/uplink.py``,
``protocol/uplink_scheduler.py``): a base with several mobiles grants it to one at a time; a
mobile that heard a grant sends only in its grants and hands back what it does not need; what
the RX process heard of it comes over the pair (receiving.py). A base with one mobile,
and a mobile whose base never granted, run none of this. ``EsbSending`` (esb_tx.py) and
``StreamSending`` (stream_tx.py) are one.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import asdict
from pathlib import Path

from longge.config import NodeConfig
from longge.daemon.keystate import identities
from longge.daemon.listening import BaseListening
from longge.daemon.messages import (
    AnswerAsked,
    FramesCame,
    GrantHeard,
    Heard,
    HeardAside,
    Message,
    Released,
    Say,
    Sent,
    SwitchAt,
    received,
)
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.peers import PREEMPT_MAX, GoFirst
from longge.daemon.radio_owner import RadioOwner
from longge.protocol.actions import Channel
from longge.protocol.peer import PeerSender, PeerTable
from longge.protocol.uplink import UplinkPermit, asks_answer, grant_message, release_message
from longge.protocol.uplink_scheduler import REVOKE_S, UplinkScheduler


class UplinkSending:
    owner: RadioOwner
    table: PeerTable[PeerSender]
    queues: PeerQueues
    addressed: PeerSender
    first: GoFirst  # (EsbSending's: whose frames go first)
    listen: BaseListening | None  # (a base's TX radio between its bursts: listening.py)

    def uplink_init(self) -> None:
        #: a mobile's, from its first grant on: while it hears grants, it sends only in them
        #: (a mobile whose base never granted runs none of this)
        self.permit: UplinkPermit | None = None
        self.mobile = False
        #: a mobile's marker in its state directory: its base granted the uplink (kept across
        #: restarts: ``uplink_start``)
        self.granted_marker: Path | None = None
        #: a base's with several mobiles: who holds the uplink
        self.grants: UplinkScheduler | None = None
        #: a base's: mobiles sent a small packet that asks for an answer (a ping), while its
        #: frames are on their way: granted once it is sent (a grant in lane 1 overtook the
        #: ping, the mobile found nothing to send and handed it back)
        self.arriving: dict[int, int] = {}  # mobile: its ``taken`` once the ping has gone
        #: a mobile's frames still to go in its grant once it released it (the release's)
        self.release_left = 0
        #: a base's: the holder's ``taken`` once the running grant's frames have gone (no
        #: revoke before: it would overtake them)
        self.granting = 0

    def uplink_start(self, cfg: NodeConfig, now: float) -> None:
        """At the start: a mobile whose base granted it the uplink when it last ran (its
        marker) waits for a grant before it sends anything (UplinkPermit.expect); one that
        hears none within uplink.FREE_AFTER_S forgets (its base now grants nothing)."""
        self.mobile = cfg.role == "mobile"
        if not self.mobile:
            return
        own, base = identities(cfg, cfg.peers[0])  # (nodes may share a state directory)
        self.granted_marker = Path(cfg.state_dir) / f"{cfg.tun}.{own}-{base}.granted"
        if self.granted_marker.exists():
            self._permit().expect(now)

    def _permit(self) -> UplinkPermit:
        if self.permit is None:  # (this base grants the uplink)
            self.permit = UplinkPermit()
            self.queues.clock = self.permit.clock  # (a packet ages in our grants)
        return self.permit

    def _remember(self, granted: bool) -> None:
        """The marker written at the first grant, removed when a remembered base grants no
        more (a failure to write it costs a restart's free sending, nothing else)."""
        marker = self.granted_marker
        if marker is None or marker.exists() == granted:
            return
        with contextlib.suppress(OSError):
            if granted:  # (O_NOFOLLOW: not through a link planted at its fixed name)
                os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            else:
                marker.unlink()

    def uplink(self, now: float) -> None:
        """7. uplink: a base grants the next mobile when it is due (its frames go at once);
        a mobile in its grant with nothing to send hands it back."""
        if self.grants is not None:
            q = self.queues
            soon = [i for i, f in enumerate(q.queues) if len(f) and q.backoff_until[i] <= now]
            peers = self.table.peers
            # (a packet to a mobile that stopped answering is not waited for: its daemon
            # killed, it would stop every grant till it was back; the scheduler bounds the
            # wait too)
            self.arriving = {
                i: n for i, n in self.arriving.items() if peers[i].taken < n and not q.failures[i]
            }
            self.grants.downlink_busy = self.listen is not None and self.listen.sending(now)
            index = self.grants.due(now, self.addressed.index, soon, self.arriving)
            if index is not None:
                self.before_grant(index, now)
                self._grant(index, now)
            holder = self.grants.holder
            gone = holder is not None and self.table.peers[holder].taken >= self.granting
            revoked = self.grants.revoke(now) if gone else None
            if revoked is not None:  # (a shorter grant ends a held one)
                peer = self.table.peers[revoked]
                grant = grant_message(REVOKE_S, number=self.grants.number, deaf=self._deaf(now))
                peer.uplink(grant, now)
                self.goes_first(peer)
            renewed = self.grants.renew(now) if gone and revoked is None else None
            if renewed is not None:  # (a held grant's holder holds on)
                self._grant(renewed, now)
        permit = self.permit
        if permit is not None and not permit.grants and not permit.granted(now):
            self.permit, self.queues.clock = None, float  # (remembered, but no grant came)
            self._remember(False)
        self.release(now)

    def _grant(self, index: int, now: float) -> None:
        """The scheduler's running grant, to mobile ``index``, first in its lane."""
        peer = self.table.peers[index]
        g = self.grants
        assert g is not None
        deaf = self._deaf(now)
        g.counters.deaf += deaf  # (of the grants counted: a revoke is not one)
        peer.uplink(grant_message(g.length, g.hold, g.number, deaf), now)
        self.goes_first(peer)
        # (a revoke queued behind it would go first, in lane 1, and the grant it ended come
        # after it: the mobile held a 50-ms grant the base had ended)
        self.granting = peer.gone_at()

    def _deaf(self, now: float) -> bool:
        """Does a grant now say that the base's TX radio does not listen (a base's)?"""
        return self.listen is None or self.listen.deaf(now)

    def waiting(self, now: float) -> bool:
        """A mobile whose base grants the uplink, between its grants (or after its release)?"""
        permit = self.permit
        if permit is None or not permit.granted(now):
            return False
        if permit.released:  # (the frames up to its release go, whenever: fill)
            return self.release_left <= 0
        return now >= permit.until

    def release(self, now: float) -> bool:
        """A mobile in its grant: its release, behind what it has loaded, when it has nothing
        more to send (and does not hold the grant) or its time for loading is up; whether it
        went now."""
        permit = self.permit
        if permit is None or permit.released:
            return False
        peer = self.table.peers[0]
        idle = (
            not peer.frames
            and not len(self.queues)
            and self.acknowledged()
            and not permit.awaits_answer(now, self.queues.pushed_at)
        )
        if not permit.release(now, idle=idle):
            return False
        peer.uplink(release_message(permit.number), now)
        # what goes before the release, and it: the interactive packet's rest in lane 1 and
        # the release behind it, or the release alone
        self.release_left = len(peer.urgent) or len(peer.frames)
        return True

    def goes_first(self, peer: PeerSender) -> None:
        """``peer``'s frames queued last (a grant's) go before the queues' order (ESB's
        TX process; StreamSending's own)."""
        self.first.add(peer)

    def before_grant(self, index: int, now: float) -> None:
        """A base is about to grant mobile ``index`` the uplink (stream mode: what it may lack
        goes again first, StreamSending)."""

    def acknowledged(self) -> bool:
        """Has the peer acknowledged all we sent (stream mode's ARQ; ESB: the chip did)? An
        idle mobile releases its grant only then: a lost frame is sent again in the grant,
        and the release behind it is not held up till the next (StreamSending)."""
        return True

    def uplink_news(self, pair: socket.socket | None, now: float) -> None:
        """What the RX process passed on (receiving.py): a grant for us, a mobile's
        release, a packet heard from a mobile."""
        if pair is None:
            return
        for msg in received(pair):
            self.uplink_message(msg, now)

    def uplink_message(self, msg: Message, now: float) -> None:
        """One message of the RX process's about the uplink (messages.py: a grant heard, an
        answer asked, a release, a mobile heard, its frames came); anything else is ignored."""
        match msg:
            case Say(index, packet) if 0 <= index < len(self.table):
                self.table.peers[index].say(packet, now)  # (agility.py)
                return
            case SwitchAt(tx, rx, at):
                self.owner.schedule(at, Channel(tx, home=True))
                self.owner.other_channel = rx  # (a light packet's channel: aside.py)
                return
        if isinstance(msg, HeardAside | Say | SwitchAt | Sent) or not 0 <= msg.peer < len(
            self.table
        ):
            return
        grants, permit = self.grants, self.permit
        match msg:
            case GrantHeard(_, grant, heard_at) if self.mobile:
                permit = self._permit()
                if not permit.grants:
                    self._remember(True)
                # counted from when the RX process heard it (a grant read late is shorter)
                heard = min(now, heard_at)
                permit.grant(grant.seconds, heard, grant.hold, grant.number, grant.deaf)
            case AnswerAsked(_, at) if permit is not None:
                # (when the RX process delivered it: the answer may have been queued since)
                permit.asked = max(permit.asked, at)
            case Released(index, number) if grants is not None:
                grants.released(index, now, number)
            case Heard(index, sent) if grants is not None:
                grants.heard(index, sent, now)
            case FramesCame(index) if grants is not None:
                grants.frames(index)

    def uplink_stats(self, now: float) -> dict[str, int]:
        """The shared uplink's counters: a base's grants, a mobile's (empty: neither)."""
        if self.grants is not None:
            return asdict(self.grants.counters)
        if self.permit is not None and self.permit.grants:
            permit = self.permit
            return {
                "grants": permit.grants,
                "granted": int(permit.granted(now)),
                "deaf": permit.deaf_grants,
            }
        return {}

    def _poke(self, index: int, packet: bytes, now: float) -> None:
        """A packet for mobile ``index`` that asks for an answer: its answer will want the
        uplink (a base that grants it)."""
        if self.grants is not None and asks_answer(packet):
            # (with more queued the base keeps sending: no answer is heard between its bursts)
            self.grants.poke(index, now, aside=not len(self.queues))
            if len(packet) <= PREEMPT_MAX:  # (it was just loaded: the last of the peer's)
                self.arriving[index] = self.table.peers[index].gone_at()
