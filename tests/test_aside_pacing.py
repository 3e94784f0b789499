"""A mobile's pacing on the downlink's channel and stream mode's ACK route, on a fake clock
(protocol/aside_pacing.py): the burst and its refill, the pause after refusals doubling to
its cap, when the pump must wake, and when our ACKs go there."""

from __future__ import annotations

import pytest

from longge.protocol.aside_pacing import (
    ACKS_BUSY,
    ACKS_BUSY_S,
    ACKS_REFUSED,
    ASIDE_BURST,
    ASIDE_RATE,
    ASIDE_RETRY_MAX_S,
    ASIDE_RETRY_S,
    AckRoute,
    Pacing,
)


def test_a_burst_then_the_rate() -> None:
    """ASIDE_BURST frames at once, then one each 1 / ASIDE_RATE: the next try is the next
    token's moment, not sooner."""
    pace, now = Pacing(), 10.0
    assert pace.may(now) and pace.next_try(now) is None
    sent = 0
    while pace.has_token():
        pace.sent()
        sent += 1
    assert sent == ASIDE_BURST
    assert not pace.may(now)
    due = pace.next_try(now)
    assert due == pytest.approx(now + 1 / ASIDE_RATE)
    assert not pace.may(due - 1e-4)
    assert pace.may(due + 1e-9) and pace.again_now(due + 1e-9)
    # a long quiet spell refills to the burst, no more
    assert pace.may(due + 60.0) and pace.tokens == ASIDE_BURST


def test_refusals_double_the_pause_up_to_its_cap_and_an_acknowledged_frame_ends_them() -> None:
    pace, now = Pacing(), 5.0
    pauses = []
    for _ in range(8):
        pace.refused(now)
        pauses.append(pace.retry_at - now)
        assert not pace.may(now) and not pace.again_now(now)
        assert pace.next_try(now) == pace.retry_at  # (the pump wakes for it)
    assert pauses[0] == pytest.approx(ASIDE_RETRY_S)
    assert pauses[1] == pytest.approx(2 * ASIDE_RETRY_S)
    assert max(pauses) == pytest.approx(ASIDE_RETRY_MAX_S)
    pace.heard()
    pace.refused(now)
    assert pace.retry_at - now == pytest.approx(ASIDE_RETRY_S)  # (from the first again)


def test_our_acks_stay_off_the_downlinks_channel_while_the_base_sends_to_us() -> None:
    """More than ACKS_BUSY ACKs asked for within ACKS_BUSY_S: the base is sending to us and
    hears nothing there; once they are spread out, they go there again."""
    route, pace, now = AckRoute(), Pacing(), 1.0
    assert not route.here(False, pace, now)  # (none waiting)
    for i in range(ACKS_BUSY):
        route.asked(now + i * 0.001)
    assert route.here(True, pace, now + 0.003)
    route.asked(now + 0.004)
    assert route.sent_to(now + 0.005) and not route.here(True, pace, now + 0.005)
    assert route.here(True, pace, now + ACKS_BUSY_S + 0.001)


def test_after_refusals_in_a_row_our_acks_try_there_only_at_the_next_try() -> None:
    route, pace, now = AckRoute(), Pacing(), 2.0
    for _ in range(ACKS_REFUSED - 1):
        pace.refused(now)
    assert route.here(True, pace, now)  # (not yet enough in a row)
    pace.refused(now)
    assert not route.here(True, pace, now)
    assert route.here(True, pace, pace.retry_at)  # (to learn whether it listens again)
    pace.heard()
    assert route.here(True, pace, now)
