"""What a node knows of the 2.4 GHz band around it, sans-IO (docs/design.md §6, "A link that
moves"): each channel's busy share as its own radio's received power detector (RPD) read it,
and as its peer's report said (each end hears what is near it: a Wi-Fi network beside the
base may be out of the mobile's reach).

The RPD says one thing, at one instant: "a carrier above −64 dBm on this channel" (datasheet
§6.4, 170 µs after entering RX). A channel that Wi-Fi takes a share d of the time reads busy
about d of the readings; so a channel's busy share is the share of its readings that were
busy, each reading weighed down with its age (half-life MEMORY_S: a network that left is
forgotten, one that stays is read again). ``Band`` also says which channel to read next
(a sweep, ``next_channel``, with every other reading in the link's neighbourhood: ``near``
tells whether Wi-Fi is over the link's channels), and which channels a move may go to
(``best``): the quietest at both ends, apart from a channel that is failing now (Wi-Fi is
about 22 channels wide: its neighbours are likely taken too, even if they read quiet when
last read).

A peer's picture comes as levels, two bits a channel (``levels``/``parse_levels``): unknown,
quiet, some, busy.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from longge.chip.datasheet import ISM_MAX_CHANNEL

#: Half-life of a reading's weight (s).
MEMORY_S = 20.0
#: A channel is known once its readings weigh this much (fewer: its share is a guess).
KNOWN_WEIGHT = 3.0
#: What an unknown channel counts as (a little worse than a quiet one: a channel read quiet
#: is preferred to one never read).
UNKNOWN_SHARE = 0.1
#: The levels' bounds (a share below QUIET is quiet; below SOME, some; else busy) and the
#: share each level stands for when it comes from the peer.
QUIET, SOME = 0.05, 0.25
UNKNOWN, QUIET_LEVEL, SOME_LEVEL, BUSY_LEVEL = 0, 1, 2, 3
LEVEL_SHARE = {UNKNOWN: UNKNOWN_SHARE, QUIET_LEVEL: 0.0, SOME_LEVEL: 0.15, BUSY_LEVEL: 0.5}
#: A peer's report is believed this long (its levels are its picture at the time).
PEER_S = 5.0
#: Half a Wi-Fi channel's width in nRF channels (1 MHz each; 22 MHz: IEEE 802.11's DSSS
#: mask): a move goes at least this far from a channel failing now, where it can.
WIFI_HALF_WIDTH = 11
#: The two channels of a link (uplink, downlink) at least this far apart (config.py's rule:
#: a 2 Mbit/s signal is 2 MHz wide).
APART = 2
#: Our own frames: a 2 Mbit/s signal is 2 MHz wide, so the power detector hears the link's
#: own frames on its channels and the next ones; the neighbourhood's readings leave them out.
OWN_SPREAD = 2
#: Each channel's last readings kept as they were (for ``near``).
RECENT = 8
#: Every other reading of the sweep is of the link's neighbourhood (``next_channel``).
NEAR_EVERY = 2
#: Channels the levels cover: the ISM band (0..83); channels above are not reported.
LEVEL_CHANNELS = ISM_MAX_CHANNEL + 1
LEVELS_BYTES = (LEVEL_CHANNELS * 2 + 7) // 8


@dataclass
class _Readings:
    busy: float = 0.0  # the busy readings' weight
    weight: float = 0.0  # all readings' weight
    at: float = -math.inf  # when the weights were last brought to date
    read_at: float = -math.inf  # the last reading
    recent: deque[tuple[float, bool]] = field(default_factory=lambda: deque(maxlen=RECENT))

    def decayed(self, now: float) -> tuple[float, float]:
        if self.weight == 0.0:
            return 0.0, 0.0
        f = 0.5 ** ((now - self.at) / MEMORY_S) if now > self.at else 1.0
        return self.busy * f, self.weight * f


class Band:
    """One node's picture of the channels it may use (``allowed``: the user's set)."""

    def __init__(self, allowed: Iterable[int]) -> None:
        self.allowed = tuple(sorted(set(allowed)))
        if not self.allowed:
            raise ValueError("no channel allowed")
        self._mine: dict[int, _Readings] = {c: _Readings() for c in self.allowed}
        self._peer: bytes | None = None
        self._peer_at = -math.inf
        self.readings = 0
        self._sweep = self._near = self._turn = 0

    # -- what comes in --------------------------------------------------------------------------
    def reading(self, channel: int, busy: bool, now: float) -> None:
        """One RPD reading of ours on ``channel`` (one not allowed is not kept)."""
        r = self._mine.get(channel)
        if r is None:
            return
        b, w = r.decayed(now)
        r.busy, r.weight, r.at, r.read_at = b + (1.0 if busy else 0.0), w + 1.0, now, now
        r.recent.append((now, busy))
        self.readings += 1

    def peer_levels(self, levels: bytes, now: float) -> None:
        """The peer's picture (``levels``' bytes), as it reported it at ``now``."""
        if len(levels) == LEVELS_BYTES:
            self._peer, self._peer_at = levels, now

    # -- what it says ---------------------------------------------------------------------------
    def share(self, channel: int, now: float) -> float | None:
        """The share of our readings on ``channel`` that were busy (None: not known yet)."""
        r = self._mine.get(channel)
        if r is None:
            return None
        b, w = r.decayed(now)
        return b / w if w >= KNOWN_WEIGHT else None

    def peer_share(self, channel: int, now: float) -> float | None:
        """What the peer's last report (if still believed) said of ``channel``."""
        if self._peer is None or now - self._peer_at > PEER_S or channel >= LEVEL_CHANNELS:
            return None
        level = _level_at(self._peer, channel)
        return None if level == UNKNOWN else LEVEL_SHARE[level]

    def score(self, channel: int, now: float) -> float:
        """How busy ``channel`` is at the worse of the two ends (an unknown end counts as
        UNKNOWN_SHARE): lower is better."""
        mine, theirs = self.share(channel, now), self.peer_share(channel, now)
        return max(
            UNKNOWN_SHARE if mine is None else mine, UNKNOWN_SHARE if theirs is None else theirs
        )

    def best(
        self, now: float, failing: Sequence[int] = (), keep_apart: Sequence[int] = ()
    ) -> int | None:
        """The channel a move should go to: the lowest score, away from the ``failing``
        channels (at least WIFI_HALF_WIDTH where any allowed channel is; else the farthest),
        not one of them, and at least APART from each of ``keep_apart`` (the link's other
        channel). Ties go to the channel farthest from the failing ones. None: nowhere."""
        candidates = [
            c
            for c in self.allowed
            if c not in failing and all(abs(c - k) >= APART for k in keep_apart)
        ]
        if not candidates:
            return None

        def distance(c: int) -> int:
            return min((abs(c - f) for f in failing), default=WIFI_HALF_WIDTH)

        far = [c for c in candidates if distance(c) > WIFI_HALF_WIDTH]
        pool = far or candidates
        return min(pool, key=lambda c: (round(self.score(c, now), 3), -distance(c), c))

    def neighbourhood(self, own: Sequence[int]) -> list[int]:
        """The allowed channels a Wi-Fi network on one of ``own`` (the link's channels) would
        cover too, but not those where the link's own frames are heard."""
        return [
            c
            for c in self.allowed
            if any(abs(c - o) <= WIFI_HALF_WIDTH for o in own)
            and all(abs(c - o) > OWN_SPREAD for o in own)
        ]

    def next_channel(self, own: Sequence[int] = ()) -> int | None:
        """The channel to read next: every NEAR_EVERY-th reading one of the link's
        neighbourhood in turn (where Wi-Fi on the link's channels shows: ``near``), the others
        the allowed channels in turn (a sweep), never the link's ``own`` (our peer's frames on
        them would read as a carrier)."""
        self._turn += 1
        near = self.neighbourhood(own)
        if near and self._turn % NEAR_EVERY == 0:
            self._near += 1
            return near[self._near % len(near)]
        for _ in range(len(self.allowed)):
            channel = self.allowed[self._sweep % len(self.allowed)]
            self._sweep += 1
            if all(abs(channel - o) > OWN_SPREAD for o in own):
                return channel
        return None

    def near(self, own: Sequence[int], since: float) -> tuple[int, int]:
        """Our readings of the link's neighbourhood since ``since``: (busy, all). Wi-Fi over
        the link's channels shows there; a weak path or a loss every channel has does not."""
        busy = total = 0
        for c in self.neighbourhood(own):
            for t, b in self._mine[c].recent:
                if t >= since:
                    total += 1
                    busy += b
        return busy, total

    def levels(self, now: float) -> bytes:
        """Our picture as the peer takes it: two bits a channel of the ISM band."""
        out = bytearray(LEVELS_BYTES)
        for channel in self.allowed:
            if channel >= LEVEL_CHANNELS:
                continue
            s = self.share(channel, now)
            level = (
                UNKNOWN
                if s is None
                else QUIET_LEVEL
                if s < QUIET
                else SOME_LEVEL
                if s < SOME
                else BUSY_LEVEL
            )
            out[channel // 4] |= level << (2 * (channel % 4))
        return bytes(out)

    def peer_levels_now(self, now: float) -> bytes | None:
        """The peer's last report, while it is believed."""
        return self._peer if self._peer is not None and now - self._peer_at <= PEER_S else None

    def stats(self, now: float) -> dict[str, object]:
        known = {c: s for c in self.allowed if (s := self.share(c, now)) is not None}
        busy = sorted(c for c, s in known.items() if s >= SOME)
        peer = self.peer_levels_now(now)
        return {
            "readings": self.readings,
            "known": len(known),
            "busy": busy,
            "levels": self.levels(now).hex(),
            "peer_levels": None if peer is None else peer.hex(),
        }


def _level_at(levels: bytes, channel: int) -> int:
    return (levels[channel // 4] >> (2 * (channel % 4))) & 3


def parse_levels(levels: bytes) -> dict[int, int]:
    """The levels' bytes as {channel: level} (for the status and ``scan``)."""
    if len(levels) != LEVELS_BYTES:
        raise ValueError(f"levels: {len(levels)} bytes, not {LEVELS_BYTES}")
    return {c: _level_at(levels, c) for c in range(LEVEL_CHANNELS)}
