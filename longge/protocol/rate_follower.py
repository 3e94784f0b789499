"""The receiver's side of a rate agreement (protocol/rate.py has the sender's choice, the
messages and the timers): the rate the RX radio listens at, as its sender announced it (a
trial goes back by itself unless kept), and what it does when the sender goes quiet (the
robust rate; from there, now and then, the configured one)."""

from __future__ import annotations

from longge.protocol.rate import (
    FALLBACK_S,
    ROBUST_RATE,
    SCAN_S,
    STARTUP_S,
    STREAM_TRIAL_S,
    TRIAL_S,
    RateMove,
)


class RateFollower:
    """The receiver's side: the rate its sender announced (back after TRIAL_S unless kept),
    and the fallback when the sender has gone quiet (it switched without us, or the channel
    took it)."""

    def __init__(self, rate: str, now: float, stream: bool = False) -> None:
        self.rate = rate
        self.configured = rate
        #: stream mode: a trial lasts while the sender is heard (STREAM_TRIAL_S without: ends)
        self.stream = stream
        self.stale_keeps = 0  # keeps of a trial already over: ignored
        self.why = "configured"
        self.at = now
        self.started = now
        self.heard = 0
        self.fallbacks = 0
        self.scans = 0  # to the configured rate after SCAN_S at the robust one, unheard
        self.trial_back: tuple[str, float] | None = None  # (rate, when)

    def announced(self, move: RateMove, now: float) -> bool:
        """An authentic announcement: switch? (False: already there, or a stale keep)."""
        self.heard += 1
        rate, trial = move.rate, move.trial
        if move.keep and (self.trial_back is None or rate != self.rate):
            self.stale_keeps += 1  # (its trial ended here: the sender finds out, goes back)
            return False
        if trial and rate != self.rate:
            quiet = STREAM_TRIAL_S[rate] if self.stream else TRIAL_S
            self.trial_back = (self.rate, now + quiet)
        elif not trial:
            self.trial_back = None  # (kept, or a plain move)
        if rate == self.rate:
            return False
        self.rate, self.at = rate, now
        self.why = "announced by the sender" + (" (on trial)" if trial else "")
        return True

    def tick(self, last_heard: float | None, now: float) -> bool:
        """A trial not kept ends; nothing heard for FALLBACK_S: the robust rate. Switch?"""
        if self.trial_back is not None and self.stream and last_heard is not None:
            back, ends = self.trial_back  # (stream mode: while the sender is heard)
            self.trial_back = (back, max(ends, last_heard + STREAM_TRIAL_S[self.rate]))
        if self.trial_back is not None and now >= self.trial_back[1]:
            self.rate, self.at, self.why = self.trial_back[0], now, "trial not kept: back"
            self.trial_back = None
            return True
        if last_heard is None:
            since = max(self.at, self.started + STARTUP_S - FALLBACK_S)
        else:
            since = max(last_heard, self.at)
        if self.rate == ROBUST_RATE:
            if self.configured == ROBUST_RATE or now - since < SCAN_S:
                return False
            self.rate, self.at = self.configured, now  # (the sender may be there: SCAN_S)
            self.why = f"nothing heard at {ROBUST_RATE} for {SCAN_S:g} s: the configured rate"
            self.scans += 1
            return True
        if now - since < FALLBACK_S:
            return False
        self.rate, self.why, self.at = ROBUST_RATE, f"nothing heard for {FALLBACK_S:g} s", now
        self.trial_back = None
        self.fallbacks += 1
        return True

    def stats(self, now: float) -> dict[str, object]:
        return {
            "rate": self.rate,
            "why": self.why,
            "since_s": round(now - self.at, 3),
            "on_trial": self.trial_back is not None,
            "announcements": self.heard,
            "stale_keeps": self.stale_keeps,
            "fallbacks": self.fallbacks,
            "scans": self.scans,
        }
