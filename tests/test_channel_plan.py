"""The base's plan for its channels (protocol/channel_plan.py) on a fake clock, fed windows
by hand: when it moves, where, how a move is judged, and how long it waits after one that
did not help."""

from __future__ import annotations

import pytest

from longge.protocol.band import Band
from longge.protocol.channel_plan import (
    BAD_WINDOWS,
    DOWNLINK,
    JUDGE_WINDOWS,
    LEAD_S,
    SETTLE_S,
    UPLINK,
    WAIT_MAX_S,
    WAIT_S,
    ChannelPlan,
)

ISM = tuple(range(84))


def wifi_beside(band: Band, now: float, own: tuple[int, int] = (76, 81)) -> None:
    """Readings of the link's neighbourhood, half of them busy (Wi-Fi over the link)."""
    for i, c in enumerate(band.neighbourhood(own) * 2):
        band.reading(c, i % 2 == 0, now)


def quiet_band(band: Band, now: float) -> None:
    for c in ISM:
        for _ in range(4):
            band.reading(c, False, now)


def fail(plan: ChannelPlan, direction: str, windows: int, now: float, q: float = 0.6) -> float:
    """``windows`` windows of 128 attempts losing ``q``, 40 ms apart; the time after."""
    for _ in range(windows):
        now += 0.04
        plan.sent(direction, 128, round(128 * q), now)
    return now


def test_a_failing_downlink_with_wifi_beside_it_moves_far_away_at_a_moment_ahead() -> None:
    band = Band(ISM)
    quiet_band(band, 0.0)
    plan = ChannelPlan(band, 76, 81, 0.0)
    now = fail(plan, UPLINK, 1, 1.0, q=0.0)  # (the uplink does well: it stays)
    now = fail(plan, DOWNLINK, BAD_WINDOWS - 1, now)
    wifi_beside(band, now)
    assert plan.step(now) is None  # (one bad window: not yet)
    now = fail(plan, DOWNLINK, 1, now)
    move = plan.step(now)
    assert move is not None and move.uplink == 76
    assert abs(move.downlink - 81) > 11 and abs(move.downlink - 76) > 11
    assert move.at == pytest.approx(now + LEAD_S)
    assert move.downlink == plan.next_downlink  # (where HERE said it would go)
    assert plan.step(now) is None and plan.wake_at(now) == move.at  # (pending)
    plan.done(move.at)
    assert plan.downlink == move.downlink and plan.pending is None


def test_without_wifi_beside_the_link_a_failing_channel_is_not_left() -> None:
    band = Band(ISM)
    quiet_band(band, 0.0)
    plan = ChannelPlan(band, 76, 81, 0.0)
    for c in band.neighbourhood((76, 81)):
        band.reading(c, False, 1.0)
    now = fail(plan, DOWNLINK, 5, 1.0)
    assert plan.step(now) is None and plan.unconfirmed == 1
    plan.peer_near(0.4, now)  # (the mobile hears Wi-Fi beside it: it is near the mobile)
    assert plan.step(now) is not None


def test_a_move_that_did_not_help_holds_both_directions_back_for_a_doubling_wait() -> None:
    band = Band(ISM)
    quiet_band(band, 0.0)
    plan = ChannelPlan(band, 76, 81, 0.0)
    waits = []
    now = 1.0
    for _ in range(8):
        now = fail(plan, UPLINK, 1, now, q=0.0)  # (the uplink does well: it stays)
        now = fail(plan, DOWNLINK, BAD_WINDOWS, now)
        wifi_beside(band, now, (plan.uplink, plan.downlink))
        move = plan.step(now)
        assert move is not None
        plan.done(move.at)
        now = fail(plan, DOWNLINK, JUDGE_WINDOWS, move.at + SETTLE_S)  # (as bad there)
        waits.append(plan.not_before - now)
        now = fail(plan, UPLINK, BAD_WINDOWS, now)
        assert plan.step(now) is None  # (waiting: the uplink too)
        assert move.uplink == 76  # (the uplink never moved: its failures came in the wait)
        now = plan.not_before
        quiet_band(band, now)
        plan.sent(UPLINK, 128, 0, now)  # (fine again)
    assert waits[0] == pytest.approx(WAIT_S)
    assert waits[1] == pytest.approx(2 * WAIT_S)
    assert max(waits) == pytest.approx(WAIT_MAX_S)
    assert plan.stats(now)["judged"][DOWNLINK]["not_helped"] == 8  # type: ignore[index]


def test_a_move_that_helped_sets_the_wait_back_and_is_recorded() -> None:
    band = Band(ISM)
    quiet_band(band, 0.0)
    plan = ChannelPlan(band, 76, 81, 0.0)
    now = fail(plan, DOWNLINK, 1, 1.0, q=0.0)  # (the downlink does well: it stays)
    now = fail(plan, UPLINK, BAD_WINDOWS, now)
    wifi_beside(band, now)
    move = plan.step(now)
    assert move is not None and move.downlink == 81 and abs(move.uplink - 76) > 11
    plan.done(move.at)
    now = fail(plan, UPLINK, 1, move.at + SETTLE_S, q=0.99)  # (the mobile not there yet)
    now = fail(plan, UPLINK, JUDGE_WINDOWS, now, q=0.01)
    judged = plan.stats(now)["judged"][UPLINK]  # type: ignore[index]
    assert judged["helped"] == 1 and judged["not_helped"] == 0  # type: ignore[index]
    assert plan.wait == WAIT_S
    assert any("kept" in what for _, _, what in plan.decisions.listed(now))


def test_a_direction_with_no_window_near_a_failing_one_moves_with_it() -> None:
    """Stream mode's downlink carries the uplink's ACKs and little else: no window of its
    own; 5 channels from an uplink under Wi-Fi, it goes with it."""
    band = Band(ISM)
    quiet_band(band, 0.0)
    plan = ChannelPlan(band, 76, 81, 0.0)
    now = fail(plan, UPLINK, BAD_WINDOWS, 2.0)
    wifi_beside(band, now)
    move = plan.step(now)
    assert move is not None and move.downlink != 81 and move.uplink != 76
    assert "no window" in move.why


def test_nowhere_quieter_nothing_moves() -> None:
    """Wi-Fi everywhere the user allows: the channel fails, but no other is better."""
    band = Band(range(60, 84))
    for c in band.allowed:
        for i in range(8):
            band.reading(c, i % 2 == 0, 0.5)
    plan = ChannelPlan(band, 76, 81, 0.0)
    now = fail(plan, DOWNLINK, 4, 1.0)
    assert plan.step(now) is None and plan.downlink == 81
