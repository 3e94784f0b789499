"""When a base's TX radio listens on the downlink's channel between its bursts, and how long it
holds for a packet heard in part, sans-IO (docs/design.md §1, "A light mobile's packet on the
downlink's channel"; daemon/listening.py reads the radio and hands on what it heard).

A part (part.py): each turn ``step`` is told whether there is something to send
(``ListenTurn``), and returns the chip's role to set, if it changes (actions.py: ``Listen``,
or ``Transmit`` back to the addressed peer); ``heard`` is told each frame heard;
``wake_at`` says when it is time to listen, or to stop holding; ``deaf`` is what the base's
grants say (uplink.DEAF_BIT).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import NamedTuple

from longge.protocol.actions import Listen, Transmit
from longge.protocol.arq_frames import CONTROL
from longge.protocol.frame import LAST
from longge.protocol.part import Deciding

#: The base's TX radio listens once it has had nothing to send this long (not between the
#: frames of a burst; at 1 ms a mobile's answer to a grant the base had just sent met the
#: radio not yet listening, one aside frame in three).
LISTEN_AFTER_S = 0.0003
#: Having heard a frame of a packet whose last frame has not come, the base's TX radio stays
#: listening this long for the next (they come ~0.5 ms apart: the mobile's FIFO's next, or
#: the next it loads on the news) before it sends what it has: its own frames would collide
#: with the rest, and the mobile would send the packet again.
HOLD_S = 0.0015
#: Holding is bounded: at most HOLD_MAX_S in a row (a packet's six frames take ~3 ms), then
#: none for HOLD_GAP_S. Its frames are not authenticated here (the RX process does that, at
#: the packet's end), and anyone's radio can send frames with a mobile's address: a frame
#: that never ends its packet, every 1.5 ms, would have held the base's downlink for good.
HOLD_MAX_S = 0.004
HOLD_GAP_S = 0.050
#: The base's TX radio that has had something to send this long, without a pause to listen
#: (a loaded downlink), says so in its grants (uplink.DEAF_BIT): the mobiles' tries there met
#: its frames, their grants among them (stream mode beside a loaded downlink: a ping from the
#: base p95 21-26 ms against 10-15 without the tries). Longer than its bursts between
#: listening under uplink load (its ACKs to a busy mobile: < 1 ms).
DEAF_AFTER_S = 0.010
#: Stream mode's base: its TX radio listens once its FIFO has drained: it sends an ACK to a
#: busy mobile every ~1.5 ms, and at LISTEN_AFTER_S (and the loop turn after it) it was
#: deaf a third of the time.
STREAM_LISTEN_AFTER_S = 0.0


@dataclass
class ListenCounters:
    """A base's: times its TX radio listened, frames it heard and handed on, those the pair
    refused (the RX process was behind), holds cut at HOLD_MAX_S."""

    listens: int = 0
    frames: int = 0
    pair_full: int = 0
    holds_cut: int = 0


class ListenTurn(NamedTuple):
    """What ``ListenTiming.step`` is told each turn: is there something to send; the address
    to send to (the addressed peer's, as it was); can the radio be slept on (a descriptor:
    else it would be asked every 0.2 ms while listening, not for this); is its TX FIFO empty
    (asked when it is time to listen)."""

    work: bool
    address: bytes
    waitable: bool
    fifo_empty: Callable[[], bool]


NOTHING: tuple[()] = ()


class ListenTiming(Deciding[ListenTurn, Listen | Transmit]):
    """A base's TX radio, between its bursts: when it listens, when it holds, and whether its
    grants say it is deaf."""

    def __init__(self, after_s: float = LISTEN_AFTER_S, arq_byte: bool = False) -> None:
        self.after_s = after_s  # (LISTEN_AFTER_S; stream mode's: STREAM_LISTEN_AFTER_S)
        #: stream mode's frames: the ARQ's byte in front of the LongGe frame, or an ARQ
        #: control frame (an ACK: no packet's part)
        self.arq_byte = arq_byte
        self.listening = False
        self.idle_since: float | None = None
        self.hold_until = 0.0  # (a packet heard in part: HOLD_S)
        self.last_end = -1.0  # (when a packet's last frame was last heard)
        self.hold_since: float | None = None  # (holding in a row since)
        self.part_at = -1.0  # (when a frame that holds was last heard)
        self.no_hold_until = 0.0  # (held HOLD_MAX_S in a row: HOLD_GAP_S)
        self.work_since: float | None = None  # (something to send in every turn since)
        self.unable = False  # (nothing to sleep on while listening: it never listens)
        self.counters = ListenCounters()

    def step(self, turn: ListenTurn, now: float) -> tuple[()] | tuple[Listen | Transmit]:
        """Each loop turn, before loading: with something to send, back to TX mode; idle for
        ``after_s`` with the TX FIFO empty, listen, if the radio can be slept on."""
        if turn.work:
            self.idle_since = None
            if self.work_since is None:
                self.work_since = now
            if self.listening and now >= self.hold_until:
                self.listening = False
                return (Transmit(turn.address),)
        elif self.idle_since is None:
            self.idle_since, self.work_since = now, None
        elif not self.listening and now - self.idle_since >= self.after_s:
            self.unable = not turn.waitable
            if not self.unable and turn.fifo_empty():
                self.listening = True
                self.counters.listens += 1
                return (Listen(),)
        return NOTHING

    def sending(self, now: float) -> bool:
        """Has it had something to send in every turn for DEAF_AFTER_S (a loaded downlink)?"""
        return self.work_since is not None and now - self.work_since >= DEAF_AFTER_S

    def deaf(self, now: float) -> bool:
        """Does the radio not listen now, nor soon: it is ``sending``, or it cannot listen
        (said in the grants: uplink.DEAF_BIT)?"""
        return self.unable or self.sending(now)

    def heard(self, frame: bytes, now: float) -> None:
        """A frame heard: hold for its packet's next, within the bounds."""
        self.counters.frames += 1
        more = self._more(frame)
        self._hold(more, now)
        if not more:
            self.last_end = now

    def _more(self, frame: bytes) -> bool:
        """Is ``frame`` a part of a packet, not its last?"""
        if self.arq_byte:
            if not frame or frame[0] & CONTROL:
                return False
            frame = frame[1:]
        return bool(frame[:1]) and not frame[0] & LAST

    def _hold(self, more: bool, now: float) -> None:
        """A frame heard: hold for the packet's next (``more``), within the bounds."""
        if not more or now < self.no_hold_until:
            self.hold_until, self.hold_since = 0.0, None
            return
        # A new run of holding begins after a gap of HOLD_S between such frames, not once the
        # hold's end is past: capped at HOLD_MAX_S, that end came while frames kept coming,
        # and a frame heard at it (before the pump's turn that would have sent) began a new
        # run: frames every half millisecond held the downlink for good (found on a fake
        # clock: tests/test_listen_timing.py).
        if self.hold_since is None or now - self.part_at >= HOLD_S:
            self.hold_since = now
        self.part_at = now
        if now - self.hold_since >= HOLD_MAX_S:
            self.hold_until, self.hold_since = 0.0, None
            self.no_hold_until = now + HOLD_GAP_S
            self.counters.holds_cut += 1
            return
        self.hold_until = min(now + HOLD_S, self.hold_since + HOLD_MAX_S)

    def wake_at(self, now: float) -> float | None:
        """When it is time to listen, or to stop holding."""
        if self.listening:
            return None if now >= self.hold_until else self.hold_until
        return None if self.idle_since is None else self.idle_since + self.after_s

    def stats(self, now: float | None = None) -> dict[str, int]:
        return asdict(self.counters)
