"""The shape a radio process's parts share (docs/design.md §1, "Parts and when they wake"):
each part (the shared uplink's grants and permit, the queues' backoffs, the adaptation, the
listening and sending on the downlink's channel, the ARQs' timers, the radio's owner) says
when it next needs a turn, as a moment on the clock the pump passes in; the pump sleeps
until the soonest (``wake_in``), or until an event (a frame, a packet, a message) comes.

No part merges another's timeouts: a part that needs no turn says None."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class Part(Protocol):
    def wake_at(self, now: float) -> float | None:
        """When this part next needs a turn (the clock ``now`` is on; at or before ``now``:
        at once), or None: only when something comes."""
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
