"""The TX power an adapting link sends at (``adapt = true``, ESB, one peer), sans-IO: less
power where it does as well. The sender's alone: the receiver hears whatever arrives above
its sensitivity and acknowledges at its own power, so nothing is agreed. The configured
``pa_level`` is the ceiling (a regulatory or battery limit is the user's to set); the level
only goes below it. docs/design.md §5, "The power".

- **Reference**: the share of failed attempts at the ceiling, over REF_ATTEMPTS attempts at
  least (a level that worked as well since counts too: power only ever helps a frame).
- **A step down** (one level, −6 dB), WAIT_S after the last change, goes in two stages. First
  probes while the data waits (PROBE_ATTEMPTS attempts, as a rate's trial): a step into the
  receiver's noise fails most of them and costs no packet. Then data, at ARC 15 (a frame is
  not given up while the step is judged), for JUDGE_ATTEMPTS attempts: kept when its failures
  are within TOLERANCE of the reference (about that share of the goodput), else back up.
  Each failed step doubles the wait (up to MAX_WAIT_S).
- **Back up at once**: a MAX_RT, or a window clearly worse than the reference (more failures
  than it allows by Z standard deviations: a channel that worsened), puts the ceiling back
  before anything else is judged (the rate's choice does not see that window).
- A change of data rate (or a fallback) puts the ceiling back too: a rate is judged at the
  power it is given.
"""

from __future__ import annotations

import math

from longge.chip.datasheet import PA_DBM
from longge.protocol.rate import PROBE_MAX_S

#: Attempts at the ceiling before its share of failures is a reference.
REF_ATTEMPTS = 1024
#: A step's probes: PROBE_ATTEMPTS attempts within PROBE_MAX_S (a rate trial's, rate.py);
#: failed above PROBE_FAIL_Q more than the reference.
PROBE_FAIL_Q = 0.25
#: A step's data: judged on this many attempts; kept within TOLERANCE of the reference (and
#: JUDGE_Z standard deviations of the two shares' difference: chance is not a cost).
JUDGE_ATTEMPTS = 1024
TOLERANCE = 0.02
JUDGE_Z = 2.0
#: A window is clearly worse than the reference beyond Z standard deviations (binomial).
Z = 4.0
#: Settled below the ceiling this long: the ceiling again, its reference measured anew (the
#: channel may have changed slowly; a slow change is no window's news).
REFRESH_S = 30.0
#: The wait before a step down; doubled by each failed step.
WAIT_S = 2.0
MAX_WAIT_S = 32.0


def dbm(level: int) -> int:
    return int(PA_DBM[level])


def _spread(p: float, *attempts: int) -> float:
    """The standard deviation of a share p of failures measured on ``attempts`` (summed
    over independent measurements: a difference's)."""
    p = min(max(p, 0.01), 0.99)
    return math.sqrt(sum(p * (1 - p) / n for n in attempts if n))


def clearly_worse(attempts: int, failures: int, ref: float, ref_attempts: int = 0) -> bool:
    """More failures than ``ref`` (measured on ``ref_attempts``; 0: exact) allows by Z
    standard deviations (and one)."""
    if not attempts:
        return False
    spread = _spread(ref, attempts, ref_attempts)
    return failures > attempts * (ref + Z * spread) + 1


class PowerChooser:
    """One sender's PA level: down a step where it does as well, back up at once where not."""

    def __init__(self, ceiling: int, now: float) -> None:
        self.ceiling = self.level = ceiling
        self.why = "configured"
        self.at = now
        #: None (settled), "probe" (a step's probes go, the data waits), "judge" (its data)
        self.stage: str | None = None
        self.stage_at = self.settled_at = now
        self._ref = [0, 0]  # attempts, failures at the ceiling (or a level kept since)
        self._here = [0, 0]  # the same at the level under judgment / settled below
        self.wait = WAIT_S
        self.next_step = now + WAIT_S
        self.lowered = 0
        self.raised = 0
        self.failed_steps = 0

    def reference(self) -> float | None:
        """The share of failed attempts the level is held to (None: not measured yet)."""
        att, fail = self._ref
        return fail / att if att >= REF_ATTEMPTS else None

    def may_step(self, now: float) -> bool:
        return (
            self.stage is None
            and self.level > 0
            and now >= self.next_step
            and self.reference() is not None
        )

    def probe_deadline(self) -> float | None:
        """While a step's probes go: when they must have been judged (else it failed)."""
        return self.stage_at + 2 * PROBE_MAX_S if self.stage == "probe" else None

    def step_down(self, now: float) -> int:
        """One level down, its probes first (the caller checked ``may_step``)."""
        self.level -= 1
        self.stage, self.stage_at = "probe", now
        self._here = [0, 0]
        self.lowered += 1
        self.why = f"{dbm(self.level)} dBm on trial"
        self.at = now
        return self.level

    def window(self, attempts: int, failures: int, max_rt: int, now: float) -> int | None:
        """A window of the current level's attempts ended: the level to set, or None."""
        ref = self.reference()
        if self.stage == "probe":
            q = failures / attempts if attempts else 1.0
            if max_rt or q > max(PROBE_FAIL_Q, (ref or 0.0) + PROBE_FAIL_Q):
                return self._failed(f"probes at {dbm(self.level)} dBm failed {q:.2f}", now)
            self.stage, self.stage_at = "judge", now
            return None
        worse = ref is not None and clearly_worse(attempts, failures, ref, self._ref[0])
        if self.stage == "judge":
            assert ref is not None  # (a step comes only once there is one)
            self._here[0] += attempts
            self._here[1] += failures
            att, fail = self._here
            allowed = ref + TOLERANCE + JUDGE_Z * _spread(ref, att, self._ref[0])
            if max_rt or worse or (att >= JUDGE_ATTEMPTS and fail / att > allowed):
                why = "MAX_RT" if max_rt else f"failed {fail / max(att, 1):.3f}"
                return self._failed(f"{dbm(self.level)} dBm {why} (at most {allowed:.3f})", now)
            if att >= JUDGE_ATTEMPTS:  # as well: the same channel, measured twice
                self.stage = None
                self.wait, self.next_step = WAIT_S, now + WAIT_S
                self.why = f"{dbm(self.level)} dBm failed {fail / att:.3f}: does as well"
                self.at = self.settled_at = now
                self._ref = [self._ref[0] + att, self._ref[1] + fail]
            return None
        if self.level == self.ceiling:
            self._ref[0] += attempts
            self._ref[1] += failures
            if self._ref[0] >= 4 * REF_ATTEMPTS:  # (the reference follows the channel)
                self._ref = [self._ref[0] // 2, self._ref[1] // 2]
            return None
        if max_rt or worse:
            why = "MAX_RT" if max_rt else f"{failures} of {attempts} attempts failed"
            return self.to_ceiling(f"{why} at {dbm(self.level)} dBm", now)
        if now - self.settled_at >= REFRESH_S:
            self.wait = WAIT_S
            return self.to_ceiling(f"{REFRESH_S:g} s at {dbm(self.level)} dBm: measured again", now)
        return None

    def max_rt(self, now: float) -> int | None:
        """A frame exhausted its retries: a step on trial failed; a level below the ceiling
        does not do as well (or the channel worsened): the level to set, or None."""
        if self.stage is not None:
            return self._failed(f"MAX_RT at {dbm(self.level)} dBm", now)
        return self.to_ceiling(f"MAX_RT at {dbm(self.level)} dBm", now)

    def to_ceiling(self, why: str, now: float) -> int | None:
        """Back to the ceiling at once (the channel worsened, the rate changed): the level
        to set, or None (there already)."""
        self.stage = None
        self._ref = [0, 0]  # (measured again, at the ceiling)
        self.next_step = now + self.wait
        if self.level == self.ceiling:
            return None
        self.level = self.ceiling
        self.why, self.at = why, now
        self.raised += 1
        return self.level

    def _failed(self, why: str, now: float) -> int:
        self.failed_steps += 1
        self.stage = None
        self.level += 1
        self.why, self.at = why, now
        self.raised += 1
        self.wait = min(MAX_WAIT_S, 2 * self.wait)
        self.next_step = now + self.wait
        return self.level

    def stats(self, now: float) -> dict[str, object]:
        ref = self.reference()
        return {
            "dbm": dbm(self.level),
            "ceiling_dbm": dbm(self.ceiling),
            "why": self.why,
            "since_s": round(now - self.at, 3),
            "stage": self.stage,
            "reference_q": None if ref is None else round(ref, 4),
            "lowered": self.lowered,
            "raised": self.raised,
            "failed_steps": self.failed_steps,
        }
