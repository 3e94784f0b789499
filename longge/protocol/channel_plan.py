"""The base's choice of its link's channels, sans-IO (docs/design.md §6, "A link that moves"):
when the uplink's or the downlink's channel is clearly failing, move it (each on its own) to
the quietest channel the band picture knows, at both ends (channel_control.py's MOVE), and
judge the move by what the new channel carries.

The base decides for the whole cell (its RX radio hears every mobile on one uplink channel;
its TX radio speaks to every mobile on one downlink channel). What it learns from:

- each direction's sending: the share q of failed attempts, in the windows the adaptation
  uses (adapt.FailureWindows: 128 attempts, or 0.5 s with 8 at least). The downlink's are
  the base's own (its TX: ESB's ARC counts, stream mode's ARQ fates); the uplink's, what its
  mobiles report (channel_control.py's BAND, added up over the cell). In stream mode a
  frame's ACK comes back on the *other* direction's channel, so the ARQ's fates blame a
  direction for its ACKs lost on the other's (Wi-Fi over the downlink failed the uplink
  too, and a moved uplink was judged "not the channel's": the link stayed under the Wi-Fi).
  What tells them apart is the receiver: a frame it gets again is one whose first copy
  came through (its ACK was lost, or the sender was early). So each direction's failures
  are counted less its frames received again (``acks_apart``): the uplink's as the base's
  receiver counts them between a mobile's reports, the downlink's as each mobile reports
  them (BAND's ``echoed``); the downlink's own counts are held till a report comes to
  take them with (or HOLD_S: a mobile that cannot report does not hide a failing channel);
- the band (band.py): its own RPD readings and its mobiles' levels.

A direction's channel is **failing** when BAD_WINDOWS windows in a row lost Q_BAD of their
attempts or more (a channel losing a tenth of its frames, as every channel of a noisy room
may, is not; Wi-Fi busy half the time takes about 0.6 of them). It is left when Wi-Fi is
heard over it (the power detector, at either end, on the channels beside the link's: a
Wi-Fi network is 22 channels wide; a weak path fails the link without that), both failing
directions at once, to ``Band.best`` (the quietest at both ends, at least half a Wi-Fi
channel from the failing ones where the allowed set has room), if that channel is not busy
itself; the other direction with it if one window of it failed (it has fewer windows when
it carries less). After a move the new channel is **judged** on the median of JUDGE_WINDOWS
windows (not on windows where nothing got through: a mobile that missed the move is not
there yet): the move helped when they lost less than half the old channel's q (or less than
Q_BAD); one that did not
help says the loss is not the channel's (a weak path, a loss every channel has): neither
direction moves again for a wait that doubles from WAIT_S to WAIT_MAX_S (a move that helps
sets it back), so a loss every channel has moves the link a few times in ten minutes at
most, and never back and forth. A channel
left is remembered as failing for LEFT_S.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from longge.protocol.adapt import Decisions, FailureWindows
from longge.protocol.band import APART, SOME, WIFI_HALF_WIDTH, Band

Q_BAD = 0.3
BAD_WINDOWS = 2
JUDGE_WINDOWS = 4
#: A window after a move that lost this much says the peer is not there yet (a mobile that
#: missed the move, searching: channel_follow.py), not how the channel does: not judged on.
#: A channel that carried nothing JUDGE_MAX_S after the move is failing; one with too little
#: traffic to judge by then stays, unjudged (a judgment holds other moves back).
ABSENT_Q = 0.95
JUDGE_MAX_S = 4.0
#: The moment of a move, this long after it is decided: the MOVEs reach every mobile first
#: (each alone in the TX FIFO at ARC 15, or through the ARQ), and each mobile's processes
#: have switched when the base does.
LEAD_S = 0.1
#: A failing channel is left only when Wi-Fi is heard over it: NEAR_BUSY of the link's
#: neighbourhood's readings (band.py's ``near``) in the last CONFIRM_S were busy, at
#: either end (ours: NEAR_READINGS readings at least; the mobile's: its last report). A weak
#: path, or a loss every channel has, fails the link's channels but not their neighbours'
#: power detector: not a reason to move. (An allowed set with no neighbourhood to read:
#: the failing alone decides.)
NEAR_BUSY = 0.1
NEAR_READINGS = 6
CONFIRM_S = 1.0
#: A direction without a window for this long is not known to do well: it moves with a
#: failing one close to it (``step``).
UNKNOWN_AFTER_S = 1.0
#: After a move, neither direction moves again for this long (the windows start afresh).
SETTLE_S = 0.5
WAIT_S = 30.0
WAIT_MAX_S = 320.0
LEFT_S = 30.0
#: Stream mode: the downlink's counts wait at most this long for a mobile's report of the
#: frames it received again; what is reported and not yet used is kept as long.
HOLD_S = 0.5
UPLINK, DOWNLINK = "uplink", "downlink"


@dataclass(frozen=True, slots=True)
class Planned:
    """Both channels of the link from ``at`` on (the base's clock), the move's number, why."""

    seq: int
    uplink: int
    downlink: int
    at: float
    why: str


@dataclass
class _Direction:
    name: str
    on: int  # its channel now
    windows: FailureWindows
    bad: int = 0  # windows in a row that lost Q_BAD or more
    window_at: float = -math.inf  # when its last window ended
    judging: float | None = None  # the q the last move left behind, while it is judged
    judging_since: float = 0.0
    absent: int = 0  # windows after the move where nothing got through
    judged: list[float] = field(default_factory=list)
    moves: int = 0
    helped: int = 0
    not_helped: int = 0


class ChannelPlan:
    """The base's channels (``uplink``, ``downlink``: its RX's and its TX's), moved when one
    fails. ``pinned``: the user fixed them; nothing moves. ``acks_apart``: stream mode (a
    frame's ACK comes back on the other channel: what its receiver got again is not counted
    against a direction)."""

    def __init__(
        self,
        band: Band,
        uplink: int,
        downlink: int,
        now: float,
        pinned: bool = False,
        acks_apart: bool = False,
    ) -> None:
        self.band = band
        self.pinned = pinned
        self.acks_apart = acks_apart
        #: (stream mode) the downlink's counts not yet fed, since when; the frames mobiles
        #: reported received again, not yet taken off its failures, since when
        self._held = (0, 0)
        self._held_since: float | None = None
        self._echoed = 0
        self._echoed_at = -math.inf
        self.seq = 0
        self.pending: Planned | None = None
        self.decisions = Decisions()
        self._dirs = {
            UPLINK: _Direction(UPLINK, uplink, FailureWindows(now)),
            DOWNLINK: _Direction(DOWNLINK, downlink, FailureWindows(now)),
        }
        self._left: dict[int, float] = {}
        self._settled_at = now
        self.wait = WAIT_S
        self.not_before = -math.inf  # (waiting after a move that did not help)
        self._peer_near: tuple[float, float] | None = None  # (share, when reported)
        self.unconfirmed = 0  # turns a failing channel was not left: no Wi-Fi heard near it
        #: where the downlink goes if it moves (HERE says it: a mobile that misses the move
        #: looks there first); chosen again by ``announce``
        self.next_downlink: int | None = None
        self.announce(now)

    @property
    def uplink(self) -> int:
        return self._dirs[UPLINK].on

    @property
    def downlink(self) -> int:
        return self._dirs[DOWNLINK].on

    # -- what comes in --------------------------------------------------------------------------
    def sent(self, direction: str, attempts: int, failures: int, now: float) -> None:
        """A direction's attempts and failed attempts since the last call (the downlink: ours;
        the uplink: a mobile's, ``report`` in stream mode)."""
        if direction == DOWNLINK and self.acks_apart:
            a, f = self._held
            self._held = (a + attempts, f + failures)
            if self._held_since is None:
                self._held_since = now
            if now - self._held_since >= HOLD_S:
                self._feed_downlink(now)
            return
        self._count(self._dirs[direction], attempts, failures, now)

    def report(self, attempts: int, failures: int, echoed: int, again: int, now: float) -> None:
        """A mobile's report: its uplink's attempts and failures, the downlink's frames it
        received again (``echoed``); ``again``: its frames our receiver got again since its
        last report (stream mode: neither is a failure of the frame's own channel)."""
        if not self.acks_apart:
            self._count(self._dirs[UPLINK], attempts, failures, now)
            return
        self._count(self._dirs[UPLINK], attempts, failures - min(failures, again), now)
        self._echoed = self._echoes_kept(now) + echoed
        self._echoed_at = now
        self._feed_downlink(now)

    def _echoes_kept(self, now: float) -> int:
        """The frames reported received again not yet taken off, while not older than HOLD_S."""
        return self._echoed if now - self._echoed_at < HOLD_S else 0

    def _feed_downlink(self, now: float) -> None:
        attempts, failures = self._held
        self._held, self._held_since = (0, 0), None
        self._echoed = self._echoes_kept(now)
        taken = min(failures, self._echoed)
        self._echoed -= taken
        self._count(self._dirs[DOWNLINK], attempts, failures - taken, now)

    def _count(self, d: _Direction, attempts: int, failures: int, now: float) -> None:
        if self.pending is not None or now < self._settled_at:
            return  # (frames on the old channel, or settling: not this channel's)
        q = d.windows.count(attempts, failures, 0, now)
        if q is None:
            return
        d.window_at = now
        window_q = d.windows.window_q or 0.0
        if d.judging is not None:
            if window_q < ABSENT_Q:
                d.judged.append(window_q)
            else:
                d.absent += 1
            if len(d.judged) >= JUDGE_WINDOWS:
                self._judge(d, now)
            return
        d.bad = d.bad + 1 if window_q >= Q_BAD else 0

    def peer_near(self, share: float | None, now: float) -> None:
        """A mobile's report of its neighbourhood's readings (None: it read none)."""
        if share is not None:
            self._peer_near = (share, now)

    def wifi_near(self, now: float) -> bool:
        """Is Wi-Fi heard over the link's channels, at either end (or can nobody tell)?"""
        own = (self.uplink, self.downlink)
        if not self.band.neighbourhood(own):
            return True
        busy, total = self.band.near(own, now - CONFIRM_S)
        if total >= NEAR_READINGS and busy >= NEAR_BUSY * total:
            return True
        peer = self._peer_near
        return peer is not None and now - peer[1] <= CONFIRM_S and peer[0] >= NEAR_BUSY

    def _unjudged(self, d: _Direction, now: float) -> None:
        """JUDGE_MAX_S after a move without the windows to judge it: a channel where nothing
        got through is failing (a dead channel: moved from again); one with too little
        traffic to tell stays, unjudged."""
        if d.absent and not d.judged:
            self.decisions.note(now, f"{d.name} {d.on}: nothing through, failing")
            d.bad = BAD_WINDOWS
            d.not_helped += 1
        else:
            self.decisions.note(now, f"{d.name} {d.on}: too little traffic to judge")
        d.judging, d.judged, d.absent = None, [], 0

    def _judge(self, d: _Direction, now: float) -> None:
        before = d.judging or 0.0
        after = statistics.median(d.judged)  # (a window the peer came back in is not it)
        if after < Q_BAD or after < before / 2:
            d.helped += 1
            self.wait = WAIT_S
            self.decisions.note(now, f"{d.name} {d.on} kept: lost {after:.2f} (was {before:.2f})")
        else:  # (the loss is the path's, not the channel's: neither direction moves a while)
            d.not_helped += 1
            self.not_before = now + self.wait
            self.decisions.note(
                now,
                f"{d.name} {d.on}: lost {after:.2f} (was {before:.2f}), not the channel's:"
                f" no move for {self.wait:.0f} s",
            )
            self.wait = min(self.wait * 2, WAIT_MAX_S)
        d.judging, d.judged, d.bad, d.absent = None, [], 0, 0

    # -- what it decides ------------------------------------------------------------------------
    def step(self, now: float) -> Planned | None:
        """A move to make now (its MOVEs to send; the base switches at ``at``), or None. A move
        decided earlier is ``pending`` until ``done`` says the base switched."""
        for d in self._dirs.values():
            if d.judging is not None and now - d.judging_since >= JUDGE_MAX_S:
                self._unjudged(d, now)
        waiting = now < self.not_before or now < self._settled_at
        if self.pinned or self.pending is not None or waiting:
            return None
        failing = [d for d in self._dirs.values() if d.bad >= BAD_WINDOWS]
        if not failing:
            return None
        # (the other direction goes too once one window of it failed, or when it has no
        # recent window and is within a Wi-Fi network's half width of a failing channel:
        # Wi-Fi over one of the link's channels is likely over the other, a few MHz away,
        # and a direction that carries little has few windows or none)
        failing += [
            d
            for d in self._dirs.values()
            if d not in failing
            and (
                d.bad >= 1
                or (
                    now - d.window_at > UNKNOWN_AFTER_S
                    and any(abs(d.on - f.on) <= WIFI_HALF_WIDTH for f in failing)
                )
            )
        ]
        if not self.wifi_near(now):
            self.unconfirmed += 1
            return None
        self._forget_left(now)
        avoid = sorted({*(d.on for d in failing), *self._left})
        chosen = {d.name: d.on for d in self._dirs.values()}
        moved = []
        for d in sorted(failing, key=lambda d: d.name != DOWNLINK):  # (the downlink first)
            other = chosen[DOWNLINK if d.name == UPLINK else UPLINK]
            to = self._best(d.name, now, avoid, other)
            if to is None:
                d.bad = 0  # (nowhere better now: counted again)
                continue
            chosen[d.name] = to
            avoid.append(to)
            q = d.windows.window_q
            lost = "no window" if q is None else f"lost {q:.2f}"
            moved.append(f"{d.name} {d.on} -> {to} ({lost})")
        if not moved:
            return None
        self.seq = (self.seq + 1) & 0xFF
        self.pending = Planned(
            self.seq, chosen[UPLINK], chosen[DOWNLINK], now + LEAD_S, "; ".join(moved)
        )
        self.decisions.note(now, f"move {self.seq}: {self.pending.why}")
        return self.pending

    def _best(self, name: str, now: float, avoid: list[int], other: int) -> int | None:
        """Where direction ``name`` would go: the downlink to ``next_downlink`` (announced)
        while it is fit; else the band's best, if it is not busy itself."""
        fit = [self.next_downlink] if name == DOWNLINK else []
        for to in [*fit, self.band.best(now, failing=avoid, keep_apart=(other,))]:
            if (
                to is not None
                and to not in avoid
                and abs(to - other) >= APART
                and self.band.score(to, now) < SOME
            ):
                return to
        return None

    def _forget_left(self, now: float) -> None:
        for c, until in list(self._left.items()):
            if until <= now:
                del self._left[c]

    def announce(self, now: float) -> int:
        """The downlink's next channel, for the HERE the base sends now (its current channel
        while no other is fit)."""
        self._forget_left(now)
        avoid = sorted({self.downlink, self.uplink, *self._left})
        self.next_downlink = None
        self.next_downlink = self._best(DOWNLINK, now, avoid, self.uplink)
        return self.downlink if self.next_downlink is None else self.next_downlink

    def done(self, now: float) -> None:
        """The base switched to the pending move's channels (at its moment)."""
        p = self.pending
        if p is None:
            return
        for d, to in ((self._dirs[UPLINK], p.uplink), (self._dirs[DOWNLINK], p.downlink)):
            if to != d.on:
                self._left[d.on] = now + LEFT_S
                d.judging = d.windows.window_q or 0.0
                d.judging_since = now
                d.judged, d.absent = [], 0
                d.moves += 1
                d.on = to
            d.bad = 0
            d.windows = FailureWindows(now)
        self.pending = None
        self._settled_at = now + SETTLE_S

    def wake_at(self, now: float) -> float | None:
        if self.pending is not None:
            return self.pending.at
        return None  # (it decides on what comes in: windows end on counts)

    def stats(self, now: float) -> dict[str, object]:
        return {
            "pinned": self.pinned,
            "uplink": self.uplink,
            "downlink": self.downlink,
            "seq": self.seq,
            "waiting_s": round(max(self.not_before - now, 0.0), 1),
            "unconfirmed": self.unconfirmed,
            "judged": {
                name: {
                    "q": d.windows.window_q,
                    "moves": d.moves,
                    "helped": d.helped,
                    "not_helped": d.not_helped,
                }
                for name, d in self._dirs.items()
            },
            "recent": self.decisions.listed(now),
        }
