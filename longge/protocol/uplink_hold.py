"""Held grants, the base's (docs/design.md §1, "Held grants"): the only mobile that sends
keeps its grant though idle, so what it sends goes at once; the grant is renewed before its
end and ended for the others' turns when that costs its holder least. UplinkScheduler's
(protocol/uplink_scheduler.py, which has the turns, the grants' lengths and their ends);
sans-IO, time passed in."""

from __future__ import annotations

import math

from longge.protocol.uplink import DRAIN_S
from longge.protocol.uplink_state import MobileState, UplinkCounters

#: A mobile that sent in a grant within this long sent lately: it may hold (alone), and is
#: asked again sooner than an idle one (uplink_scheduler.ACTIVE_MAX_S).
ACTIVE_S = 1.0
#: The only mobile that sent lately, while none is busy, holds its grant this long even with
#: nothing to send: its packets go at once instead of waiting for its next grant (one that
#: pings every 50 ms waited 18 ms in the median beside two idle mobiles); the others are
#: asked between its grants, as ever.
HOLD_S = 0.050
#: A held grant is renewed (a new grant to its holder, numbered afresh) this long before its
#: end while no other mobile is due: the holder never reaches the end of its grant, where it
#: stops loading DRAIN_S before and the next grant comes 3 to 5 ms after (its release's trip
#: to the base and the grant's back): a ping beside two mobiles loaded on the downlink met
#: that gap, with an idle mobile's probe in it, one time in seven (5-7 ms more). Long beside
#: the grant's trip to the mobile (1-2 ms, more on a busy machine). A holder that sent within
#: the last HOLD_S is renewed though another is due, once in a row: the other's turn comes
#: after the holder's next packet (``_ends_for_turn``), or at the renewed grant's end. (Mobiles
#: loaded on the downlink are due nearly always, their asks waiting for the radio's turns to
#: them: in stream mode no hold was renewed beside them, and a ping every 50 ms met the ends of
#: 50-ms holds in runs, 5-8 ms more each time, one ping in twelve.)
RENEW_BEFORE_S = 0.010
#: A held grant is ended for another mobile's due turn (an idle one asked again) this long
#: after a packet of the holder's came, with nothing queued for it: its next packet is least
#: likely then (a ping's request has come), and its answer has gone down meanwhile (ended at
#: once, the revoke's frames and the next grants went before the answer: 4-7 ms late, one
#: ping in ten).
PROBE_AFTER_S = 0.004
#: Another mobile that sent lately does not keep a mobile from holding once it handed back
#: this many grants in a row having sent nothing (an iperf3 client's control connection at
#: the start of a test: for a second, ACTIVE_S, the pinging mobile held no grant and its pings
#: waited 10-15 ms for its next one).
QUIET_AFTER = 2


class HeldGrants:
    """UplinkScheduler's held grants: who may hold, the renewal, the end for others' turns."""

    _state: list[MobileState]
    holder: int | None
    hold: bool  # (the running grant is held)
    _revoked: bool
    _past_due: bool  # (the running grant was renewed though another mobile was due)
    granted_at: float
    length: float
    counters: UplinkCounters
    _queued: frozenset[int]

    def _start(self, now: float) -> None:
        raise NotImplementedError  # (UplinkScheduler's: the running grant starts now)

    def _deferred(self, i: int, st: MobileState, now: float) -> bool:
        raise NotImplementedError  # (UplinkScheduler's: waits for the radio to address it)

    def _holds(self, i: int, now: float) -> bool:
        """Does mobile ``i`` hold its grant: it alone sends (it sent lately; each other one
        did not, or it handed back its last QUIET_AFTER grants having sent nothing and its
        last packet came before ``i``'s), and none is busy?"""
        st = self._state[i]
        if st.busy or now - st.last_sent >= ACTIVE_S:
            return False
        return all(
            not o.busy
            and (
                now - o.last_sent >= ACTIVE_S
                or (o.idle >= QUIET_AFTER and o.heard_at < st.heard_at)
            )
            for j, o in enumerate(self._state)
            if j != i
        )

    def renew(self, now: float) -> int | None:
        """The holder of a held grant, RENEW_BEFORE_S before its end, if it still holds
        (``_holds``) and no other mobile is due by then, or it sent within HOLD_S and the
        running grant is not such a renewal itself: grant it again from now (send it at
        once). The grant is numbered afresh: a release of the old one that crosses it ends
        nothing (counted stale), and the mobile holds on."""
        i = self.holder
        if i is None or not self.hold or self._revoked:
            return None
        st = self._state[i]
        end = self.granted_at + self.length
        if now < end - RENEW_BEFORE_S or st.released:
            return None
        due = self._due_by(end, now)
        if due and (self._past_due or now - st.heard_at >= HOLD_S):
            return None
        if st.sent:  # (what its grant's end would have noted: ``_ended``)
            st.last_sent = now
        if not self._holds(i, now):
            return None
        st.sent = st.alive = False
        self.length = HOLD_S
        self._start(now)
        self._past_due = due
        self.counters.renewed += 1
        return i

    def _ends_for_turn(self, now: float) -> bool:
        """Is the held grant to end now for another mobile's due turn: its holder sent, a
        packet of its came PROBE_AFTER_S ago, nothing is queued for it, and the grant does
        not end by itself first (its release, at its time up, may be on its way)?"""
        assert self.holder is not None
        held = self._state[self.holder]
        return (
            held.sent
            and now >= held.heard_at + PROBE_AFTER_S
            and now < self.granted_at + self.length - 2 * DRAIN_S
            and self.holder not in self._queued
            and self._due_by(now, now)
        )

    def _due_by(self, t: float, now: float) -> bool:
        """Is a mobile other than the holder due to be granted by ``t`` (poked, or asked
        again: its retry time; not one that waits for the radio to address it)?"""
        return any(
            j != self.holder and st.retry_at <= t and not self._deferred(j, st, now)
            for j, st in enumerate(self._state)
        )

    def _hold_wake(self, now: float) -> float:
        """When the running held grant's renewal, or its end for another's turn, may come
        next (for the loop's sleep; inf: neither)."""
        if self.holder is None or not self.hold or self._revoked:
            return math.inf
        held = self._state[self.holder]
        probe_at = held.heard_at + PROBE_AFTER_S if held.sent else math.inf
        return min(
            (t for t in (self.granted_at + self.length - RENEW_BEFORE_S, probe_at) if now < t),
            default=math.inf,
        )
