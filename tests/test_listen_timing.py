"""When a base's TX radio listens between its bursts and how long it holds (protocol/
listen_timing.py), on a fake clock: a stranger's frames that never end a packet hold the
downlink HOLD_MAX_S at most, then none for HOLD_GAP_S; a packet's rest is waited for."""

from __future__ import annotations

from longge.protocol.actions import Listen, Transmit
from longge.protocol.frame import LAST
from longge.protocol.listen_timing import (
    HOLD_GAP_S,
    HOLD_MAX_S,
    HOLD_S,
    LISTEN_AFTER_S,
    ListenTiming,
    ListenTurn,
)

PART = bytes((0x01,)) + b"x" * 31  # a frame of a packet, not its last
END = bytes((LAST,)) + b"x" * 31


def turn(
    t: ListenTiming, work: bool, now: float, waitable: bool = True, empty: bool = True
) -> Listen | Transmit | None:
    """One turn's decision (at most one: the chip's role)."""
    out = t.step(ListenTurn(work, b"m", waitable, lambda: empty), now)
    assert len(out) <= 1
    return out[0] if out else None


def listening(t: ListenTiming, now: float) -> float:
    """Idle until it listens; the time it did."""
    assert turn(t, False, now) is None  # (idle from now)
    now += 2 * LISTEN_AFTER_S  # (past it, whatever the rounding)
    assert turn(t, False, now) == Listen()
    assert t.listening
    return now


def test_it_listens_once_idle_and_not_without_a_descriptor() -> None:
    t = ListenTiming()
    assert turn(t, False, 0.0) is None
    assert t.wake_at(0.0) == LISTEN_AFTER_S  # (the pump wakes for it)
    assert turn(t, False, LISTEN_AFTER_S, empty=False) is None  # (FIFO not empty)
    blind = ListenTiming()
    turn(blind, False, 0.0, waitable=False)
    assert turn(blind, False, 1.0, waitable=False) is None and blind.deaf(1.0)


def test_a_packets_rest_is_waited_for_and_then_the_base_sends() -> None:
    t = ListenTiming()
    now = listening(t, 0.0)
    t.heard(PART, now)
    assert turn(t, True, now + HOLD_S / 2) is None  # (held)
    t.heard(END, now + 0.001)
    assert turn(t, True, now + 0.001) == Transmit(b"m")
    assert not t.listening and t.last_end == now + 0.001


def test_frames_that_never_end_a_packet_hold_the_downlink_4_ms_at_most() -> None:
    t = ListenTiming()
    now = listening(t, 0.0)
    first, stopped = now + 0.0005, None
    for _ in range(200):  # a frame every half millisecond, never a packet's last
        now += 0.0005
        t.heard(PART, now)
        if turn(t, True, now) == Transmit(b"m"):
            stopped = now
            break
    # (within a frame's period of HOLD_MAX_S: the cut comes with the frame that passes it)
    assert stopped is not None and stopped - first <= HOLD_MAX_S + 0.0005 + 1e-9
    assert t.counters.holds_cut == 1
    # for HOLD_GAP_S it holds for none
    later = listening(t, stopped)
    t.heard(PART, later)
    assert t.hold_until == 0.0 and later < stopped + HOLD_GAP_S
