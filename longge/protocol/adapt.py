"""Retries chosen live (``adapt = true``, ESB): the sender's ARD and ARC from what its own
frames meet. Sans-IO: the TX process feeds it counts and applies what it returns.

ARD and ARC are the sender's alone (the receiver acknowledges whatever comes), so no
agreement is needed. What it chooses (docs/design.md, "A link that tunes its retries"):

- **ARD**: the shortest the rate allows for an empty ACK (250 µs at 2 and 1 Mbit/s, 500 µs
  at 250 kbit/s, datasheet p. 34): a retry that waits longer only idles the channel. (A burst
  of Wi-Fi outlasts one retry but not sixteen: ARC covers it, not ARD.)
- **ARC**: the smallest count whose residual frame loss, q^(ARC+1) with q the measured share
  of failed attempts, keeps a 1400-byte datagram (about 50 frames) lost with at most 1 in
  20 000 (q^(ARC+1) ≤ 1e-6: losses on a real channel cluster more than independent draws
  say), never below ``ARC_FLOOR``. A retry costs nothing on a frame that
  gets through, so the count only matters when frames fail; a low count then loses packets, a
  high one only costs a peer that is gone its MAX_RT time (backed off anyway). A MAX_RT while
  the count is below 15 raises it to 15 at once ("frames exhausted their retries"); it comes
  down one step per quiet window, never below what q asks for with a margin (q × 1.5: a q
  measured near a boundary would flip the count back and forth).

q is measured in windows of at least ``WINDOW_ATTEMPTS`` attempts (or ``WINDOW_S`` with at
least a few): attempts = frames loaded + retransmissions (the chips' ARC_CNT), failures =
retransmissions + MAX_RT; an exponentially weighted mean (weight ``EWMA``) carries q across
windows.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from longge.chip.datasheet import ARC_MAX, MIN_ARD_US_FOR_EMPTY_ACK

#: The residual loss per frame the count aims at (a 50-frame datagram: 1 in 20 000 lost).
TARGET_RESIDUAL = 1e-6
#: The count comes down only as far as q times this asks for (hysteresis).
DOWN_MARGIN = 1.5
#: The count never goes below this (a channel that turns bad costs few frames before a window).
ARC_FLOOR = 3
#: A window ends after this many attempts, or after WINDOW_S with at least MIN_ATTEMPTS.
WINDOW_ATTEMPTS = 128
WINDOW_S = 0.5
MIN_ATTEMPTS = 8
#: Weight of a new window in q's running estimate.
EWMA = 0.5
#: The decisions ``status`` lists (the newest last), each with how long ago it was made.
RECENT = 32


def arc_for(q: float) -> int:
    """The smallest ARC with q^(ARC+1) ≤ TARGET_RESIDUAL (at least ARC_FLOOR, at most 15)."""
    if q <= 0.0:
        return ARC_FLOOR
    if q >= 1.0:
        return ARC_MAX
    n = math.ceil(math.log(TARGET_RESIDUAL) / math.log(q)) - 1
    return max(ARC_FLOOR, min(ARC_MAX, n))


@dataclass(frozen=True)
class Choice:
    """Retries in force, why, and since when (monotonic s)."""

    ard_us: int
    arc: int
    why: str
    at: float


class FailureWindows:
    """The share of failed attempts q, measured in windows of ``window_attempts`` attempts
    (or ``window_s`` with at least MIN_ATTEMPTS; fewer: the window starts again) and carried
    across them as a running mean. The retries' (below) and, in stream mode, the rate's
    (protocol/adapt_stream.py: attempts are the ARQ's frames whose fate it learnt)."""

    def __init__(self, now: float) -> None:
        self.q: float | None = None
        #: the last window's (attempts, failures, MAX_RT)
        self.last_window = (0, 0, 0)
        #: a window ends after this many attempts, or after window_s with MIN_ATTEMPTS
        self.window_attempts = WINDOW_ATTEMPTS
        self.window_s = WINDOW_S
        self.windows = 0
        self._attempts = 0
        self._failures = 0
        self._max_rt = 0
        self._since = now

    def count(self, attempts: int, failures: int, max_rt: int, now: float) -> float | None:
        """Counts since the last call: the running q if a window ended, else None."""
        self._attempts += attempts
        self._failures += failures
        self._max_rt += max_rt
        full = self._attempts >= self.window_attempts
        timed = now - self._since >= self.window_s and self._attempts >= MIN_ATTEMPTS
        if not (full or timed):
            if now - self._since >= self.window_s:  # too little traffic to judge: start again
                self._reset(now)
            return None
        return self._end_window(now)

    @property
    def window_q(self) -> float | None:
        """The last window's own share of failed attempts (the rate's choice reacts to it)."""
        if not self.windows:
            return None
        attempts, failures, _ = self.last_window
        return failures / attempts if attempts else 0.0

    def _end_window(self, now: float) -> float:
        self.last_window = (self._attempts, self._failures, self._max_rt)
        self.windows += 1
        window_q = self.window_q or 0.0
        self.q = window_q if self.q is None else EWMA * window_q + (1 - EWMA) * self.q
        self._reset(now)
        return self.q

    def restart_window(self, now: float, attempts: int, seconds: float) -> None:
        """A new window from now (what came before was at another setting), of ``attempts``
        attempts or ``seconds``."""
        self.window_attempts, self.window_s = attempts, seconds
        self._reset(now)

    def _reset(self, now: float) -> None:
        self._attempts = self._failures = self._max_rt = 0
        self._since = now


class RetryAdapter(FailureWindows):
    """One sender's retries, chosen from its frames' fate."""

    def __init__(self, rate: str, now: float) -> None:
        super().__init__(now)
        self.rate = rate
        self.ard_us = MIN_ARD_US_FOR_EMPTY_ACK[rate]
        # Start robust: the channel is not known yet.
        self.choice = Choice(self.ard_us, ARC_MAX, "start: channel not measured yet", now)
        self.decisions = 0

    def observe(self, loaded: int, retransmissions: int, max_rt: int, now: float) -> Choice | None:
        """Frames loaded, retransmissions and MAX_RT since the last call; a new choice to
        apply, or None."""
        if max_rt and self.choice.arc < ARC_MAX:
            self._attempts += loaded + retransmissions
            self._failures += retransmissions + max_rt
            self._max_rt += max_rt
            self._end_window(now)
            return self._choose(
                ARC_MAX, f"{max_rt} frame(s) exhausted {self.choice.arc} retries", now
            )
        max_rt_seen = self._max_rt + max_rt
        q = self.count(loaded + retransmissions, retransmissions + max_rt, max_rt, now)
        if q is None:
            return None
        want = arc_for(q)
        arc = self.choice.arc
        if want > arc:
            return self._choose(
                want,
                f"failed attempts {q:.3f}: ARC {want} keeps q^(ARC+1) ≤ {TARGET_RESIDUAL:g}",
                now,
            )
        if arc_for(min(1.0, q * DOWN_MARGIN)) < arc and not max_rt_seen:
            return self._choose(arc - 1, f"failed attempts {q:.3f}: ARC {want} would do", now)
        return None

    def _choose(self, arc: int, why: str, now: float) -> Choice:
        self.choice = Choice(self.ard_us, arc, why, now)
        self.decisions += 1
        return self.choice

    def stats(self, now: float) -> dict[str, object]:
        c = self.choice
        return {
            "ard_us": c.ard_us,
            "arc": c.arc,
            "why": c.why,
            "since_s": round(now - c.at, 3),
            "q": None if self.q is None else round(self.q, 4),
            "decisions": self.decisions,
            "windows": self.windows,
        }


class Decisions:
    """An adaptation's last RECENT decisions (the retries', the rate's, the power's), each
    numbered (counted since it started) with when it was made: ``status``'s ``recent``."""

    def __init__(self) -> None:
        self.made = 0
        self.recent: deque[tuple[int, float, str]] = deque(maxlen=RECENT)

    def note(self, now: float, what: str) -> None:
        self.made += 1
        self.recent.append((self.made, now, what))

    def listed(self, now: float) -> list[list[object]]:
        """[number, seconds ago, what] each, oldest first."""
        return [[n, round(now - t, 3), what] for n, t, what in self.recent]
