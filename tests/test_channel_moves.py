"""A link that moves off a busy channel, both ends' parts on a virtual clock: the base's plan
(protocol/channel_plan.py), the mobile's follower (protocol/channel_follow.py), their band
pictures (protocol/band.py), and the packets between them (protocol/channel_control.py), over
a small model of the air: each end hears the Wi-Fi near it on the channels it covers, a
frame's attempt fails with the Wi-Fi at its receiver, the ACK's at its sender and the loss
floor (ESB: the ACK on the frame's channel; stream mode: on the other direction's, and a
frame that came through with its ACK lost is received again); an end on another channel
than its peer hears nothing. The radios and the daemon's
plumbing are not here (tests with the daemons are); what is: when the link moves, where,
that both ends end up together, and when it must not move."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import pytest

from longge.protocol import channel_control as cc
from longge.protocol.band import Band
from longge.protocol.channel_follow import (
    BEACON_FOR_S,
    BEACON_S,
    DWELL_S,
    HERE_S,
    LIKELY_EVERY,
    LOST_S,
    RX,
    SHORT_DWELL_S,
    TX,
    ChannelFollower,
    Reporting,
    Switch,
    here_every,
)
from longge.protocol.channel_plan import DOWNLINK, Q_BAD, ChannelPlan

ISM = tuple(range(84))
TICK_S = 0.005
ATTEMPTS = 15  # a direction's attempts a tick: about 3000 a second, a loaded link


@dataclass
class Wifi:
    centre: int
    duty: float
    ends: tuple[str, ...] = ("base", "mobile")

    def duty_at(self, end: str, channel: int) -> float:
        return self.duty if end in self.ends and abs(channel - self.centre) <= 11 else 0.0


@dataclass
class Link:
    """Both ends, their radios' channels, and the air between them."""

    per: float = 0.0
    wifi: list[Wifi] = field(default_factory=list)
    drop_moves: bool = False
    pinned: bool = False
    seed: int = 1
    stream: bool = False  # (each direction's ACKs on the other's channel)
    home: tuple[int, int] = (76, 81)  # (uplink, downlink)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.now = 0.0
        self.base_band, self.mobile_band = Band(ISM), Band(ISM)
        up, down = self.home
        self.plan = ChannelPlan(self.base_band, up, down, 0.0, self.pinned, self.stream)
        self.follower = ChannelFollower((up, down), ISM, 0.0)
        self.base = {"up": up, "down": down}
        self.mobile = {"up": up, "down": down}
        self.again_up = 0  # (the mobile's frames the base received again since its report)
        self.later: list[Switch] = []
        self.base_at: float | None = None
        self.moves: list[tuple[float, int, int]] = []
        self.reporting = Reporting(0.0)
        self.next_here = HERE_S
        self.heard_mobile = 0.0  # (the base heard the mobile's frames last)
        self.carried: list[tuple[float, bool]] = []  # (time, both directions carry)

    def duty(self, end: str, channel: int) -> float:
        return max((w.duty_at(end, channel) for w in self.wifi), default=0.0)

    def lost(self, receiver: str, channel: int) -> float:
        """One frame's share lost on its way to ``receiver`` on ``channel``."""
        return 1 - (1 - self.per) * (1 - self.duty(receiver, channel))

    def q(self, sender: str, receiver: str, channel: int) -> float:
        """An ESB attempt's: the frame, and its ACK on the same channel."""
        return 1 - (1 - self.lost(receiver, channel)) * (1 - self.lost(sender, channel))

    def fates(self, sender: str, receiver: str, channel: int, back: int) -> tuple[int, int]:
        """A tick's attempts of one direction on ``channel`` (its ACKs on ``back``: stream
        mode): (failed, received again)."""
        if not self.stream:
            q = self.q(sender, receiver, channel)
            return sum(self.rng.random() < q for _ in range(ATTEMPTS)), 0
        frame_q, ack_q = self.lost(receiver, channel), self.lost(sender, back)
        failed = again = 0
        for _ in range(ATTEMPTS):
            through = self.rng.random() >= frame_q
            acked = through and self.rng.random() >= ack_q
            failed += not acked
            again += through and not acked
        return failed, again

    def through(self, sender: str, receiver: str, channel: int, tries: int = 16) -> bool:
        """A control packet alone at ARC 15 (ESB) gets through?"""
        q = self.q(sender, receiver, channel)
        return any(self.rng.random() >= q for _ in range(tries))

    def run(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end:
            self.now += TICK_S
            self._tick(self.now)

    def _tick(self, now: float) -> None:
        for s in [s for s in self.later if s.at <= now]:
            self.later.remove(s)
            self.mobile["up" if s.radio == TX else "down"] = s.channel
        if self.plan.pending is not None and now >= self.plan.pending.at:
            p = self.plan.pending
            self.base = {"up": p.uplink, "down": p.downlink}
            self.moves.append((now, p.uplink, p.downlink))
            self.plan.done(now)
        same_down = self.base["down"] == self.mobile["down"]
        same_up = self.base["up"] == self.mobile["up"]
        # the traffic: each direction's attempts and failures
        both = same_down and same_up  # (stream mode: an ACK needs the other channel)
        down, up = self.base["down"], self.mobile["up"]
        none = (ATTEMPTS, 0)
        ok = both if self.stream else same_down
        fails, echoed = self.fates("base", "mobile", down, up) if ok else none
        self.plan.sent(DOWNLINK, ATTEMPTS, fails, now)
        self.reporting.received_again(echoed)
        ok = both if self.stream else same_up
        fails_up, again = self.fates("mobile", "base", up, down) if ok else none
        self.reporting.sent(ATTEMPTS, fails_up)
        self.again_up += again
        if fails_up < ATTEMPTS:
            self.heard_mobile = now
        q_down = self.q("base", "mobile", down) if same_down else 1.0
        q_up = self.q("mobile", "base", up) if same_up else 1.0
        self.carried.append((now, q_down < Q_BAD and q_up < Q_BAD))
        # the power detectors: one reading each a tick, off the link's own channels
        for end, band, own in (
            ("base", self.base_band, self.base),
            ("mobile", self.mobile_band, self.mobile),
        ):
            ch = band.next_channel(own=(own["up"], own["down"]))
            if ch is not None:
                band.reading(ch, self.rng.random() < self.duty(end, ch), now)
        # the mobile's report, up
        if (counts := self.reporting.take(now)) is not None:
            a, f, echoed = counts
            own = (self.mobile["up"], self.mobile["down"])
            busy, total = self.mobile_band.near(own, now - 1.0)
            near = busy / total if total else None
            msg = cc.band_message(a, f, near, self.mobile_band.levels(now), echoed)
            if same_up and self.through("mobile", "base", self.mobile["up"]):
                report = cc.parse_band(msg)
                assert report is not None
                again, self.again_up = self.again_up, 0
                self.plan.report(report.attempts, report.failures, report.echoed, again, now)
                self.base_band.peer_levels(report.levels, now)
                self.plan.peer_near(report.near, now)
        # the base: a move decided, its MOVE (again each tick until its moment), its HERE
        planned = self.plan.step(now)
        p = planned or self.plan.pending
        sent = p is not None and not self.drop_moves and same_down
        if p is not None and sent and self.through("base", "mobile", self.base["down"]):
            move = cc.parse_move(cc.move_message(p.seq, p.uplink, p.downlink, p.at - now))
            assert move is not None
            self.later += self.follower.move(move, now)
        # (as agility.py: none with a move's number and the old channels; more often to a
        # mobile not heard for a while: the beacon)
        if now >= self.next_here and self.plan.pending is None:
            self.next_here = now + here_every(now - self.heard_mobile)
            nxt = self.plan.announce(now)
            msg = cc.here_message(self.plan.seq, self.base["up"], self.base["down"], nxt)
            if same_down and self.through("base", "mobile", self.base["down"]):
                here = cc.parse_here(msg)
                assert here is not None
                self._apply(self.follower.here(here, now))
        self._apply(self.follower.step(now))

    def _apply(self, switches: list[Switch]) -> None:
        for s in switches:
            if s.at <= self.now:
                self.mobile["up" if s.radio == TX else "down"] = s.channel
            else:
                self.later.append(s)

    def back_after(self, since: float) -> float | None:
        """Seconds from ``since`` to the first of 0.5 s in a row both directions carried."""
        run_from = None
        for t, ok in self.carried:
            if t < since:
                continue
            if not ok:
                run_from = None
            elif run_from is None:
                run_from = t
            elif t - run_from >= 0.5:
                return run_from - since
        return None


def test_wifi_over_both_channels_moves_both_within_two_seconds_out_of_its_reach() -> None:
    """Wi-Fi 13 busy half the time (it covers 61..83: both of the link's channels) switched on
    after 20 s of a clean band: both directions move out of its reach, and the ends agree."""
    for seed in range(1, 6):
        link = Link(seed=seed)
        link.run(20.0)
        assert link.moves == []
        link.wifi.append(Wifi(72, 0.5))
        link.run(5.0)
        back = link.back_after(20.0)
        assert back is not None and back <= 2.0, (seed, back, link.moves)
        assert len(link.moves) <= 2, link.moves  # (each direction as its windows tell)
        up, down = link.base["up"], link.base["down"]
        assert (up, down) == (link.mobile["up"], link.mobile["down"])
        assert up < 61 and down < 61 and abs(up - down) >= 2


@pytest.mark.parametrize("busy", ["downlink", "uplink"])
def test_stream_mode_moves_only_the_direction_whose_channel_is_busy(busy: str) -> None:
    """Stream mode, the link's channels far apart (uplink 20, downlink 81) and Wi-Fi over one
    of them: the other direction's ARQ loses its ACKs there (its failures are the busy
    channel's), but its receiver got those frames again: that direction stays; the busy one
    moves and the link carries again. (Counted as its ARQ counts, the uplink moved beside
    Wi-Fi over the downlink and was then judged "not the channel's": the link stayed under
    the Wi-Fi for 30 s.)"""
    for seed in range(1, 4):
        link = Link(stream=True, home=(20, 81), seed=seed)
        link.run(10.0)
        assert link.moves == []
        link.wifi.append(Wifi(78 if busy == "downlink" else 23, 0.5))
        link.run(6.0)
        back = link.back_after(10.0)
        assert back is not None and back <= 2.0, (seed, back, link.moves)
        stays = "up" if busy == "downlink" else "down"
        assert link.base[stays] == (20 if stays == "up" else 81), (seed, link.moves)
        assert link.moves, seed
        assert (link.base["up"], link.base["down"]) == (link.mobile["up"], link.mobile["down"])


def test_a_loss_every_channel_has_moves_nothing_in_ten_minutes() -> None:
    """A tenth of the frames (and of the ACKs) lost on every channel: no move."""
    link = Link(per=0.1, seed=7)
    link.run(600.0)
    assert link.moves == []
    assert link.plan.stats(link.now)["downlink"] == 81


def test_a_loss_that_fails_the_link_but_no_wifi_is_heard_beside_it_moves_nothing() -> None:
    """A third of frames and ACKs lost everywhere (half the attempts fail: a weak path): the
    link's channels fail, but their neighbours read quiet at both ends: no move."""
    link = Link(per=0.3, seed=8)
    link.run(120.0)
    assert link.moves == []
    assert link.plan.unconfirmed > 0


def test_wifi_heard_at_the_base_only_moves_the_link_all_the_same() -> None:
    link = Link(seed=3)
    link.run(20.0)
    link.wifi.append(Wifi(72, 0.5, ends=("base",)))
    link.run(5.0)
    back = link.back_after(20.0)
    assert back is not None and back <= 2.0, (back, link.moves)
    assert link.base["up"] < 61 and link.base["down"] < 61


def test_wifi_that_follows_the_link_moves_it_again() -> None:
    link = Link(seed=4)
    link.run(20.0)
    link.wifi.append(Wifi(72, 0.5))
    link.run(5.0)
    first = dict(link.base)
    centre = min(max(first["down"], 1), 83)
    link.wifi.append(Wifi(centre, 0.5))  # a second network, onto the new downlink
    link.run(8.0)
    assert len(link.moves) >= 2, link.moves
    assert link.base["down"] != first["down"]
    assert link.back_after(25.0) is not None
    assert (link.base["up"], link.base["down"]) == (link.mobile["up"], link.mobile["down"])


def test_a_move_the_mobile_never_heard_is_mended_by_its_search_within_three_seconds() -> None:
    """Every MOVE lost: the base switches alone; the mobile, hearing nothing, looks where the
    base's HERE said its downlink would go, and its first HERE there brings the uplink."""
    for seed in range(1, 6):
        link = Link(seed=seed, drop_moves=True)
        link.run(20.0)
        link.wifi.append(Wifi(72, 0.5))
        link.run(6.0)
        assert link.moves, seed
        back = link.back_after(link.moves[0][0])
        assert back is not None and back <= 3.0, (seed, back)
        assert link.follower.found >= 1
        assert (link.base["up"], link.base["down"]) == (link.mobile["up"], link.mobile["down"])


def test_a_pinned_link_stays_where_it_is() -> None:
    link = Link(pinned=True)
    link.run(10.0)
    link.wifi.append(Wifi(72, 0.5))
    link.run(5.0)
    assert link.moves == [] and link.base == {"up": 76, "down": 81}


def test_a_mobile_that_lost_its_base_searches_the_likely_channels_first() -> None:
    """The likely channels first, a long dwell each; then sweeps of every allowed channel (not
    the uplink's) with a likely one again after each LIKELY_EVERY, short dwells and long ones
    in turn (a base that hears nothing of the mobile beacons; one that still does says HERE
    only every HERE_S); an authentic packet ends the search."""
    f = ChannelFollower((76, 81), ISM, 0.0)
    f.here(cc.Here(3, 76, 81, 10), 0.1)
    assert f.step(0.5) == []  # (not lost yet)
    t = 0.1 + LOST_S
    first = f.step(t)
    assert first == [Switch(RX, 10, t)] and f.searching  # (where the base said it would go)
    seen, dwells = [10], []
    for _ in range(400):
        at = f.wake_at(t)
        assert at is not None
        dwells.append(round(at - t, 3))
        t = at
        seen += [s.channel for s in f.step(t)]
    assert dwells[:2] == [DWELL_S, DWELL_S]  # (10, then 81: the channel it was lost on)
    assert seen[1] == 81 and 76 not in seen  # (our uplink's: the base never sends there)
    sweep = len(ISM) - 3 + (len(ISM) - 3) // LIKELY_EVERY  # (all but 76, 10 and 81)
    assert set(dwells[2 : 2 + sweep]) == {SHORT_DWELL_S}, dwells[: 2 + sweep]
    assert set(dwells[2 + sweep : 2 + 2 * sweep]) == {DWELL_S}
    assert set(seen[2 : 2 + sweep]) == set(ISM) - {76}  # (every allowed channel, in a sweep)
    tens = [i for i, c in enumerate(seen) if c == 10]  # (HERE's next, again and again)
    gaps = [b - a for a, b in itertools.pairwise(tens)]  # (two likely ones: every other
    assert max(gaps) <= 3 * (LIKELY_EVERY + 1), gaps  # insertion; a sweep's end adds a few)
    f.heard(t)
    assert not f.searching and f.found == 1


def test_the_base_beacons_to_a_mobile_it_does_not_hear_for_a_while() -> None:
    assert here_every(0.0) == here_every(LOST_S / 2) == HERE_S
    assert here_every(LOST_S) == here_every(LOST_S + BEACON_FOR_S / 2) == BEACON_S
    assert here_every(LOST_S + BEACON_FOR_S) == HERE_S  # (gone for good: the air is others')
    assert 2 * BEACON_S < SHORT_DWELL_S and HERE_S < DWELL_S


def test_a_here_older_than_the_move_applied_moves_nothing() -> None:
    """A HERE sent before a move and delivered after it (stream mode's ARQ sends it again on
    the new channel) must not take the mobile back."""
    f = ChannelFollower((76, 81), ISM, 0.0)
    switches = f.move(cc.Move(1, 38, 0, 0.1), 1.0)
    assert {(s.radio, s.channel) for s in switches} == {(TX, 38), (RX, 0)}
    assert f.here(cc.Here(0, 76, 81, 0), 1.2) == []  # (move 0's era: stale)
    assert (f.uplink, f.downlink, f.seq) == (38, 0, 1)
    assert f.here(cc.Here(2, 40, 0, 60), 1.5) == [Switch(TX, 40, 1.5)]  # (a newer one)
