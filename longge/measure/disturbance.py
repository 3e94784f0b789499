"""One rule for a measurement the machine spoilt, for tTest, lTest, tune and the experiments.

While it ran, the hypervisor took more than STEAL_LIMIT of all CPU time (``measure/cpu.py``),
or the emulated air stood still (its own stalls and the holds for a host that had not read)
more than FROZEN_LIMIT of it (``measure/emulator.py``): then it reads like a different link,
and it is measured again, within a budget. ``unspoilt`` does that for any measurement; what
still could not be made clean is kept with its disturbance, so the report can say so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from longge.measure.cpu import STEAL_LIMIT, StealMeter
from longge.measure.emulator import AirMeter, spoilt_reason

T = TypeVar("T")


@dataclass(frozen=True)
class Disturbance:
    """What disturbed one measurement of ``seconds``."""

    steal: float  # share of all CPU time the hypervisor took
    freezes: int  # times the emulated air stood still (0 on a real link)
    frozen_ms: float
    seconds: float

    @property
    def reason(self) -> str | None:
        """Why the measurement cannot be trusted, or None."""
        return spoilt_reason(self.steal, STEAL_LIMIT, self.frozen_ms, self.seconds)


class Watch:
    """Meters started now; ``end()`` says what disturbed the time since."""

    def __init__(self, air: str | None, meter: Callable[[], StealMeter] = StealMeter) -> None:
        self._steal = meter()
        self._air = AirMeter(air)
        self._t0 = time.monotonic()

    def end(self, seconds: float | None = None) -> Disturbance:
        """``seconds``: the span the limits apply to (a trial's length), else the time since."""
        frozen = self._air.delta()
        return Disturbance(
            steal=self._steal.share(),
            freezes=int(frozen.get("freezes", 0)),
            frozen_ms=float(frozen.get("frozen_ms", 0.0)),
            seconds=time.monotonic() - self._t0 if seconds is None else seconds,
        )


def unspoilt(
    measure: Callable[[], T],
    repeats: int = 1,
    between: Callable[[], None] | None = None,
    air: str | None = None,
    meter: Callable[[], StealMeter] = StealMeter,
    seconds: float | None = None,
    judge: Callable[[T, Disturbance], str | None] = lambda _, d: d.reason,
    on_spoilt: Callable[[T, Disturbance, str], None] | None = None,
) -> tuple[T, Disturbance, int]:
    """``measure()``, done again (at most ``repeats`` times, ``between()`` before each) while
    ``judge`` finds it spoilt (by default: the disturbance's reason); each spoilt result goes to
    ``on_spoilt`` with the reason before it is done again. Returns (the last result, what
    disturbed it, repeats made)."""
    done = 0
    while True:
        watch = Watch(air, meter)
        result = measure()
        disturbance = watch.end(seconds)
        why = judge(result, disturbance)
        if why is None or done >= repeats:
            return result, disturbance, done
        if on_spoilt is not None:
            on_spoilt(result, disturbance, why)
        done += 1
        if between is not None:
            between()
