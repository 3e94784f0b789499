"""When a mobile's frames may go on the downlink's channel while it waits for a grant, sans-IO
(docs/design.md §1, "A light mobile's packet on the downlink's channel"; daemon/aside.py loads
them into the TX FIFO and learns their fate; the base's side is listen_timing.py).

Two decisions, each told the time:

- ``Pacing``: ASIDE_BURST frames at once, refilled at ASIDE_RATE a second (the downlink's
  channel is the base's); after a frame refused there (the base was sending: MAX_RT) the next
  try ``retry_s`` later, twice as long after each more in a row, ASIDE_RETRY_MAX_S at most.
  ``next_try`` is when the part next needs its pump (part.py's ``wake_at``).
- ``AckRoute`` (stream mode): whether the mobile's own ACKs to the base go there too. Not while
  the base is sending to it (more than ACKS_BUSY asked for within ACKS_BUSY_S: the base is not
  listening then, and ACKs tried there met its frames), nor after ACKS_REFUSED refusals in a
  row (a base that sends all the time, or does not listen), but at the next try then, to learn
  whether it listens again.
"""

from __future__ import annotations

from collections import deque

#: After a frame the base did not acknowledge there (it was sending), the next try; after
#: each more in a row twice as long, up to ASIDE_RETRY_MAX_S (a base that keeps sending, to
#: the other mobiles, is met once in that time, not every 2 ms).
ASIDE_RETRY_S = 0.002
ASIDE_RETRY_MAX_S = 0.064
#: Stream mode's first try after a refusal (doubling as above): its frames there are few and
#: its ACKs wait for them.
STREAM_RETRY_S = 0.0005
#: Frames a mobile may send there: this many at once, refilled at ASIDE_RATE a second (a ping
#: every 20 ms is 4 frames each: 200 a second; the downlink's channel is the base's).
ASIDE_BURST = 12
ASIDE_RATE = 200.0
#: A mobile asked to send more than ACKS_BUSY ACKs within ACKS_BUSY_S is being sent to
#: (a loaded downlink): the base is not listening, and its ACKs tried there met the base's
#: frames (a loaded downlink lost 3 % so): they go on the uplink's channel. (A receiver
#: sends one every ACK_DELAY, 4 ms, at most: at 4 a mobile among five loaded ones was
#: seldom seen as one, and the downlink to five lost 5 %.)
ACKS_BUSY = 2
ACKS_BUSY_S = 0.020
#: Refusals in a row after which our ACKs go on the uplink's channel again (till a frame
#: there is acknowledged, or at the next try).
ACKS_REFUSED = 3


class Pacing:
    """A mobile's frames on the downlink's channel: a token each, and a pause after refusals."""

    def __init__(self, retry_s: float = ASIDE_RETRY_S) -> None:
        self.retry_s = retry_s
        self.retry_at = float("-inf")
        self.refusals = 0  # in a row
        self.tokens = float(ASIDE_BURST)
        self.filled_at = float("-inf")

    def may(self, now: float) -> bool:
        """May a frame go there now? (The tokens refilled to ``now``.)"""
        if self.filled_at > float("-inf"):
            self.tokens = min(ASIDE_BURST, self.tokens + (now - self.filled_at) * ASIDE_RATE)
        self.filled_at = now
        return now >= self.retry_at and self.tokens >= 1

    def has_token(self) -> bool:
        """One more frame in this turn's burst?"""
        return self.tokens >= 1

    def sent(self) -> None:
        """A frame went there (its token spent)."""
        self.tokens -= 1

    def again_now(self, now: float) -> bool:
        """Would the next frame go there at once (a token, no pause)?"""
        return self.tokens >= 1 and now >= self.retry_at

    def refused(self, now: float) -> None:
        """A frame there was not acknowledged (the base was sending): pause, longer each time
        in a row."""
        wait = self.retry_s * 2 ** min(self.refusals, 10)
        self.refusals += 1
        self.retry_at = now + min(wait, ASIDE_RETRY_MAX_S)  # (meanwhile on the uplink's channel)

    def heard(self) -> None:
        """Frames there were acknowledged: refusals in a row start again from none."""
        self.refusals = 0

    def next_try(self, now: float) -> float | None:
        """When a frame may next go there (None: now)."""
        at = max(self.retry_at, now + (1 - self.tokens) / ASIDE_RATE)  # (the next token)
        return None if at <= now else at


class AckRoute:
    """Stream mode: do the mobile's own ACKs to the base go on the downlink's channel?"""

    def __init__(self) -> None:
        self.came: deque[float] = deque(maxlen=ACKS_BUSY + 1)  # (when ours were asked for)

    def asked(self, now: float) -> None:
        """Our receiver asked for an ACK to the base."""
        self.came.append(now)

    def sent_to(self, now: float) -> bool:
        """Is the base sending to us (more than ACKS_BUSY ACKs asked for in ACKS_BUSY_S)? It
        hears nothing there then."""
        came = self.came
        return len(came) == came.maxlen and now - came[0] < ACKS_BUSY_S

    def here(self, pending: bool, pace: Pacing, now: float) -> bool:
        """With ACKs ``pending``: do they go there now?"""
        if not pending or self.sent_to(now):
            return False
        return pace.refusals < ACKS_REFUSED or now >= pace.retry_at
