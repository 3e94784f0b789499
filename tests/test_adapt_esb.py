"""ESB's adaptation as a part (protocol/adapt_esb.py), on a fake clock with no radio: what it
is told each turn (``EsbTurn``) in, the chip settings and our link-control packets out, in
the order the TX process applies them. A fake chip stands for the air: the frames loaded
each turn go out by the next, each meeting ``retries`` retransmissions; the rate the peer
listens at follows the announcements as a receiver does (protocol/rate_follower.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from longge.chip.datasheet import ARC_MAX
from longge.protocol.actions import Power, Rate, Retries
from longge.protocol.adapt_esb import EsbAction, EsbAdaptation, EsbTurn, Load
from longge.protocol.fragmenter import Fragmenter
from longge.protocol.peer import Networks, PeerReceiver, PeerSender
from longge.protocol.rate_follower import RateFollower
from longge.protocol.reassembler import Reassembler

TURN_S = 0.002
FRAMES_PER_TURN = 4  # (data: 2 Mbit/s carries ~2 frames a millisecond)


@dataclass
class Air:
    """The sender's chip and the receiver's rate. ``bad``: rates at which every attempt
    fails (the frame meets MAX_RT)."""

    start: str = "1M"
    bad: frozenset[str] = frozenset()
    now: float = 0.0
    rate: str = ""  # the sender's chip's
    frames_sent: int = 0
    retransmissions: int = 0
    loaded_last: int = 0  # frames loaded in the last turn: in the FIFO till the next
    done: list[EsbAction] = field(default_factory=list)
    adapt: EsbAdaptation = field(default_factory=EsbAdaptation)
    follower: RateFollower = field(init=False)
    data_bad: int = 0  # turns data was loaded at a rate in ``bad``

    def __post_init__(self) -> None:
        self.rate = self.start
        self.follower = RateFollower(self.start, 0.0)
        nets = Networks(("0.0.0.0/0",))
        self.peer = PeerSender("base", b"addrb", nets, Fragmenter(32), None)
        self.rx = PeerReceiver("mobile", b"addrm", nets, Reassembler(1500, timeout=1.0), None)

    def run(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end:
            self.now += TURN_S
            self.turn()

    def turn(self) -> None:
        now, adapt = self.now, self.adapt
        failed = self.rate in self.bad or self.rate != self.follower.rate
        # the last turn's frames have gone: acknowledged, or each met MAX_RT
        if self.loaded_last:
            if failed:
                self.retransmissions += ARC_MAX * self.loaded_last
                adapt.max_rt += 1
            else:
                adapt.acknowledged(now)
        self.loaded_last = 0
        self.follower.tick(now if not failed else -1.0, now)
        turn = EsbTurn(True, self.start, 3, True, 1, self.frames_sent, self.retransmissions, 3,
                       lambda: self.loaded_last == 0, self.peer)  # fmt: skip
        for action in adapt.step(turn, now):
            self.done.append(action)
            if isinstance(action, Rate):
                self.rate = action.rate
            if isinstance(action, Load):
                self.frames_sent += len(action.frames)
                self.loaded_last += len(action.frames)
                if not failed:  # (the peer takes it in: a rate's announcement)
                    for frame in action.frames:
                        self.rx.receive(frame, now)
                    heard, self.rx.rate_heard = self.rx.rate_heard, None
                    if heard is not None:
                        self.follower.announced(heard, now)
        if adapt.may_load() and not self.loaded_last:
            self.data_bad += self.rate in self.bad
            self.frames_sent += FRAMES_PER_TURN
            self.loaded_last = FRAMES_PER_TURN


def settings(done: list[EsbAction]) -> list[object]:
    return [a if not isinstance(a, Load) else "load" for a in done]


def test_a_clean_channel_moves_to_the_faster_rate_announced_alone_and_switched_after() -> None:
    air = Air(start="1M")
    air.run(8.0)
    assert air.rate == "2M" and air.follower.rate == "2M"
    recent = [what for _, _, what in air.adapt.decisions.recent]
    assert "trial 2M" in recent and "keep 2M" in recent
    done = settings(air.done)
    first = done.index(Rate("2M"))
    # the announcement went before the switch, at ARC 15, alone in an empty FIFO
    assert "load" in done[:first]
    load = done[:first].index("load")
    assert isinstance(done[load - 1], Retries) and done[load - 1].arc == ARC_MAX


def test_a_trial_that_fails_goes_back_once_the_receivers_trial_is_over() -> None:
    """2 Mbit/s carries nothing: its trial's probes all meet MAX_RT; the sender goes back to
    1 Mbit/s without a word, and no data goes meanwhile."""
    air = Air(start="1M", bad=frozenset({"2M"}))
    air.run(3.0)
    recent = [what for _, _, what in air.adapt.decisions.recent]
    assert "trial 2M" in recent, recent
    assert air.rate == "1M" and air.follower.rate == "1M"
    done = settings(air.done)
    up, back = done.index(Rate("2M")), len(done) - 1 - done[::-1].index(Rate("1M"))
    assert up < back and air.data_bad == 0  # (a trial's probes go, the data waits)
    assert all(not isinstance(a, Power) or a.level <= 3 for a in air.done)  # (the ceiling)


def test_adaptation_turned_off_after_a_max_rt_lets_the_data_go() -> None:
    """A rate that met MAX_RT holds the data till a probe is acknowledged; the adaptation
    turned off then (``radio set adapt=false``) must not leave it held: nothing would be
    loaded again, nor acknowledged, and the pump would wake at once for ever."""
    air = Air(start="2M", bad=frozenset({"2M"}))
    air.run(4.0)  # (heard first: the rate is judged from the first acknowledgement on)
    air.bad = frozenset({"2M", "1M", "250k"})
    for _ in range(3):
        air.turn()
        air.now += TURN_S
    assert not air.adapt.may_load()  # (dead: a probe now and then)
    sent, again = air.frames_sent, air.retransmissions
    off = EsbTurn(False, "2M", 3, True, 1, sent, again, 3, lambda: True, air.peer)
    air.adapt.step(off, air.now)
    assert air.adapt.may_load() and air.adapt.wake_at(air.now) is None
