"""The RX process's side of ``adapt = true``, sans-IO (one peer, either mode; rate.py): the RX
radio listens at the rate its peer (this direction's sender) announced in a sealed
link-control packet, and falls back to the robust rate when the peer has been quiet for
FALLBACK_S (it switched without us, or the channel took it), and from there listens at the
configured rate now and then while nothing comes (rate.SCAN_S). Chosen again whenever the
radio's settings are applied (brought up, ``radio set``). A part (part.py): ``step`` returns
the rate to set, if any (actions.py), and says whether it followed an announcement
(``announced``); ``wake_at``, a trial's end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from longge.protocol.actions import Rate
from longge.protocol.part import Deciding
from longge.protocol.peer import PeerReceiver, PeerTable
from longge.protocol.rate_follower import RateFollower


class HeardTurn(NamedTuple):
    """What ``RateListening.step`` is told each turn: ``adapt``: the config says so and the
    link mode can; the configured rate; how many times the radio's settings were applied (it
    changes: they were again); the peers, as their packets left them (``rate_heard``,
    ``last_heard``, ``grants_heard``)."""

    adapt: bool
    rate: str
    applied: int
    table: PeerTable[PeerReceiver]


class RateListening(Deciding[HeardTurn, Rate]):
    def __init__(self, arq: bool) -> None:
        self.announced = False  # (the last step's switch was on an announcement)
        self.arq = arq  # (the link mode's: stream mode's ARQ, or the chip's acknowledgements)
        self.follower: RateFollower | None = None
        self._key: tuple[bool, str] | None = None
        self._applied = -1

    def step(self, turn: HeardTurn, now: float) -> Sequence[Rate]:
        """Once per loop turn with a radio, after its frames were read: the rates to set, in
        order (``announced``: on an announcement)."""
        rate, table = turn.rate, turn.table
        self.announced = False
        out: Sequence[Rate] = ()  # (most turns: nothing; no list made)
        # (a mobile whose base granted it the uplink: a base with several mobiles, which
        # adapts no rate: its announcements never come, and a fallback here would never end)
        cell = table.peers[0].grants_heard > 0
        key = (turn.adapt and len(table) == 1 and not cell, rate)
        if key != self._key:
            if self.follower is not None and self.follower.rate != rate:
                out = [Rate(rate)]  # (the configured again)
            self._key = key
            self.follower = RateFollower(rate, now, self.arq) if key[0] else None
            self._applied = -1
            # (an announcement heard while nothing followed is stale: the RX pump does not
            # step this part then, so nothing took it)
            table.peers[0].rate_heard = None
        peer = table.peers[0]
        heard, peer.rate_heard = peer.rate_heard, None
        follower = self.follower
        if follower is None:
            return out
        switch = turn.applied != self._applied  # the config's rate was just applied
        self._applied = turn.applied
        announced = heard is not None and follower.announced(heard, now)
        switch = follower.tick(peer.last_heard, now) or announced or switch
        if switch:
            out = [*out, Rate(follower.rate)]
        self.announced = announced
        return out

    def wake_at(self, now: float) -> float | None:
        """A trial's end."""
        f = self.follower
        return None if f is None or f.trial_back is None else f.trial_back[1]

    def stats(self, now: float) -> dict[str, object] | None:
        return None if self.follower is None else self.follower.stats(now)
