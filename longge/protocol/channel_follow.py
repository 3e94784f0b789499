"""A mobile's channels, sans-IO (docs/design.md §6, "A link that moves"): it follows its base's
moves (channel_control.py's MOVE: switch both radios at the moment it says) and its base's
HERE (the channels the base is on: a mobile that missed a move learns its uplink from it),
and finds its base again when it has lost it (the rendezvous).

**The rendezvous**, a rule both ends know. The base says HERE to each mobile every HERE_S,
and every BEACON_S to a mobile it has heard nothing from for LOST_S (for BEACON_FOR_S; a
mobile gone for good does not cost the air for ever): ``here_every``. A mobile that heard
nothing authentic from its base for LOST_S listens in turn on the downlink channels it has
reason to think the base is on, DWELL_S each (longer than HERE_S): where the base's last HERE
said its downlink would go next (a move the mobile missed went there), the channel of the last
move it heard, the channels it was on before (newest first), the link's home (the configured
channels: where a base restarted without its state comes up), the channel it lost the base
on. Then it sweeps every allowed channel, with one of those likely channels again after each
LIKELY_EVERY (the base may reach the announced channel after the mobile looked there), a
sweep SHORT_DWELL_S a channel (longer than two BEACON_S: a base that hears nothing from the
mobile beacons) and the next DWELL_S a channel (a base that still hears the mobile, whose
downlink alone moved, says HERE only every HERE_S), in turn. Its TX radio stays where it was:
the first HERE it hears says where the uplink is. Nobody else's help is needed, and a stranger
cannot steer it: only an authentic packet of its base's ends the search (peer.py takes MOVE
and HERE from opened packets only; in stream mode they come outside the ARQ's window:
arq_frames.py's CHANNEL).

On the testbed, before the beacon and the short sweeps, a mobile that lost its base under the
Wi-Fi that made the base move looked at the announced channel first, left, and found the base
25 s later (the sweep's length at 0.3 s a channel); a mobile restarted without its state, its
base where the link had moved, looked at the base's channel before the base was up and not
again for 50 s.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from longge.protocol.adapt import Decisions
from longge.protocol.channel_control import Here, Move
from longge.protocol.channel_plan import Q_BAD

LOST_S = 0.75
DWELL_S = 0.3
SHORT_DWELL_S = 0.12
LIKELY_EVERY = 4
#: The base's HERE to a mobile: every HERE_S; every BEACON_S to one it has not heard for
#: LOST_S, BEACON_FOR_S long.
HERE_S = 0.25
BEACON_S = 0.05
BEACON_FOR_S = 30.0
#: A mobile reports its sending and its band (channel_control.py's BAND) every REPORT_S, and
#: every REPORT_BAD_S while its uplink may be failing (half of Q_BAD of REPORT_ATTEMPTS
#: attempts or more): the base decides the uplink's moves on them.
REPORT_S = 0.25
REPORT_BAD_S = 0.1
REPORT_ATTEMPTS = 64
#: The channels it was on that it tries again, newest first.
REMEMBERED = 4
TX, RX = "tx", "rx"


def here_every(silent_s: float) -> float:
    """How often the base says HERE to a mobile it has heard nothing from for ``silent_s``."""
    return BEACON_S if LOST_S <= silent_s < LOST_S + BEACON_FOR_S else HERE_S


@dataclass(frozen=True, slots=True)
class Switch:
    """Put ``radio`` ("tx": the uplink's sender; "rx": the downlink's receiver) on
    ``channel`` at ``at`` (the mobile's clock)."""

    radio: str
    channel: int
    at: float


class ChannelFollower:
    """A mobile's channels: ``uplink`` (its TX radio's), ``downlink`` (its RX radio's)."""

    def __init__(
        self,
        home: tuple[int, int],
        allowed: tuple[int, ...],
        now: float,
        current: tuple[int, int] | None = None,
    ) -> None:
        self.home = home
        self.allowed = allowed
        self.uplink, self.downlink = current or home
        self.seq: int | None = None  # the last move applied (None: none heard yet)
        self.last_heard: float | None = None
        self._started = now
        self._was: deque[int] = deque(maxlen=REMEMBERED)
        self._move_down: int | None = None
        self._next_down: int | None = None  # where the base said its downlink would go
        self._search: list[tuple[int, float]] = []  # (channel, dwell) to come
        self._sweeps = 0  # sweeps begun in this search
        self._lost_on = self.downlink  # the channel the base was lost on
        self._searching_since: float | None = None
        self._dwell_until = -math.inf
        self.decisions = Decisions()
        self.moves = 0
        self.searches = 0
        self.found = 0

    # -- what comes in (authentic packets of the base's only) ------------------------------
    def heard(self, now: float) -> list[Switch]:
        """Anything authentic from the base, heard on the downlink channel we listen on."""
        self.last_heard = now
        if self._searching_since is not None:
            self.found += 1
            self.decisions.note(
                now,
                f"found the base on {self.downlink} after {now - self._searching_since:.2f} s",
            )
            self._searching_since, self._search, self._sweeps = None, [], 0
        return []

    def move(self, move: Move, now: float) -> list[Switch]:
        """A MOVE heard: both radios switch at its moment (once per move, however often it
        is repeated)."""
        switches = self.heard(now)
        if move.seq == self.seq:
            return switches
        self.seq = move.seq
        at = now + move.in_s
        self._move_down = move.downlink
        self.moves += 1
        self.decisions.note(
            now,
            f"move {move.seq}: uplink {self.uplink} -> {move.uplink}, downlink "
            f"{self.downlink} -> {move.downlink} in {move.in_s:.3f} s",
        )
        return switches + self._to(move.uplink, move.downlink, at)

    def here(self, here: Here, now: float) -> list[Switch]:
        """A HERE heard (on our downlink channel, so the base is there): our uplink follows
        it at once if it differs (a move we missed)."""
        switches = self.heard(now)
        if self.seq is not None and (here.seq - self.seq) & 0xFF >= 0x80:
            return switches  # (older than the last move we applied: it came late)
        self.seq = here.seq
        self._next_down = here.next
        if here.uplink == self.uplink and here.downlink == self.downlink:
            return switches
        self.decisions.note(now, f"the base is on {here.uplink}/{here.downlink}: following")
        return switches + self._to(here.uplink, here.downlink, now)

    def _to(self, uplink: int, downlink: int, at: float) -> list[Switch]:
        out = []
        if uplink != self.uplink:
            out.append(Switch(TX, uplink, at))
        if downlink != self.downlink:
            if self.downlink not in self._was:
                self._was.appendleft(self.downlink)
            out.append(Switch(RX, downlink, at))
        self.uplink, self.downlink = uplink, downlink
        return out

    # -- the rendezvous -------------------------------------------------------------------------
    def step(self, now: float) -> list[Switch]:
        """The search's next channel, when the base was lost and a dwell ended."""
        since = self.last_heard if self.last_heard is not None else self._started
        if now - since < LOST_S or now < self._dwell_until:
            return []
        if self._searching_since is None:
            self._searching_since = now
            self.searches += 1
            self.decisions.note(now, f"lost the base on {self.downlink}: searching")
            self._lost_on = self.downlink
            self._search = [(c, DWELL_S) for c in self._likely()]
        if not self._search:
            self._search = self._sweep()
        channel, dwell = self._search.pop(0)
        self._dwell_until = now + dwell
        if channel == self.downlink:
            return []
        self.downlink = channel  # (not one it was on: the search's, kept out of ``_was``)
        return [Switch(RX, channel, now)]

    def _likely(self) -> list[int]:
        """Where the base probably is, most likely first."""
        likely: list[int] = []
        for c in [self._next_down, self._move_down, *self._was, self.home[1], self._lost_on]:
            if c is not None and c not in likely and c != self.uplink:
                likely.append(c)
        return likely

    def _sweep(self) -> list[tuple[int, float]]:
        """Every allowed channel once, a likely one again after each LIKELY_EVERY; short dwells
        and long ones, sweep by sweep."""
        dwell = SHORT_DWELL_S if self._sweeps % 2 == 0 else DWELL_S
        self._sweeps += 1
        likely = self._likely()
        rest = [c for c in self.allowed if c != self.uplink and c not in likely]
        order: list[int] = []
        for i, c in enumerate(rest):
            order.append(c)
            if likely and i % LIKELY_EVERY == LIKELY_EVERY - 1:
                order.append(likely[i // LIKELY_EVERY % len(likely)])
        return [(c, dwell) for c in order]

    @property
    def searching(self) -> bool:
        return self._searching_since is not None

    def wake_at(self, now: float) -> float | None:
        since = self.last_heard if self.last_heard is not None else self._started
        if now - since < LOST_S:
            return since + LOST_S
        return max(self._dwell_until, now)

    def stats(self, now: float) -> dict[str, object]:
        return {
            "uplink": self.uplink,
            "downlink": self.downlink,
            "seq": self.seq,
            "moves": self.moves,
            "searching": self.searching,
            "searches": self.searches,
            "found": self.found,
            "recent": self.decisions.listed(now),
        }


class Reporting:
    """When a mobile sends its BAND report, and the counts it carries (its uplink's attempts
    and failed attempts since the last one, and the base's frames it received again)."""

    def __init__(self, now: float) -> None:
        self.attempts = self.failures = self.echoed = 0
        self._last = now
        self.reports = 0

    def sent(self, attempts: int, failures: int) -> None:
        self.attempts += attempts
        self.failures += failures

    def received_again(self, frames: int) -> None:
        """The base's frames our receiver got again (stream mode: their ACKs were lost)."""
        self.echoed += frames

    def _failing(self) -> bool:
        return self.attempts >= REPORT_ATTEMPTS and self.failures >= Q_BAD / 2 * self.attempts

    def wake_at(self, now: float) -> float | None:
        return self._last + (REPORT_BAD_S if self._failing() else REPORT_S)

    def take(self, now: float) -> tuple[int, int, int] | None:
        """The counts to report now (attempts, failures, echoed; from now on counted
        afresh), or None: not yet."""
        if now < (self.wake_at(now) or now):
            return None
        counts = (self.attempts, self.failures, self.echoed)
        self.attempts = self.failures = self.echoed = 0
        self._last = now
        self.reports += 1
        return counts
