"""The shared uplink of a base with several mobiles, sans-IO: the base grants it, one mobile
at a time (docs/design.md §1, "The uplink").

The mobiles send to the base on one channel; two that send at once collide, and ESB's retries
alone recover between a quarter and all of the air, unevenly. So a base with several mobiles
grants the uplink on its downlink (its own channel: a grant costs the uplink only the gap
between two holders):

    base -> mobile i   GRANT (T ms)    mobile i may send for T ms from the moment it hears it
    mobile i -> base   RELEASE         mobile i is done: its time is up, or it has nothing
                                       (more) to send

Both are link-control packets (version 0: never an IP packet), sealed like any other on a
secured link: a grant or a release that is not authentic moves nothing. Every grant ends with
the holder's release, sent after its last frame: the base grants the next mobile when it has
heard it (so the holders never overlap, however late each heard its grant: on a busy machine,
one mobile's grant can reach it milliseconds later than another's), or RELEASE_WAIT_S after
the grant's time if the release was lost. The base grants the mobiles in turn
(``UplinkScheduler``); a mobile that handed its grant back having sent nothing costs the others
one round trip and is asked again after 5 ms, doubling to 100 ms, unless the base sends it a
packet that asks for an answer (a ping, a TCP segment: it goes next, before the busy ones,
preferably while the base's radio addresses it anyway: no change of address); one that
answered nothing (out of range, its daemon down, the grant lost) is asked again after 20 ms,
doubling to 1 s, so an absent mobile costs the others almost nothing. A mobile
(``UplinkPermit``) sends only while it holds a grant, and stops loading packets DRAIN_S
before its end (the frames in its TX FIFO and the release go meanwhile); one that has heard
no grant for FREE_AFTER_S sends freely: a base with one mobile grants nothing, and a mobile's
link does not stop with a base that stopped granting.

Time is passed in; nothing here reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import NamedTuple

#: Link-control packets (the first byte 0: never an IP packet; secure.py's floor message is
#: the other kind). Sealed, each is two frames at 32 bytes.
GRANT_MAGIC = b"\x00LGgrant"
RELEASE_MAGIC = b"\x00LGdone"

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
#: A mobile stops loading packets this long before its grant ends: the <= 3 frames in its TX
#: FIFO and its release's 2 (about 0.45 ms each at 2 Mbit/s with their ACK) go meanwhile.
DRAIN_S = 0.002
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
#: ping, keeps its answers waiting no longer than this for a grant).
ACTIVE_MAX_S = 0.020
ACTIVE_S = 1.0
#: An idle mobile the downlink will address soon (it has packets queued) waits for it, up to
#: this long after it was due: a grant to the mobile the radio addresses costs its two frames;
#: to another, the TX FIFO drained and the address changed twice (a grant to each of three
#: idle mobiles every 100 ms took 6 % of a loaded downlink).
DEFER_MAX_S = 0.100
#: The only mobile that sent lately, while none is busy, holds its grant this long even with
#: nothing to send: its packets go at once instead of waiting for its next grant (one that
#: pings every 50 ms waited 18 ms in the median beside two idle mobiles); the others are
#: asked between its grants, as ever.
HOLD_S = 0.050
#: A held grant is ended early by a grant this short, when the base sent another mobile a
#: packet that asks for an answer.
REVOKE_S = 0.001
#: A mobile that heard no grant for this long sends freely (its base grants nothing: it has
#: one mobile, or it stopped). Longer than SILENT_MAX_S: an absent mobile that comes back
#: hears a grant before it would send freely.
FREE_AFTER_S = 2.5
#: The longest grant a mobile takes (a grant's length travels as milliseconds in 2 bytes).
MAX_GRANT_S = 1.0


#: A grant's length field's top bit: the mobile holds the grant for its length even with
#: nothing to send (lengths are at most 1000 ms: the bit is free).
HOLD_BIT = 0x8000


class Grant(NamedTuple):
    seconds: float
    hold: bool = False  # keep it though idle (the only mobile sending: its packets go at once)

    def field(self) -> int:
        """The 2 bytes a grant carries: its length in ms and the hold bit."""
        ms = max(1, min(round(self.seconds * 1000), round(MAX_GRANT_S * 1000)))
        return ms | (HOLD_BIT if self.hold else 0)

    @classmethod
    def from_field(cls, field: int) -> Grant | None:
        ms = field & ~HOLD_BIT
        if not 1 <= ms <= MAX_GRANT_S * 1000:
            return None
        return cls(ms / 1000, bool(field & HOLD_BIT))


def grant_message(seconds: float, hold: bool = False) -> bytes:
    """The link-control packet that gives the uplink to its mobile for ``seconds``."""
    return GRANT_MAGIC + Grant(seconds, hold).field().to_bytes(2, "big")


def parse_grant(packet: bytes) -> Grant | None:
    """The grant ``packet`` says, or None if it is not a grant (or a wrong one)."""
    if len(packet) != len(GRANT_MAGIC) + 2 or not packet.startswith(GRANT_MAGIC):
        return None
    return Grant.from_field(int.from_bytes(packet[len(GRANT_MAGIC) :], "big"))


def release_message() -> bytes:
    return RELEASE_MAGIC


def is_release(packet: bytes) -> bool:
    return packet == RELEASE_MAGIC


@dataclass
class _Mobile:
    sent: bool = False  # a packet of its (not the release) since its grant began
    released: bool = False
    busy: bool = False  # it sent till the end of its last grant
    poked: bool = False  # the base sent it a packet since its last grant: an answer may wait
    silent: int = 0  # grants in a row it answered nothing to
    idle: int = 0  # grants in a row it handed back having sent nothing
    retry_at: float = -math.inf  # not granted before this (silent or idle)
    last_sent: float = -math.inf  # when a grant of its in which it sent ended
    used: float = 0.0  # how long it held its last grant


@dataclass
class UplinkCounters:
    grants: int = 0
    releases: int = 0  # grants the mobile ended (time up, or nothing more to send)
    silent: int = 0  # grants the mobile answered nothing to


@dataclass
class UplinkScheduler:
    """The base's: which mobile holds the uplink, and when the next one gets it.

    In turn, each for a grant; a mobile that handed its grant back having sent nothing is
    asked again after IDLE_FIRST_S, doubling to IDLE_MAX_S (an idle link is not a storm of
    grants), unless the base sends it a packet meanwhile (``poke``: a ping's answer, a TCP
    ACK will want the uplink): then it is next, before the busy ones (as a sparse flow is in
    the fair queue), so that its answer does not wait for their grants."""

    mobiles: int
    grant_s: float = GRANT_S
    grant_long_s: float = GRANT_LONG_S
    holder: int | None = None
    granted_at: float = -math.inf
    until: float = -math.inf  # when the base stops waiting for the holder's release
    counters: UplinkCounters = field(default_factory=UplinkCounters)
    _state: list[_Mobile] = field(default_factory=list)
    _turn: int = -1
    _soon: frozenset[int] = frozenset()
    _last: int | None = None  # the last holder
    #: the running grant's length, whether it is held, whether it was revoked
    length: float = GRANT_S
    hold: bool = False
    _revoked: bool = False

    def __post_init__(self) -> None:
        self._state = [_Mobile() for _ in range(self.mobiles)]

    def due(self, now: float, prefer: int | None = None, soon: Collection[int] = ()) -> int | None:
        """The mobile to grant the uplink to now (its grant is counted from now: send it at
        once), or None: the holder's grant runs, or every mobile waits. ``prefer``: the
        mobile the base's radio addresses now (a grant to it needs no change of address),
        taken first among the poked ones, and before the turn's if it is idle (not busy) and
        due. ``soon``: mobiles the downlink has packets queued for; one of them that is idle
        (not busy, not poked) waits for the radio to address it, up to DEFER_MAX_S."""
        self._soon = frozenset(i for i in soon if i != prefer)
        if self.holder is not None:
            st = self._state[self.holder]
            if now < self.until and not st.released:
                return None
            self._ended(st, now)
            self.holder = None
        order = [(self._turn + step) % self.mobiles for step in range(1, self.mobiles + 1)]
        idle = [i for i in order if not self._state[i].busy]
        poked = [i for i in idle if self._state[i].poked]
        if prefer in poked:
            poked = [prefer, *(i for i in poked if i != prefer)]
        elif prefer in idle and prefer != self._last:  # (after the poked ones, out of turn)
            poked.append(prefer)
        # the idle ones that are due go before the busy ones (a light flow's packet waits for
        # one busy grant, not a round of them), but not twice in a row; the turn moves on
        # only with the mobile whose turn it was
        ready = [i for i in order if not self._deferred(i, self._state[i], now)]
        ready = [i for i in ready if now >= self._state[i].retry_at]
        rest = [i for i in idle if i not in poked and i != self._last and self._light(i)]
        for i in poked + rest + order:
            st = self._state[i]
            if self._deferred(i, st, now):
                continue
            if now >= st.retry_at:
                self._last = i
                if ready and i == ready[0]:
                    self._turn = i
                self.holder = i
                st.sent = st.released = st.poked = False
                self.granted_at = now
                self.hold = self._holds(i, now)
                self.length = HOLD_S if self.hold else self._length(i, now)
                self._revoked = False
                self.until = now + self.length + RELEASE_WAIT_S
                self.counters.grants += 1
                return i
        return None

    def _length(self, i: int, now: float) -> float:
        """GRANT_S, or GRANT_LONG_S while no other mobile has a light flow (it sent lately
        without being busy) or is poked: fewer handovers between busy ones; PROBE_S to a
        mobile that answered nothing last time (its daemon killed: each of its grants held
        the uplink idle 65 ms)."""
        if self._state[i].silent:
            return PROBE_S
        light = any(
            j != i and (st.poked or (self._light(j) and now - st.last_sent < ACTIVE_S))
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

    def _holds(self, i: int, now: float) -> bool:
        """Does mobile ``i`` hold its grant: it alone sent lately, and none is busy?"""
        return all(
            not st.busy and (j == i) == (now - st.last_sent < ACTIVE_S)
            for j, st in enumerate(self._state)
        )

    def revoke(self, now: float) -> int | None:
        """The holder of a held grant, once another mobile was poked (a ping's answer waits):
        send it a REVOKE_S grant, which ends its own (once)."""
        if self.holder is None or not self.hold or self._revoked:
            return None
        if not any(st.poked for j, st in enumerate(self._state) if j != self.holder):
            return None
        self._revoked = True
        self.until = min(self.until, now + REVOKE_S + RELEASE_WAIT_S)
        return self.holder

    def _deferred(self, i: int, st: _Mobile, now: float) -> bool:
        return (
            i in self._soon
            and not st.busy
            and not st.poked
            and st.retry_at > -math.inf
            and now < st.retry_at + DEFER_MAX_S
        )

    def _ended(self, st: _Mobile, now: float) -> None:
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
        elif st.released:
            st.silent = 0
            # (one that sent lately, a ping every 50 ms, is asked at least every ACTIVE_MAX_S)
            longest = ACTIVE_MAX_S if now - st.last_sent < ACTIVE_S else IDLE_MAX_S
            st.retry_at = now + min(longest, IDLE_FIRST_S * 2**st.idle)
            st.idle += 1
        else:
            self.counters.silent += 1
            st.retry_at = now + min(SILENT_MAX_S, SILENT_FIRST_S * 2**st.silent)
            st.silent += 1

    def heard(self, index: int) -> None:
        """A whole packet of mobile ``index``'s came (not a release): it sent in its grant."""
        if 0 <= index < self.mobiles:
            st = self._state[index]
            st.sent = True
            if st.silent:  # heard outside its grant: it lives, ask it at its next turn
                st.silent, st.retry_at = 0, -math.inf

    def released(self, index: int, now: float) -> None:
        """Mobile ``index`` is done with its grant (its time was up, or it had nothing more
        to send): the next one's turn."""
        if 0 <= index < self.mobiles:
            st = self._state[index]
            if index == self.holder:
                st.released = True
                st.used = now - self.granted_at
                # (handed back early: it has no more; with its time up: it may have more)
                st.busy = (
                    st.sent and not self.hold and now >= self.granted_at + self.length - 2 * DRAIN_S
                )
                self.counters.releases += 1
            if st.silent:
                st.silent, st.retry_at = 0, -math.inf

    def poke(self, index: int) -> None:
        """The base sends mobile ``index`` a packet that asks for an answer (``asks_answer``):
        if it is not silent, it is asked soon."""
        st = self._state[index]
        if not st.silent:
            st.poked = True
            st.idle = 0
            st.retry_at = -math.inf

    def wait_s(self, now: float) -> float:
        """How long until ``due`` may have a mobile to grant (for the loop's sleep)."""
        if self.holder is not None:
            return max(0.0, self.until - now)
        at = (
            st.retry_at + DEFER_MAX_S if self._deferred(i, st, now) else st.retry_at
            for i, st in enumerate(self._state)
        )
        return max(0.0, min(at) - now)


def asks_answer(packet: bytes) -> bool:
    """Does a packet to a mobile ask it for an answer soon: an ICMP echo request (v4 or v6), a
    TCP segment (its ACK)? A UDP datagram does not say (a stream of them asks nothing: the
    mobile is asked in its turn)."""
    version = packet[0] >> 4 if packet else 0
    if version == 4 and len(packet) >= 21:
        proto, at = packet[9], (packet[0] & 0x0F) * 4
        return proto == 6 or (proto == 1 and len(packet) > at and packet[at] == 8)
    if version == 6 and len(packet) >= 41:
        return packet[6] == 6 or (packet[6] == 58 and packet[40] == 128)
    return False


@dataclass
class UplinkPermit:
    """The mobile's: may it send now? Only while it holds a grant, once it has heard one."""

    until: float = -math.inf  # when the grant ends
    last_grant: float = -math.inf
    released: bool = True
    grants: int = 0
    hold: bool = False  # keep it though idle, till its end

    def grant(self, seconds: float, now: float, hold: bool = False) -> None:
        self.until = now + seconds
        self.last_grant = now
        self.released = False
        self.hold = hold
        self.grants += 1

    def granted(self, now: float) -> bool:
        """Does the base grant the uplink (a grant heard within FREE_AFTER_S)?"""
        return now - self.last_grant < FREE_AFTER_S

    def may_load(self, now: float) -> bool:
        """May a packet be taken from the queue and cut into frames now?"""
        return not self.granted(now) or (not self.released and now < self.until - DRAIN_S)

    def may_send(self, now: float) -> bool:
        """May the frames already cut (a packet's rest, the release) go on the air now?"""
        return not self.granted(now) or now < self.until

    def release(self, now: float, idle: bool) -> bool:
        """Should the release go to the base now (once per grant): the mobile is ``idle``
        (nothing to send), or its time for loading is up?"""
        if self.released or not self.granted(now) or now >= self.until:
            return False
        if (idle and not self.hold) or now >= self.until - DRAIN_S:
            self.released = True
            return True
        return False

    def wait_s(self, now: float) -> float | None:
        """How long until the release is due (for the loop's sleep); None: no grant running."""
        if self.released or not self.granted(now) or now >= self.until:
            return None
        return max(0.0, self.until - DRAIN_S - now)
