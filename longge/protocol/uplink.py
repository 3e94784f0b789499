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
(``uplink_scheduler.UplinkScheduler``); a mobile that handed its grant back having sent
nothing costs the others one round trip and is asked again after 5 ms, doubling to 100 ms,
unless the base sends it a packet that asks for an answer (a ping, a TCP segment: it goes
next, before the busy ones, preferably while the base's radio addresses it anyway: no change
of address); one that answered nothing (out of range, its daemon down, the grant lost) is
asked again after 20 ms, doubling to 1 s, so an absent mobile costs the others almost
nothing. A mobile
(``UplinkPermit``) sends only while it holds a grant, and stops loading packets DRAIN_S
before its end (the frames in its TX FIFO and the release go meanwhile); one that has heard
no grant for FREE_AFTER_S sends freely: a base with one mobile grants nothing, and a mobile's
link does not stop with a base that stopped granting. A mobile restarted waits as long for a
grant when it remembers that its base grants (``UplinkPermit.expect``).

Time is passed in; nothing here reads a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

#: Link-control packets (the first byte 0: never an IP packet; secure.py's floor message is
#: the other kind). Sealed, each is two frames at 32 bytes.
GRANT_MAGIC = b"\x00LGgrant"
RELEASE_MAGIC = b"\x00LGdone"

#: A mobile stops loading packets this long before its grant ends: the <= 3 frames in its TX
#: FIFO and its release's 2 (about 0.45 ms each at 2 Mbit/s with their ACK) go meanwhile.
DRAIN_S = 0.002
#: A mobile that heard no grant for this long sends freely (its base grants nothing: it has
#: one mobile, or it stopped). Longer than uplink_scheduler.SILENT_MAX_S: an absent mobile
#: that comes back hears a grant before it would send freely.
FREE_AFTER_S = 2.5
#: A mobile that was sent a packet asking for an answer (asks_answer) keeps a grant it holds
#: with nothing to send this long, till the answer is queued: the base grants a mobile it
#: sends a ping as the ping goes, and the mobile, granted before the kernel had made the echo
#: reply, handed the grant back at once and its reply waited for a busy mobile's grant to end
#: (37 to 66 ms, one ping in twelve).
ANSWER_S = 0.005
#: The longest grant a mobile takes (a grant's length travels as milliseconds in 2 bytes).
MAX_GRANT_S = 1.0


#: A grant's length field's top bit: the mobile holds the grant for its length even with
#: nothing to send (lengths are at most 1000 ms: the bit is free).
HOLD_BIT = 0x8000
#: The next bit: the base's TX radio has had something to send for a while (a loaded
#: downlink) and does not listen between its bursts: the mobile sends nothing on the
#: downlink's channel till a grant says otherwise, for DEAF_FOR_S at most (its tries there met
#: the base's frames, its grant among them: docs/design.md §1, "A light mobile's packet on
#: the downlink's channel").
DEAF_BIT = 0x4000
#: How long a grant's DEAF_BIT holds without a newer grant (a mobile is granted at least
#: every 0.1 s while it has something to send, uplink_scheduler.IDLE_MAX_S, and the next grant
#: says afresh; with 0.2 s a busy machine's stalls let a try through now and then).
DEAF_FOR_S = 0.5


class Grant(NamedTuple):
    seconds: float
    hold: bool = False  # keep it though idle (the only mobile sending: its packets go at once)
    #: the grant's number (mod 256), which its release names: a release that comes late
    #: (stream mode delivers in order, so behind a lost frame's retransmission) ends no later
    #: grant (it ended the next grant of the same mobile, and the base granted another
    #: mobile while this one still sent: both lost most of their frames)
    number: int = 0
    deaf: bool = False  # the base's TX radio does not listen now (DEAF_BIT)

    def field(self) -> int:
        """The 2 bytes a grant carries: its length in ms, the hold and the deaf bit."""
        ms = max(1, min(round(self.seconds * 1000), round(MAX_GRANT_S * 1000)))
        return ms | (HOLD_BIT if self.hold else 0) | (DEAF_BIT if self.deaf else 0)

    def wire(self) -> bytes:
        """The 3 bytes a grant carries: the field and the number."""
        return self.field().to_bytes(2, "big") + bytes((self.number & 0xFF,))

    @classmethod
    def from_wire(cls, wire: bytes) -> Grant | None:
        if len(wire) != 3:
            return None
        field = int.from_bytes(wire[:2], "big")
        ms = field & ~(HOLD_BIT | DEAF_BIT)
        if not 1 <= ms <= MAX_GRANT_S * 1000:
            return None
        return cls(ms / 1000, bool(field & HOLD_BIT), wire[2], bool(field & DEAF_BIT))


def grant_message(seconds: float, hold: bool = False, number: int = 0, deaf: bool = False) -> bytes:
    """The link-control packet that gives the uplink to its mobile for ``seconds``."""
    return GRANT_MAGIC + Grant(seconds, hold, number, deaf).wire()


def parse_grant(packet: bytes) -> Grant | None:
    """The grant ``packet`` says, or None if it is not a grant (or a wrong one)."""
    if not packet.startswith(GRANT_MAGIC):
        return None
    return Grant.from_wire(packet[len(GRANT_MAGIC) :])


def release_message(number: int) -> bytes:
    """The release of grant ``number``."""
    return RELEASE_MAGIC + bytes((number & 0xFF,))


def parse_release(packet: bytes) -> int | None:
    """The number of the grant ``packet`` releases, or None if it is not a release."""
    if len(packet) != len(RELEASE_MAGIC) + 1 or not packet.startswith(RELEASE_MAGIC):
        return None
    return packet[-1]


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
    #: the queue's clock (``clock``): the time without a grant before the running one, summed,
    #: and when the last grant's loading stopped (its release, or its time up)
    paused: float = 0.0
    stopped: float = math.inf
    number: int = 0  # the running grant's (its release names it)
    deaf: bool = False  # the base said its TX radio does not listen (its last grant's DEAF_BIT)
    deaf_grants: int = 0
    asked: float = -math.inf  # when a packet that asks for an answer was last delivered to us

    def grant(
        self, seconds: float, now: float, hold: bool = False, number: int = 0, deaf: bool = False
    ) -> None:
        self.deaf = deaf
        self.deaf_grants += deaf
        if self.grants:
            self.paused += max(0.0, self._pause_end(now) - self._stop())
        self.stopped = math.inf
        self.number = number
        self.until = now + seconds
        self.last_grant = now
        self.released = False
        self.hold = hold
        self.grants += 1

    def expect(self, now: float) -> None:
        """A mobile that remembers that its base grants the uplink (restarted): it sends
        nothing for FREE_AFTER_S, as after a grant, and its first grant comes within
        uplink_scheduler.SILENT_MAX_S (before, it sent freely till then, into the frames of
        the mobile that held the uplink)."""
        self.last_grant = now

    def base_deaf(self, now: float) -> bool:
        """Did the base say in its last grant, less than DEAF_FOR_S ago, that its TX radio
        does not listen (nothing goes on the downlink's channel)?"""
        return self.deaf and now - self.last_grant < DEAF_FOR_S

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
            self.stopped = now
            return True
        return False

    def awaits_answer(self, now: float, queued_at: float) -> bool:
        """Was a packet that asks for an answer delivered to us less than ANSWER_S ago, and
        nothing queued since (``queued_at``: when a packet was last queued)? Then a grant
        that finds us idle is kept a while for the answer."""
        return queued_at < self.asked and now < self.asked + ANSWER_S

    def _stop(self) -> float:
        """When the last grant's loading stopped: its release, or its time for loading up."""
        return min(self.stopped, self.until - DRAIN_S)

    def _pause_end(self, now: float) -> float:
        """Now, or when the pause became free sending (no grant for FREE_AFTER_S)."""
        return min(now, self.last_grant + FREE_AFTER_S)

    def clock(self, now: float) -> float:
        """The queue's clock: time that passes only while the mobile may load packets (in its
        grants, or sending freely), so a packet's age is measured in the mobile's own air. A
        mobile that shares the uplink with two busy ones waits 120 ms and more for its turn:
        against the wall clock, the queue's 100-ms bound dropped a packet in six (three
        mobiles in stream mode) and each grant found the queue nearly empty. Before its first
        grant, the wall clock."""
        if not self.grants:
            return now
        # (in a grant the running pause is nought: its loading stops after now)
        return now - self.paused - max(0.0, self._pause_end(now) - self._stop())

    def wake_at(self, now: float) -> float | None:
        """When the release is due (an awaited answer's wait ends sooner: protocol/part.py);
        None: no grant running."""
        if self.released or not self.granted(now) or now >= self.until:
            return None
        due = self.until - DRAIN_S
        if now < self.asked + ANSWER_S:
            due = min(due, self.asked + ANSWER_S)
        return due
