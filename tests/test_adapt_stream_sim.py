"""Stream mode's rate agreement (protocol/adapt_stream.py, protocol/rate.py) on a virtual clock:
the sender's adaptation, ARQ and packets, a channel that carries a frame only to a receiver at
its rate, and the receiver's ARQ, packets and rate follower, as the daemons wire them
(daemon/stream.py), without processes, radios or wall time. What the daemons' tests cannot
make happen on demand happens here: a receiver that leaves a trial before its keep comes."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from daemonlink import ip_packet

from longge.air.loss import frame_error, margin_db
from longge.chip.datasheet import bits_on_air
from longge.daemon.peers import SENDER_BACKLOG, STREAM_REASSEMBLY_S
from longge.daemon.radio_owner import ChipSettings, RadioOwner
from longge.protocol import Fragmenter, Reassembler
from longge.protocol import power as pw
from longge.protocol import rate as rt
from longge.protocol.adapt_stream import KEEP_LOST_S, StreamAdaptation, StreamTurn
from longge.protocol.arq import ArqSender
from longge.protocol.arq_frames import MAX_WINDOW
from longge.protocol.arq_receiver import ArqReceiver
from longge.protocol.peer import Networks, PeerReceiver, PeerSender
from longge.protocol.power_stream import SILENT_S
from longge.protocol.rate_follower import RateFollower
from longge.radio.constants import NAME_BY_RATE
from longge.radio.options import RadioOptions

#: s per frame on the air at each rate (a 32-byte no-ack frame and the 4 ms rule's gaps,
#: roughly: what matters here is their order, not the link's bound)
FRAME_S = {"2M": 0.0002, "1M": 0.0004, "250k": 0.0016}
TICK_S = 0.0001
ACK_S = 0.002  # the reverse channel's delay (its own rate is not what is tested)
FRAME_BITS = bits_on_air(32)


@dataclass
class Link:
    """One direction: the mobile's sender, the base's receiver."""

    loss: Callable[[str, float], float]  # (rate, now) -> share of frames lost
    seed: int = 1
    ceiling: int = 1  # the configured PA level (1: low, -12 dBm, the nodes' default)
    start: str = "1M"
    now: float = 0.0
    delivered: list[bytes] = field(default_factory=list)
    last_delivery: float = 0.0
    longest_gap: float = 0.0

    def __post_init__(self) -> None:
        nets = Networks(("0.0.0.0/0",))
        opts = RadioOptions(mode="stream", adapt=True, rate=self.start)
        # (the chip the owner writes: only its rate and PA level are read here)
        self.radio: Any = SimpleNamespace(data_rate=-1, pa_level=-1)
        self.owner = RadioOwner(self.radio, ChipSettings.configured(opts, 76, self.ceiling, b"a"))
        self.peer = PeerSender("base", b"addrb", nets, Fragmenter(31), None)
        self.peer.arq = ArqSender(backlog=SENDER_BACKLOG)
        self.adapt = StreamAdaptation()
        burst = lambda rate: replace(opts, rate=rate).timing().stream_burst_frames  # noqa: E731
        self.turn = StreamTurn(True, self.start, self.ceiling, 0, burst, [self.peer])
        # (as daemon/peers.py makes it for stream mode, unsealed)
        reassembler = Reassembler(1500, timeout=STREAM_REASSEMBLY_S, late_guard=MAX_WINDOW)
        self.rx = PeerReceiver("mobile", b"addrm", nets, reassembler, None)
        self.rx_arq = ArqReceiver()
        self.follower = RateFollower(self.start, 0.0, stream=True)
        self.rng = random.Random(self.seed)
        self.acks: list[tuple[float, bytes]] = []
        self.next_frame_at = 0.0
        self.next_tag = 0

    @property
    def tx_rate(self) -> str:
        return NAME_BY_RATE[self.radio.data_rate]

    def run(self, seconds: float, hook: Callable[[Link], None] | None = None) -> None:
        peer, arq, adapt = self.peer, self.peer.arq, self.adapt
        assert arq is not None
        end = self.now + seconds
        while self.now < end:
            now = self.now = self.now + TICK_S
            while self.acks and self.acks[0][0] <= now:
                arq.on_control(self.acks.pop(0)[1], now)
            for action in adapt.step(self.turn, now):
                self.owner.apply(action)
            if not peer.frames and adapt.may_load() and adapt.may_feed():
                peer.load(ip_packet(1000, self.next_tag % 60000), now)
                self.next_tag += 1
            if adapt.may_feed():
                peer.feed_arq()
            if hook is not None:
                hook(self)
            if now >= self.next_frame_at and adapt.may_send():
                frame = arq.next_frame(now)
                if frame is not None:
                    self.next_frame_at = now + FRAME_S[self.tx_rate]
                    self._air(frame, now)
            self._receiver(now)

    def _air(self, frame: bytes, now: float) -> None:
        if self.follower.rate != self.tx_rate or self.rng.random() < self.loss(self.tx_rate, now):
            return
        for inner in self.rx_arq.on_frame(frame, now):
            packet = self.rx.receive(inner, now)
            if packet is not None:
                gap = now - self.last_delivery
                self.longest_gap = max(self.longest_gap, gap) if self.delivered else 0.0
                self.delivered.append(packet)
                self.last_delivery = now
            if self.rx.rate_heard is not None:
                self.rx_arq.ack_now()

    def _receiver(self, now: float) -> None:
        heard, self.rx.rate_heard = self.rx.rate_heard, None
        if heard is not None:
            self.follower.announced(heard, now)
        self.follower.tick(self.rx.last_heard, now)
        ack = self.rx_arq.control(now)
        if ack is not None:
            self.acks.append((now + ACK_S, ack))

    def in_order(self) -> bool:
        """Every packet loaded so far that arrived, once each, in order, none missing
        (ip_packet's tag: the IP identification)."""
        tags = [int.from_bytes(p[4:6], "big") for p in self.delivered]
        return tags == list(range(len(tags)))

    def recent(self) -> list[str]:
        return [what for _, _, what in self.adapt.decisions.recent]


def test_a_trial_of_a_rate_that_works_is_kept() -> None:
    """A clean channel, the link starting at 1 Mbit/s: 2 Mbit/s is tried and kept, and the
    receiver follows."""
    link = Link(lambda rate, now: 0.01)
    link.run(4.0)
    assert "keep 2M" in link.recent() and link.tx_rate == link.follower.rate == "2M"
    assert link.follower.fallbacks == 0 and link.adapt.rates is not None
    assert link.adapt.rates.fallbacks == 0 and link.in_order()


def test_a_keep_that_comes_after_the_receiver_left_the_trial_costs_no_fallback() -> None:
    """The channel goes dark for longer than the receiver's trial lasts without a packet,
    just as the sender keeps 2 Mbit/s: the receiver goes back to 1 Mbit/s and the keep, when
    the ARQ delivers it there, moves nothing (a stale keep). The sender, hearing no ACK,
    goes back too within KEEP_LOST_S: no fallback to 250 kbit/s (it took 1 s and more), and
    the packets keep coming."""
    dark: list[float] = []

    def loss(rate: str, now: float) -> float:
        return 1.0 if dark and dark[0] <= now < dark[0] + 2 * rt.STREAM_TRIAL_S[rate] else 0.01

    def watch(link: Link) -> None:
        if not dark and any(w == "keep 2M" for w in link.recent()):
            dark.append(link.now)

    link = Link(loss)
    link.run(4.0, watch)
    assert dark, link.recent()
    recent = link.recent()
    assert "keep lost" in recent and link.follower.stale_keeps == 1, recent
    assert link.follower.fallbacks == 0 and link.adapt.rates is not None
    assert link.adapt.rates.fallbacks == 0, recent
    before = len(link.delivered)
    link.run(1.0)
    assert len(link.delivered) > before and link.tx_rate == link.follower.rate
    assert link.in_order()
    # dark for 2 x 60 ms, then the sender's KEEP_LOST_S: packets through again soon after
    assert link.longest_gap < 2 * rt.STREAM_TRIAL_S["2M"] + KEEP_LOST_S + 0.2, link.longest_gap


def test_after_a_fallback_the_faster_rate_is_tried_later_and_its_trials_cost_little() -> None:
    """1 Mbit/s dies (only 250 kbit/s gets through): both ends fall back, the first trial of
    1 Mbit/s comes FALLBACK_WAIT_S later, twice ESB's wait (a trial of a rate that just died
    costs the data a few tenths of a second), each failed trial holds the packets up for well
    under half a second, and the packets come in order throughout."""
    link = Link(lambda rate, now: 0.01 if rate == "250k" or now < 1.0 else 1.0)
    link.run(12.0)
    made = [(t, what) for _, t, what in link.adapt.decisions.recent]
    fell = [t for t, what in made if what == "fallback 250k"]
    trials = [t for t, what in made if what == "trial 1M"]
    assert len(fell) == 1 and link.follower.fallbacks == 1, made
    assert trials and trials[0] - fell[0] >= 2 * rt.PROBE_S, made  # (ESB: PROBE_S)
    assert link.tx_rate == "250k" and not any(what.startswith("keep") for _, what in made)
    changed = 0.0  # (no step of the power soon after a change of rate: ESB's wait, 2 s)
    for t, what in made:
        if what.startswith("rate "):
            changed = t
        step = what.startswith("power ") and what.endswith("(trial)")
        assert not step or t - changed >= 2 * pw.WAIT_S, made
    late = link.delivered[-1]
    link.longest_gap = 0.0
    link.run(8.0)  # (the next trials: no fallback, gaps of a failed trial only)
    assert link.follower.fallbacks == 1 and link.delivered[-1] != late and link.in_order()
    assert link.longest_gap < 0.4, link.longest_gap


def test_the_power_comes_down_where_it_does_as_well_and_back_up_when_not() -> None:
    """2 Mbit/s on a 50-dB path from a 0-dBm ceiling: the TX power comes down step by step to
    -18 dBm (9 dB over the sensitivity there); the path grows to 66 dB (-18 dBm now under
    it): the ceiling again at once, no fallback, the rate stays, the packets in order."""
    path = [50.0]

    def loss(rate: str, now: float) -> float:
        return frame_error(margin_db(path[0], link.radio.pa_level, rate), FRAME_BITS)

    link = Link(loss, ceiling=3, start="2M")
    link.run(20.0)
    power = link.adapt.power
    assert power is not None and power.level == 0, power and power.chooser.stats(link.now)
    assert any(what.startswith("power -18 dBm") for what in link.recent()), link.recent()
    path[0] = 66.0
    link.run(3.0)
    assert power.level > 0 and power.chooser.raised >= 1, power.chooser.stats(link.now)
    assert loss("2M", link.now) < 0.01 and link.tx_rate == link.follower.rate == "2M"
    assert link.follower.fallbacks == 0 and link.in_order()


def test_a_power_level_that_carries_nothing_goes_back_up_at_once() -> None:
    """Settled at -18 dBm, then nothing below the ceiling gets through (no fate, so no
    window ends): frames on their way with none acknowledged, the ceiling again within
    power_stream.SILENT_S and a little, no fallback, the packets in order."""
    dead = [False]

    def loss(rate: str, now: float) -> float:
        return 1.0 if dead[0] and link.radio.pa_level < 3 else 0.001

    link = Link(loss, ceiling=3, start="2M")
    link.run(20.0)
    power = link.adapt.power
    assert power is not None and power.level == 0, power and power.chooser.stats(link.now)
    dead[0] = True
    link.longest_gap = 0.0
    link.run(3.0)
    assert link.radio.pa_level == 3 and link.follower.fallbacks == 0, link.recent()
    assert link.longest_gap < SILENT_S + 0.1 and link.in_order(), link.longest_gap
