"""The RX process's side of ``adapt = true``, sans-IO (one peer, either mode; rate.py): the RX
radio listens at the rate its peer (this direction's sender) announced in a sealed
link-control packet, and falls back to the robust rate when the peer has been quiet for
FALLBACK_S (it switched without us, or the channel took it), and from there listens at the
configured rate now and then while nothing comes (rate.SCAN_S). Chosen again whenever the
radio's settings are applied (brought up, ``radio set``). A part (part.py): ``step`` returns
the rate to set, if any (actions.py); ``wake_at``, a trial's end."""

from __future__ import annotations

from longge.protocol.actions import Rate
from longge.protocol.peer import PeerReceiver, PeerTable
from longge.protocol.rate_follower import RateFollower


class RateListening:
    def __init__(self, arq: bool) -> None:
        self.arq = arq  # (the link mode's: stream mode's ARQ, or the chip's acknowledgements)
        self.follower: RateFollower | None = None
        self._key: tuple[bool, str] | None = None
        self._applied = -1

    def step(
        self, adapt: bool, rate: str, applied: int, table: PeerTable[PeerReceiver], now: float
    ) -> tuple[list[Rate], bool]:
        """Once per loop turn with a radio, after its frames were read (``adapt``: the config
        says so and the link mode can, ``rate``: the config's; ``applied``: how many times
        the radio's settings were applied): the rates to set, in order; was it on an
        announcement?"""
        out: list[Rate] = []
        # (a mobile whose base granted it the uplink: a base with several mobiles, which
        # adapts no rate: its announcements never come, and a fallback here would never end)
        cell = table.peers[0].grants_heard > 0
        key = (adapt and len(table) == 1 and not cell, rate)
        if key != self._key:
            if self.follower is not None and self.follower.rate != rate:
                out.append(Rate(rate))  # (the configured again)
            self._key = key
            self.follower = RateFollower(rate, now, self.arq) if key[0] else None
            self._applied = -1
        peer = table.peers[0]
        heard, peer.rate_heard = peer.rate_heard, None
        follower = self.follower
        if follower is None:
            return out, False
        switch = applied != self._applied  # the config's rate was just applied
        self._applied = applied
        announced = heard is not None and follower.announced(heard, now)
        switch = follower.tick(peer.last_heard, now) or announced or switch
        if switch:
            out.append(Rate(follower.rate))
        return out, announced

    def wake_at(self, now: float) -> float | None:
        """A trial's end."""
        f = self.follower
        return None if f is None or f.trial_back is None else f.trial_back[1]

    def stats(self, now: float) -> dict[str, object] | None:
        return None if self.follower is None else self.follower.stats(now)
