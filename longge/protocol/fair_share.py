"""Who is below their fair share of a link, sans-IO (docs/design.md §1, "Interactive at any
rate"): the one notion of "interactive" for the queue (daemon/fairqueue.py) and, next, for the
shared uplink's light mobiles.

``FairShare`` keeps each key's rate (a flow's, a mobile's): the bytes it asked to send,
averaged (exponentially) over RATE_TAU_S, a young key's over its age (``key_rate``), and the
link's drain rate, measured only while something waited (``departed``: what the link carries,
whatever its mode, rate or channel). A key's fair share is the water level: the rate that,
given to every key that asks for more and each smaller key its own, adds up to the drain rate
(so a one-packet DNS flow shrinks nobody's share; keys that ask for less in all leave the
level at the largest one's rate, so the largest is never below it). ``below`` answers with
the key's rate under BELOW_SHARE of the level, made again every ACTIVE_S / 4 from the keys
heard in the last ACTIVE_S, and at once when a new key comes (it reads as asking for more
than any). Time is passed in; nothing here reads a clock.
"""

from __future__ import annotations

import math

#: A key's rate: the bytes it asked to send, averaged (exponentially) over this long; the
#: link's drain rate likewise. (A flow sending 1200 bytes every 100 ms is 12 kB/s give or
#: take 1.2.)
RATE_TAU_S = 1.0
#: Keys heard this recently share the link in the fair share.
ACTIVE_S = 2.0
#: A key is below its share under this part of it: a bulk flow beside others is at its share
#: or above (what the interactive ones leave it), so a margin keeps it out.
BELOW_SHARE = 0.9
#: A new key makes the level again at once (it reads as asking for more than any: the others'
#: share falls), at most this often (a flood of new keys does not sort the table each time).
RESWEEP_S = 0.05
#: The drain rate is known once something has waited this long in all (within RATE_TAU_S).
DRAIN_KNOWN_S = 0.05


def key_rate(rate: list[float], now: float) -> float:
    """A key's rate (bytes a second) as of ``now`` from its ``[average, when, first seen]``:
    the average decayed to now, over the part of RATE_TAU_S the key has been seen (a young
    key's bytes over its age, so its first packets read as fast, not slow: infinite at its
    first, which so is never below its share; ever new flows, a new port each packet, earn
    nothing)."""
    average, at, first = rate
    seen = 1.0 - math.exp(-(now - first) / RATE_TAU_S)
    if seen <= 0.0:
        return math.inf
    return average * math.exp(-(now - at) / RATE_TAU_S) / seen


def water_level(rates: list[float], drain: float) -> float:
    """The max-min fair level of ``drain`` over keys asking ``rates`` (sorted, ascending):
    the largest rate if they ask for less in all."""
    level = rates[-1] if rates else drain
    left, n = drain, len(rates)
    for r in rates:
        if r >= left / n:
            return left / n  # (this key and every larger one: the water's level)
        left, n = left - r, n - 1
    return level


class FairShare:
    def __init__(self, most_keys: int) -> None:
        """``most_keys``: at most so many keys are tracked (a flood of new ones: none is
        below its share)."""
        self.most_keys = most_keys
        #: each key's rate: key -> [bytes a second as of its last ask, when, first seen]
        #: (key_rate); keys not heard for ACTIVE_S go at the next sweep
        self.rates: dict[bytes, list[float]] = {}
        self.level = 0.0  # the fair share (bytes a second) as of the last sweep
        self._sweep_at = float("-inf")
        self._swept = float("-inf")
        #: the drain rate's sums (bytes, seconds while something waited) and the last departure
        self._out_bytes = 0.0
        self._out_time = 0.0
        self._out_at: float | None = None
        self._out_waiting = False
        self._pending = 0  # (bytes that left at _out_at)

    @property
    def drain_rate(self) -> float | None:
        """What the link carried (bytes a second) while something waited, averaged over
        RATE_TAU_S; None until something has waited DRAIN_KNOWN_S in all."""
        return self._out_bytes / self._out_time if self._out_time >= DRAIN_KNOWN_S else None

    def asked(self, key: bytes, size: int, now: float) -> bool:
        """``key`` asks to send ``size`` bytes: is it, with them, below BELOW_SHARE of its
        fair share?"""
        if now >= self._sweep_at:
            self._sweep(now)
        rate = self.rates.get(key)
        if rate is None:
            if len(self.rates) >= self.most_keys:
                return False  # (a flood of new keys: none tracked, none below)
            rate = self.rates[key] = [0.0, now, now]
            # (a new key reads as asking for more than any: the level falls, at once or soon)
            if now - self._swept >= RESWEEP_S:
                self._sweep(now)
            else:
                self._sweep_at = min(self._sweep_at, self._swept + RESWEEP_S)
        rate[0] = rate[0] * math.exp(-max(0.0, now - rate[1]) / RATE_TAU_S) + size / RATE_TAU_S
        rate[1] = now
        return self.level > 0 and key_rate(rate, now) < BELOW_SHARE * self.level

    def rate(self, key: bytes) -> float:
        """The key's average as of its last ask (0: not tracked)."""
        rate = self.rates.get(key)
        return 0.0 if rate is None else rate[0]

    def departed(self, size: int, now: float, waiting: bool) -> None:
        """``size`` bytes left the queue now, ``waiting``: more are queued after them. The drain
        rate counts the time since the last departure, with the bytes that left then (several
        at one moment together), if something waited then (the link was busy all that time)."""
        if self._out_at is None or now > self._out_at:
            if self._out_at is not None and self._out_waiting:
                decay = math.exp(-(now - self._out_at) / RATE_TAU_S)
                self._out_bytes = self._out_bytes * decay + self._pending
                self._out_time = self._out_time * decay + (now - self._out_at)
            self._pending = 0
        self._pending += size
        self._out_at = now
        self._out_waiting = waiting

    def _sweep(self, now: float) -> None:
        """Keys not heard for ACTIVE_S forgotten; the level made again from the rest's rates,
        each as of its last ask (a key of big packets far apart reads low between them)
        (every ACTIVE_S / 4; 0 while the drain rate is not known)."""
        self._sweep_at, self._swept = now + ACTIVE_S / 4, now
        self.rates = {k: r for k, r in self.rates.items() if now - r[1] <= ACTIVE_S}
        drain = self.drain_rate
        if drain is None:
            self.level = 0.0  # (nothing has waited yet)
            return
        self.level = water_level(sorted(key_rate(r, r[1]) for r in self.rates.values()), drain)
