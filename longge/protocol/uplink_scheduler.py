"""The base's half of the shared uplink (protocol/uplink.py has the messages and the
mobile's half): which mobile holds the uplink, and when the next one gets it; sans-IO, time
passed in (docs/design.md §1, "The uplink")."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

from longge.protocol.uplink import DRAIN_S
from longge.protocol.uplink_hold import ACTIVE_S, HOLD_S, HeldGrants
from longge.protocol.uplink_state import MobileState, UplinkCounters

#: A grant's length: long beside the gap between two holders (the release's trip to the base
#: and the next grant's to its mobile: 2 to 4 ms), short enough that a quiet mobile waits little
#: for its turn (it goes next once the base has sent it a packet: at most one grant).
GRANT_S = 0.030
#: A grant's length while no other mobile has a light flow: each handover between two busy
#: mobiles leaves the uplink idle 2 to 4 ms (three mobiles with 30-ms grants carried 0.89 of
#: what one does).
GRANT_LONG_S = 0.060
#: A grant to a mobile that answered nothing last time: long enough for its release.
PROBE_S = 0.005
#: A mobile not busy that held its last grant at most this long has a light flow: it goes
#: before the busy ones when due (a ping's echo, a few ACKs: one 1400-byte packet alone takes
#: 25 ms of the uplink).
LIGHT_USE_S = 0.008
#: The base grants the next mobile this long after a grant's time when it heard no release
#: (lost, or the mobile gone).
RELEASE_WAIT_S = 0.005
#: A mobile that answered nothing in its grant is asked again after this, doubling ...
SILENT_FIRST_S = 0.020
#: ... up to this.
SILENT_MAX_S = 1.0
#: A mobile that handed its grant back having sent nothing is asked again after this,
#: doubling ...
IDLE_FIRST_S = 0.005
#: ... up to this (unless the base sends it a packet meanwhile: UplinkScheduler.poke).
IDLE_MAX_S = 0.100
#: ... or this, for a mobile that sent in a grant within the last ACTIVE_S (a light flow, a
#: ping, keeps its answers waiting no longer than this for a grant) ...
ACTIVE_MAX_S = 0.020
#: ... or this while the base's downlink is loaded (``downlink_busy``: its TX radio had
#: something to send for listen_timing.DEAF_AFTER_S; the uplink is idle; the light mobile's packets
#: cannot go on the downlink's channel), for a mobile it has nothing queued for: an ESB
#: mobile's ping beside two mobiles loaded on the downlink, p95 25-28 ms at 20 ms, 17 at 10.
#: (A grant costs the downlink two frames and two changes of address: every loaded mobile
#: asked so, five carried 4 % less; a loaded one is asked as the radio addresses it anyway.)
ACTIVE_MAX_BUSY_DOWN_S = 0.010
#: An idle mobile the downlink will address soon (it has packets queued) waits for it, up to
#: this long after it was due: a grant to the mobile the radio addresses costs its two frames;
#: to another, the TX FIFO drained and the address changed twice (a grant to each of three
#: idle mobiles every 100 ms took 6 % of a loaded downlink).
DEFER_MAX_S = 0.100
#: A held grant is ended early by a grant this short, when the base sent another mobile a
#: packet that asks for an answer.
REVOKE_S = 0.001
#: A busy mobile's grant is ended so too, for a light mobile the base sent such a packet,
#: once it has run this long (its frames on their way: 10 ms kept one ping in three waiting
#: for it) ...
REVOKE_AFTER_S = 0.003
#: ... and this long after the last grant so ended: a ping's answer waits for a handover (2
#: to 4 ms), not for the busy grant's end (15 ms in the mean); a stream of TCP segments to a
#: light mobile, each asking for an answer, costs the busy ones at most one handover more in
#: each REVOKE_GAP_S.
REVOKE_GAP_S = 0.025
#: A base whose TX radio listens for the light mobiles between its bursts (``revoke_busy``
#: False) grants a poked mobile only this long after the poke: its answer comes on the
#: downlink's channel meanwhile (daemon/aside.py), and a grant at once, sent as the mobile
#: began its answer there, met it (the answer went again in the grant: 1.5 ms later).
ANSWER_ASIDE_S = 0.004
#: Nobody is granted while a poked mobile's packet is on its way (``due``'s ``arriving``), for
#: at most this long after the poke: a packet to a mobile whose daemon was killed never goes,
#: and the others' uplink stopped till it was back (0.8 s, a run in three).
ARRIVING_MAX_S = 0.015
#: What was left of a busy grant so ended is granted to it next, once the poked one has had
#: its grant, if it is this long (less is not worth a handover).
OWED_MIN_S = 0.010


@dataclass
class UplinkScheduler(HeldGrants):
    """The base's: which mobile holds the uplink, and when the next one gets it.

    In turn, each for a grant; a mobile that handed its grant back having sent nothing is
    asked again after IDLE_FIRST_S, doubling to IDLE_MAX_S (an idle link is not a storm of
    grants), unless the base sends it a packet meanwhile (``poke``: a ping's answer, a TCP
    ACK will want the uplink): then it is next, before the busy ones (as a sparse flow is in
    the fair queue), so that its answer does not wait for their grants."""

    mobiles: int
    grant_s: float = GRANT_S
    grant_long_s: float = GRANT_LONG_S
    #: a busy grant is ended early for a poked light mobile (False: the base's TX radio
    #: listens for the light mobiles' answers between its bursts, daemon/listening.py, and an
    #: early end would cost the busy ones a handover for nothing)
    revoke_busy: bool = True
    #: the base's downlink is loaded (its TX radio had something to send for a while: set
    #: by the base's TX process): a light mobile is asked every ACTIVE_MAX_BUSY_DOWN_S
    downlink_busy: bool = False
    holder: int | None = None
    granted_at: float = -math.inf
    until: float = -math.inf  # when the base stops waiting for the holder's release
    counters: UplinkCounters = field(default_factory=UplinkCounters)
    _state: list[MobileState] = field(default_factory=list)
    _turn: int = -1
    _soon: frozenset[int] = frozenset()
    _queued: frozenset[int] = frozenset()  # (``soon``, the addressed one included)
    _arriving: frozenset[int] = frozenset()
    _last: int | None = None  # the last holder
    #: the running grant's length, whether it is held, whether it was revoked
    length: float = GRANT_S
    hold: bool = False
    _revoked: bool = False
    _past_due: bool = False
    _revoked_at: float = -math.inf  # when a busy grant was last ended early
    #: the mobile whose busy grant was ended early, and what was left of it: it is granted
    #: that next, once the poked one has had its grant (the early ends, phased with a ping
    #: every 50 ms, fell on one of two busy mobiles, which got half the other's rate; a
    #: longer grant at its next turn was ended early as well)
    _owed: tuple[int, float] | None = None
    number: int = 0  # the running grant's, mod 256 (its release names it)

    def __post_init__(self) -> None:
        self._state = [MobileState() for _ in range(self.mobiles)]

    def due(
        self,
        now: float,
        prefer: int | None = None,
        soon: Collection[int] = (),
        arriving: Collection[int] = (),
    ) -> int | None:
        """The mobile to grant the uplink to now (its grant is counted from now: send it at
        once), or None: the holder's grant runs, or every mobile waits. ``prefer``: the
        mobile the base's radio addresses now (a grant to it needs no change of address),
        taken first among the poked ones, and before the turn's if it is idle (not busy) and
        due. ``soon``: mobiles the downlink has packets queued for; one of them that is idle
        (not busy, not poked) waits for the radio to address it, up to DEFER_MAX_S.
        ``arriving``: poked mobiles whose packet is still on its way: nobody is granted till
        it has gone (the mobile would find nothing to answer yet), or ARRIVING_MAX_S has
        passed since the poke."""
        self._queued = frozenset(soon)
        self._soon = frozenset(i for i in soon if i != prefer)
        self._arriving = frozenset(arriving)
        if self.holder is not None:
            st = self._state[self.holder]
            if now < self.until and not st.released:
                return None
            self._ended(st, now)
            self.holder = None
        order = [(self._turn + step) % self.mobiles for step in range(1, self.mobiles + 1)]
        idle = [i for i in order if not self._state[i].busy]
        poked = [i for i in idle if self._state[i].poked]
        if self._awaited(now):
            return None  # (its packet goes within a few frames' time)
        if prefer in poked:
            poked = [prefer, *(i for i in poked if i != prefer)]
        elif prefer in idle and prefer != self._last:  # (after the poked ones, out of turn)
            poked.append(prefer)
        # the idle ones that are due go before the busy ones (a light flow's packet waits for
        # one busy grant, not a round of them), but not twice in a row; the turn moves on
        # only with the mobile whose turn it was
        ready = [
            i
            for i in order
            if now >= self._state[i].retry_at and not self._deferred(i, self._state[i], now)
        ]
        rest = [i for i in idle if i not in poked and i != self._last and self._light(i)]
        i = next((i for i in poked + rest + ready if i in ready), None)
        if i is None:
            return None
        st = self._state[i]
        self._last = i
        if i == ready[0]:
            self._turn = i
        self.holder = i
        st.sent = st.released = st.poked = st.alive = st.revoke_for = False
        self.hold = self._holds(i, now)
        self.length = HOLD_S if self.hold else self._length(i, now)
        if i not in poked + rest and not self.hold:
            if self._owed is not None and self._owed[0] == i:  # (what was left of its grant)
                self.length = self._owed[1]
            else:  # (in turn: with what was left of grants ended early, nearly done)
                self.length += st.credit
                st.credit = 0.0
            self._owed = None
        self._revoked = False
        self._start(now)
        return i

    def _start(self, now: float) -> None:
        """The running grant (its length set) starts now: the base waits for its release till
        RELEASE_WAIT_S after its end; it is numbered and counted."""
        self.granted_at = now
        self._past_due = False
        self.until = now + self.length + RELEASE_WAIT_S
        self.number = (self.number + 1) % 256
        self.counters.grants += 1

    def _length(self, i: int, now: float) -> float:
        """GRANT_S, or GRANT_LONG_S while no other mobile has a light flow (it sent lately
        without being busy) or is poked: fewer handovers between busy ones; PROBE_S to a
        mobile that answered nothing last time (its daemon killed: each of its grants held
        the uplink idle 65 ms). A silent mobile is no light flow (a busy one whose daemon was
        killed looked like one: the others had 30-ms grants while it was dead)."""
        if self._state[i].silent:
            return PROBE_S
        light = any(
            j != i
            and (st.poked or (self._light(j) and not st.silent and now - st.last_sent < ACTIVE_S))
            for j, st in enumerate(self._state)
        )
        return self.grant_s if light else max(self.grant_s, self.grant_long_s)

    def _light(self, i: int) -> bool:
        """Not busy, and it used little of its last grant: a light flow (a ping, ACKs), not
        a heavy one whose queue ran dry (five mobiles offering 200 kbit/s each: the one that
        emptied its queue in each grant went before the busy ones every time, and got all
        it offered)."""
        st = self._state[i]
        return not st.busy and st.used <= LIGHT_USE_S

    def revoke(self, now: float) -> int | None:
        """The holder of a held grant, once another mobile was poked (a ping's answer waits),
        or of any grant, once a light one was, its grant REVOKE_AFTER_S old and none ended so
        within REVOKE_GAP_S: send it a REVOKE_S grant, which ends its own (once). The poked
        one is granted next (``due``)."""
        if self.holder is None or self._revoked:
            return None
        if self.hold:
            others = (st for j, st in enumerate(self._state) if j != self.holder)
            poked = any(st.poked and now >= st.retry_at for st in others)
            if not (poked or self._ends_for_turn(now)):
                return None  # (a poked one not yet due: ``poke`` without ``revoke_busy``)
        else:
            at = self._busy_revoke_at()
            if at is None or now < at:
                return None
            self._revoked_at = now
            left = self.granted_at + self.length - now
            self._owed = None
            if left >= OWED_MIN_S:
                self._owed = (self.holder, left)
                self._turn = (self.holder - 1) % self.mobiles  # (it is next in turn)
            else:  # (not worth a handover now: added to its next grant)
                self._state[self.holder].credit += left
            # (its release then comes with its time up: it stays busy)
            self.length = min(self.length, now - self.granted_at + REVOKE_S)
        self._revoked = True
        self.counters.revoked += 1
        self.until = min(self.until, now + REVOKE_S + RELEASE_WAIT_S)
        return self.holder

    def _busy_revoke_at(self) -> float | None:
        """When the running busy grant may be ended for a light mobile poked meanwhile (none
        waits: None): REVOKE_AFTER_S into it, REVOKE_GAP_S after the last such end."""
        i = self.holder
        if any(st.revoke_for and not st.busy for j, st in enumerate(self._state) if j != i):
            return max(self.granted_at + REVOKE_AFTER_S, self._revoked_at + REVOKE_GAP_S)
        return None

    def _awaited(self, now: float) -> float | None:
        """Till when a poked mobile's packet on its way (``arriving``) is waited for (None:
        none is)."""
        ends = [
            st.poked_at + ARRIVING_MAX_S
            for i, st in enumerate(self._state)
            if i in self._arriving and st.poked and not st.busy
        ]
        end = max(ends, default=-math.inf)
        return end if now < end else None

    def _deferred(self, i: int, st: MobileState, now: float) -> bool:
        return (
            i in self._soon
            and not st.busy
            and not st.poked
            and st.retry_at > -math.inf
            and now < st.retry_at + DEFER_MAX_S
        )

    def _ended(self, st: MobileState, now: float) -> None:
        if not st.released:
            st.busy = st.sent  # (its release was lost: it sent till the end)
            st.used = self.length if st.sent else 0.0
        if st.sent:
            st.silent = st.idle = 0
            st.retry_at = -math.inf
            st.last_sent = now
        elif st.released and self.hold:  # (it held till the end: it may send any moment)
            st.silent = 0
            st.retry_at = -math.inf
        elif st.released or st.alive:
            # (alive: frames came but no release: behind a frame lost, it comes later)
            st.silent = 0
            # (one that sent lately, a ping every 50 ms, is asked at least every ACTIVE_MAX_S)
            busy_down = self.downlink_busy and self.holder not in self._queued
            active = ACTIVE_MAX_BUSY_DOWN_S if busy_down else ACTIVE_MAX_S
            longest = active if now - st.last_sent < ACTIVE_S else IDLE_MAX_S
            st.retry_at = now + min(longest, IDLE_FIRST_S * 2**st.idle)
            st.idle += 1
        else:  # (a poke meanwhile is forgotten, as one after: ``poke``)
            st.poked = st.revoke_for = False
            self.counters.silent += 1
            st.retry_at = now + min(SILENT_MAX_S, SILENT_FIRST_S * 2**st.silent)
            st.silent += 1

    def heard(self, index: int, sent: bool = True, now: float = -math.inf) -> None:
        """A whole packet of mobile ``index``'s came (not a release): it sent in its grant
        (``sent`` False: a keepalive, or another link-control packet: it lives, but has no
        traffic; counted as sending, two mobiles loaded on the downlink that sent only
        keepalives would keep a third, pinging, from holding its grant)."""
        if 0 <= index < self.mobiles:
            st = self._state[index]
            st.sent = st.sent or sent
            if sent:
                st.heard_at = now
            if st.silent:  # heard outside its grant: it lives, ask it at its next turn
                st.silent, st.retry_at = 0, -math.inf

    def frames(self, index: int) -> None:
        """A frame of mobile ``index``'s came (stream mode, not more often than every 5 ms): it
        lives, though no packet of its completed (a release held up behind a lost frame's
        retransmission: the base took the mobile for silent and asked it again only after
        20 ms, doubling)."""
        if 0 <= index < self.mobiles:
            self._state[index].alive = True

    def released(self, index: int, now: float, number: int | None = None) -> None:
        """Mobile ``index`` is done with its grant ``number`` (its time was up, or it had
        nothing more to send): the next one's turn. A release of an earlier grant (it came
        late) ends none; it says the mobile lives. (``number`` None: the running grant's.)"""
        if 0 <= index < self.mobiles:
            st = self._state[index]
            if number is not None and number != self.number:
                self.counters.stale_releases += 1
            elif index == self.holder:
                st.released = True
                st.used = now - self.granted_at
                # (handed back early: it has no more; with its time up: it may have more, but
                # not from a probe's 5 ms, the time a ping's echo takes: a light mobile judged
                # busy so waited for busy grants' ends; a busy grant ended early stays busy)
                time_up = now >= self.granted_at + self.length - 2 * DRAIN_S
                st.busy = (
                    st.sent
                    and not self.hold
                    and (self._revoked or (time_up and self.length > PROBE_S))
                )
                self.counters.releases += 1
            if st.silent:
                st.silent, st.retry_at = 0, -math.inf

    def poke(self, index: int, now: float = -math.inf, aside: bool = True) -> None:
        """The base sends mobile ``index`` a packet that asks for an answer (``asks_answer``):
        if it is not silent, it is asked soon (without ``revoke_busy``, and ``aside``: the
        base has nothing more queued, ANSWER_ASIDE_S from ``now``: its answer comes on the
        downlink's channel, heard, unless the base was sending). A base with more to send
        hears nothing between its bursts: its poke is served as without the listening radio
        (at once; a busy grant ended for it)."""
        st = self._state[index]
        if not st.silent:
            st.poked = True
            st.poked_at = now
            st.idle = 0
            later = aside and not self.revoke_busy
            st.retry_at = now + ANSWER_ASIDE_S if later else -math.inf
            st.revoke_for = not later

    def wake_at(self, now: float) -> float:
        """When ``due`` may have a mobile to grant (protocol/part.py)."""
        if self.holder is not None:
            until = self.until
            revoke_at = None if self.hold or self._revoked else self._busy_revoke_at()
            if revoke_at is not None:  # (a revoke comes due first)
                until = min(until, revoke_at)
            return min(until, self._hold_wake(now))  # (a held grant's renewal, or its end)
        awaited = self._awaited(now)
        if awaited is not None:  # (its frames' news wakes the loop; this, if none comes)
            return min(now + 0.001, awaited)
        return min(
            st.retry_at + DEFER_MAX_S if self._deferred(i, st, now) else st.retry_at
            for i, st in enumerate(self._state)
        )
