"""The TX process's side of ``adapt = true``: feeds the retry adapter (protocol/adapt.py) the
radio's counts and applies its choices to the TX radio (ESB only: in stream mode the chips do
not retry). Applied again whenever the radio's settings are (brought up, ``radio set``)."""

from __future__ import annotations

from longge.daemon.child import Child
from longge.daemon.peers import TxCounters
from longge.protocol.adapt import RetryAdapter
from longge.radio.interface import LinkRadio
from longge.radio.options import ARD_STEP_US


class AdaptiveRetries:
    """Present while the node's config says ``adapt`` and the link is ESB."""

    def __init__(self) -> None:
        self.adapter: RetryAdapter | None = None
        self._key: tuple[bool, str] | None = None
        self._applied = -1
        self._loaded = 0
        self._retrans = 0
        self.max_rt = 0  # MAX_RT since the last look (the loop counts them)

    def step(self, child: Child, radio: LinkRadio, c: TxCounters, now: float) -> None:
        """Once per loop turn with a radio: follow the config, count, apply."""
        opts = child.cfg.radio
        key = (opts.adapt and opts.acked, opts.rate)
        if key != self._key:  # turned on or off, or another rate: start over
            self._key = key
            self.adapter = RetryAdapter(opts.rate, now) if key[0] else None
            self._applied = -1
        adapter = self.adapter
        if adapter is None:
            self.max_rt = 0
            return
        if child.applied != self._applied:  # the config's retries were just applied
            self._applied = child.applied
            self._loaded, self._retrans = c.frames_sent, radio.retransmissions
            self._apply(radio)
            return
        loaded = c.frames_sent - self._loaded
        retrans = radio.retransmissions - self._retrans
        self._loaded, self._retrans = c.frames_sent, radio.retransmissions
        max_rt, self.max_rt = self.max_rt, 0
        if adapter.observe(loaded, retrans, max_rt, now) is not None:
            self._apply(radio)

    def _apply(self, radio: LinkRadio) -> None:
        assert self.adapter is not None
        choice = self.adapter.choice
        radio.set_retries(choice.ard_us // ARD_STEP_US - 1, choice.arc)

    def stats(self, now: float) -> dict[str, object] | None:
        return None if self.adapter is None else self.adapter.stats(now)
