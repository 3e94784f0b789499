"""The shape a radio process's parts share (docs/design.md §1, "Parts and when they wake"):
each part (the shared uplink's grants and permit, the queues' backoffs, the adaptation, the
listening and sending on the downlink's channel, the ARQs' timers, the radio's owner) says
when it next needs a turn, as a moment on the clock the pump passes in; the pump sleeps
until the soonest (``wake_in``), or until an event (a frame, a packet, a message) comes.

No part merges another's timeouts: a part that needs no turn says None.

A part that decides what the radio process does (``Deciding``) has one shape more: each turn
``step`` takes what it is told as one value (its turn: what the config, the chip and the
process say, and the time) and returns what to do, in order (chip settings as values:
actions.py; an ESB adaptation's link-control packets to load); between turns it is asked
``wake_at`` and its ``stats``. The adaptation (adapt_esb.py, adapt_stream.py), the RX rate
(rate_listening.py) and a base's listening (listen_timing.py) are such parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

#: A part's counters and state as the status reports them: names to numbers, words, or a
#: nested report of the same shape (a rate's trials, a power's steps).
Stats = Mapping[str, object]

In = TypeVar("In", contravariant=True)
Out = TypeVar("Out", covariant=True)


class Part(Protocol):
    def wake_at(self, now: float) -> float | None:
        """When this part next needs a turn (the clock ``now`` is on; at or before ``now``:
        at once), or None: only when something comes."""
        ...


class Deciding(Part, Protocol[In, Out]):
    def step(self, turn: In, now: float) -> Sequence[Out]:
        """This turn's decisions, in order, on what ``turn`` says."""
        ...

    def stats(self, now: float) -> Stats | None:
        """Its counters and state, for the process's status (None: nothing to report, a part
        that does not run on this node)."""
        ...


def wake_in(now: float, longest: float, parts: Iterable[Part | None], at: float | None) -> float:
    """How long the pump may sleep: until the soonest of ``at`` (the mode's own moment) and
    the ``parts``' (None: a part this process does not run), ``longest`` at most."""
    soonest = now + longest if at is None or at > now + longest else at
    for part in parts:
        if part is not None:
            due = part.wake_at(now)
            if due is not None and due < soonest:
                soonest = due
    return soonest - now if soonest > now else 0.0
