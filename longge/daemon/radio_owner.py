"""The one owner of a radio process's chip settings (docs/design.md, "The radio's owner").

The parts of a radio process (adaptation, listening or sending aside, the pump's choice of
peer) decide which setting the chip needs; each hands its decision to the owner as a value
(protocol/actions.py: Channel, Rate, Power, Retries, AutoAck, Transmit, Listen).

The owner applies them in the order they come, keeps what the chip is set to now
(``settings``: None while there is no radio), and applies actions given for later
(``schedule``) once their time has come (``due``; the pump sleeps no longer than
``wake_at``). Nothing else in the daemon writes a chip setting: ``tests/test_radio_owner.py``
holds the package to that, statically and with a radio that records who wrote.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, replace
from itertools import count

from longge.chip.datasheet import T_RPD_NS
from longge.config import NodeConfig
from longge.protocol.actions import (
    Action,
    AutoAck,
    Channel,
    Listen,
    Power,
    Rate,
    Retries,
    Transmit,
)
from longge.radio.constants import RATE_BY_NAME
from longge.radio.interface import LinkRadio
from longge.radio.options import RadioOptions, configure


@dataclass(frozen=True, slots=True)
class ChipSettings:
    """What the owner last set on its chip."""

    channel: int
    rate: str
    pa_level: int
    ard_step: int
    arc: int
    auto_ack: tuple[bool, ...]  # pipes 0..5
    listening: bool
    tx_address: bytes | None  # None: listening since it was set up (an RX radio)

    @classmethod
    def configured(
        cls, opts: RadioOptions, channel: int, pa_level: int, tx_address: bytes | None
    ) -> ChipSettings:
        """What ``configure`` sets (and the PA level), sending to ``tx_address`` (None:
        listening)."""
        return cls(
            channel=channel,
            rate=opts.rate,
            pa_level=pa_level,
            ard_step=opts.ard_step,
            arc=opts.arc,
            auto_ack=(opts.acked,) * 6,
            listening=tx_address is None,
            tx_address=tx_address,
        )


#: A dwell's wait in RX before the power detector is read (T_RPD_NS and a margin, as scan's).
RPD_SETTLE_S = T_RPD_NS / 1e9 + 30e-6


class RadioOwner:
    """A radio process's chip, as the only code that writes its settings."""

    def __init__(
        self, radio: LinkRadio | None = None, settings: ChipSettings | None = None
    ) -> None:
        """Empty until ``set_up``; or a radio a caller set up itself, with its settings."""
        self.radio = radio
        self.settings = settings
        #: times the whole configuration was applied (brought up, or changed live)
        self.applied = 0
        #: actions given for later, soonest first (a heap): the pumps call ``due`` only while
        #: it holds some (a call a turn costs a Pi's receiver a few per cent)
        self.later: list[tuple[float, int, Action]] = []
        self.dwells = 0  # (read_power's)
        #: the link's channel for this radio, once it moved (a Channel with home): the radio
        #: is set up on it again, not on the configured one
        self.link_channel: int | None = None
        #: the node's other radio's channel, once the link moved it (agility.py's SwitchAt:
        #: a cell mobile's TX radio sends a light packet on the downlink's channel there)
        self.other_channel: int | None = None
        self._order = count()  # (actions given for one moment keep their order)

    def set_up(self, radio: LinkRadio, cfg: NodeConfig, which: str) -> None:
        """A radio brought up (or reconfigured live): the node's whole configuration for
        its ``which`` ("tx", "rx") radio, read back where the backend can (HardwareError)."""
        channel = cfg.tx_channel if which == "tx" else cfg.rx_channel
        if self.link_channel is not None:
            channel = self.link_channel
        self.radio = radio
        self.settings = None  # (unknown until the whole set is on the chip)
        configure(radio, cfg.radio, channel=channel)
        radio.pa_level = cfg.pa_value
        acked = cfg.radio.acked
        auto_ack = [acked] * 6
        if which == "tx":
            # (one peer: its address stays; the pump changes it for several, between packets)
            address: bytes | None = bytes(cfg.peers[0].tx_address)
            radio.stop_listening(address)
            if hears_aside(cfg):  # (it listens between its bursts: the RX radio's pipes)
                open_peer_pipes(radio, cfg)
                for index in range(len(cfg.peers)):  # (stream mode: acknowledged there only)
                    radio.set_auto_ack(index + 1, True)
                    auto_ack[index + 1] = True
        else:
            address = None
            open_peer_pipes(radio, cfg)
            radio.start_listening()
        radio.verify(cfg.radio, channel, cfg.pa_value)
        self.applied += 1
        settings = ChipSettings.configured(cfg.radio, channel, cfg.pa_value, address)
        self.settings = replace(settings, auto_ack=tuple(auto_ack))

    def own_channel(self, configured: int) -> int:
        """This radio's channel on the link: where it moved, else ``configured``."""
        return configured if self.link_channel is None else self.link_channel

    def others_channel(self, configured: int) -> int:
        """The node's other radio's channel: where the link moved it, else ``configured``."""
        return configured if self.other_channel is None else self.other_channel

    def gone(self) -> None:
        """The radio was let go (lost, or started over): its settings are unknown."""
        self.radio = None
        self.settings = None

    def apply(self, *actions: Action) -> None:
        """Each action on the chip, in order (none without a radio)."""
        radio, s = self.radio, self.settings
        if radio is None or s is None:
            return
        for action in actions:
            match action:
                case Channel(channel, home):
                    radio.channel = channel
                    s = replace(s, channel=channel)
                    if home:
                        self.link_channel = channel
                case Rate(rate):
                    radio.data_rate = int(RATE_BY_NAME[rate])
                    s = replace(s, rate=rate)
                case Power(level):
                    radio.pa_level = level
                    s = replace(s, pa_level=level)
                case Retries(ard_step, arc):
                    radio.set_retries(ard_step, arc)
                    s = replace(s, ard_step=ard_step, arc=arc)
                case AutoAck(pipe, on):
                    radio.set_auto_ack(pipe, on)
                    acks = list(s.auto_ack)
                    acks[pipe] = on
                    s = replace(s, auto_ack=tuple(acks))
                case Transmit(address):
                    radio.stop_listening(address)
                    s = replace(s, listening=False, tx_address=address)
                case Listen():
                    radio.start_listening()
                    s = replace(s, listening=True)
        self.settings = s

    def read_power(self, channel: int, settle_s: float = RPD_SETTLE_S) -> bool | None:
        """The received power detector on ``channel`` (band.py's readings): the RX radio
        leaves its channel, listens there for ``settle_s`` (RX settling and the detector's
        40 µs: datasheet §6.4), reads it and comes back, listening on its own channel again.
        None: no radio, or one that is not listening (a TX radio's dwell is not this)."""
        radio, s = self.radio, self.settings
        if radio is None or s is None or not s.listening:
            return None
        radio.stop_listening()
        radio.channel = channel
        radio.start_listening()
        until = time.monotonic() + settle_s
        while time.monotonic() < until:
            pass  # (170 µs: shorter than any sleep the kernel keeps)
        busy = bool(radio.rpd)
        radio.stop_listening()
        radio.channel = s.channel
        radio.start_listening()
        self.dwells += 1
        return busy

    def schedule(self, at: float, *actions: Action) -> None:
        """``actions`` at ``at`` (time.monotonic's clock), in order, after those given before
        for the same moment."""
        for action in actions:
            heapq.heappush(self.later, (at, next(self._order), action))

    def due(self, now: float) -> None:
        """The scheduled actions whose time has come, applied (with a radio; without one they
        wait for it)."""
        if self.radio is None:
            return
        while self.later and self.later[0][0] <= now:
            self.apply(heapq.heappop(self.later)[2])

    def wake_at(self, now: float) -> float | None:
        """When the next scheduled action is due (None: nothing scheduled)."""
        return self.later[0][0] if self.later else None


def open_peer_pipes(radio: LinkRadio, cfg: NodeConfig) -> None:
    """Each peer's address to us on its pipe (PeerTable: peer i's frames on pipe i + 1)."""
    for index, peer in enumerate(cfg.peers):
        radio.open_rx_pipe(index + 1, peer.rx_address)


def hears_aside(cfg: NodeConfig) -> bool:
    """Does this node's TX radio listen between its bursts for a light mobile's packet on the
    downlink's channel (a base with several mobiles: listening.py, aside.py)?"""
    return cfg.role == "base" and len(cfg.peers) > 1
