"""The TX power of an adapting stream-mode link (``adapt = true``, one peer): protocol/power.py's
rules (the configured ``pa_level`` is the ceiling; a step down, −6 dB, first probed, then its
data judged against the ceiling's share of failures; back up at once where it does worse),
judged on the ARQ's fates as the rate is (adapt_stream.py). What differs from ESB
(adapt_esb.py): a step's probes are fillers (rate.filler_message: they ride the ARQ and
the receiver drops them), and a step waits for the ARQ to be empty (its new packets wait), so
that the fates its windows count are of frames sent at the new level. docs/design.md §5,
"The power"."""

from __future__ import annotations

from collections.abc import Callable

from longge.protocol import adapt as a
from longge.protocol import power as pw
from longge.protocol import rate as rt
from longge.protocol.actions import Action, Power
from longge.protocol.arq import ArqSender

#: s: frames on their way and none acknowledged for this long below the ceiling: up at once
#: (ACKs come every few milliseconds while frames go: adapt_stream.py's KEEP_LOST_S)
SILENT_S = 0.1
#: s: no step down this soon after a change of rate (ESB: power.WAIT_S). In stream mode a
#: step's probe holds the new packets back for the ARQ to empty and its fillers' fates to
#: come (a tenth of a second where it fails), and after a change the rate is still being
#: tried: at 71 dB a step 2 s after each switch and the trials' dips together held
#: `experiment adaptive-stream`'s settling to 4.3 s (0.4-1.2 s without the power).
AFTER_RATE_S = 10.0


class StreamPower:
    """One stream sender's PA level; the caller (StreamAdaptation) calls it only between the
    rate's moves (none announced, on trial, or unsure), and puts the ceiling back with every
    change of rate. The levels it sets go to ``emit`` (the adaptation's actions, in order)."""

    def __init__(
        self,
        ceiling: int,
        now: float,
        note: Callable[[float, str], None],
        emit: Callable[[Action], None],
    ) -> None:
        self.chooser = pw.PowerChooser(ceiling, now)
        self._note = note
        self._emit = emit
        self._pending = False  # a step is due: no new packet until the ARQ is empty
        self._set_at = ceiling  # the level last set on the radio

    @property
    def level(self) -> int:
        return self.chooser.level

    def apply(self) -> None:
        """After the config's settings were applied: the level in force again."""
        self._emit(Power(self.chooser.level))
        self._set_at = self.chooser.level

    def holds_data(self) -> bool:
        """No new packet for the ARQ: a step waits for it to empty, or its probes go."""
        return self._pending or self.chooser.probe_deadline() is not None

    def deadline(self) -> float | None:
        return self.chooser.probe_deadline()

    def turn(
        self,
        arq: ArqSender,
        windows: a.FailureWindows,
        fill: Callable[[int], None],
        now: float,
    ) -> bool:
        """No window ended this turn: a step down when its time has come and the ARQ is
        empty (its probes go, PROBE_ATTEMPTS fillers), a step's probes not judged in time
        (failed). True if the level went up (what was sent below finds its fate later)."""
        c = self.chooser
        probed_by = c.probe_deadline()
        if probed_by is not None:
            return now > probed_by and self._set(c.window(0, 0, 0, now), now)
        if self._pending and arq.idle:
            self._pending = False
            self._set(c.step_down(now), now)
            windows.restart_window(now, rt.PROBE_ATTEMPTS, rt.PROBE_MAX_S)
            fill(rt.PROBE_ATTEMPTS)
        elif not self._pending and c.may_step(now):
            self._pending = True
        return False

    def window(self, windows: a.FailureWindows, now: float) -> tuple[bool, bool]:
        """A window ended: the power's first. (Was it the power's: a step's probes or data,
        or a window that put the ceiling back, which the rate does not judge; did the level
        go up?)"""
        c = self.chooser
        stage = c.stage
        level = c.window(*windows.last_window, now)
        if stage == "probe" and c.stage == "judge":  # (the data's windows again)
            windows.restart_window(now, a.WINDOW_ATTEMPTS, a.WINDOW_S)
        up = self._set(level, now)
        return stage is not None or level is not None, up

    def silent(self, now: float) -> bool:
        """Frames on their way and none acknowledged for SILENT_S below the ceiling (stream
        mode's MAX_RT: a level that carries nothing ends no window): up at once."""
        if self.chooser.level == self.chooser.ceiling:
            return False
        self._pending = False
        return self._set(self.chooser.max_rt(now), now)

    def to_ceiling(self, why: str, now: float) -> bool:
        """A change of rate (or a fallback): a rate is judged at the ceiling."""
        self._pending = False
        up = self._set(self.chooser.to_ceiling(why, now), now)
        self.chooser.next_step = max(self.chooser.next_step, now + AFTER_RATE_S)
        return up

    def _set(self, level: int | None, now: float) -> bool:
        """Set ``level`` if there is one; True if it went up."""
        if level is None:
            return False
        up, self._set_at = level > self._set_at, level
        self._emit(Power(level))
        trial = " (trial)" if self.chooser.stage else ""
        self._note(now, f"power {pw.dbm(level)} dBm{trial}")
        return up
