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
)

PART = bytes((0x01,)) + b"x" * 31  # a frame of a packet, not its last
END = bytes((LAST,)) + b"x" * 31


def listening(t: ListenTiming, now: float) -> float:
    """Idle until it listens; the time it did."""
    assert t.turn(False, b"m", True, lambda: True, now) is None  # (idle from now)
    now += 2 * LISTEN_AFTER_S  # (past it, whatever the rounding)
    assert t.turn(False, b"m", True, lambda: True, now) == Listen()
    assert t.listening
    return now


def test_it_listens_once_idle_and_not_without_a_descriptor() -> None:
    t = ListenTiming()
    assert t.turn(False, b"m", True, lambda: True, 0.0) is None
    assert t.wake_at(0.0) == LISTEN_AFTER_S  # (the pump wakes for it)
    assert t.turn(False, b"m", True, lambda: False, LISTEN_AFTER_S) is None  # (FIFO not empty)
    blind = ListenTiming()
    blind.turn(False, b"m", False, lambda: True, 0.0)
    assert blind.turn(False, b"m", False, lambda: True, 1.0) is None and blind.deaf(1.0)


def test_a_packets_rest_is_waited_for_and_then_the_base_sends() -> None:
    t = ListenTiming()
    now = listening(t, 0.0)
    t.heard(PART, now)
    assert t.turn(True, b"m", True, lambda: True, now + HOLD_S / 2) is None  # (held)
    t.heard(END, now + 0.001)
    assert t.turn(True, b"m", True, lambda: True, now + 0.001) == Transmit(b"m")
    assert not t.listening and t.last_end == now + 0.001


def test_frames_that_never_end_a_packet_hold_the_downlink_4_ms_at_most() -> None:
    t = ListenTiming()
    now = listening(t, 0.0)
    first, stopped = now + 0.0005, None
    for _ in range(200):  # a frame every half millisecond, never a packet's last
        now += 0.0005
        t.heard(PART, now)
        if t.turn(True, b"m", True, lambda: True, now) == Transmit(b"m"):
            stopped = now
            break
    # (within a frame's period of HOLD_MAX_S: the cut comes with the frame that passes it)
    assert stopped is not None and stopped - first <= HOLD_MAX_S + 0.0005 + 1e-9
    assert t.counters.holds_cut == 1
    # for HOLD_GAP_S it holds for none
    later = listening(t, stopped)
    t.heard(PART, later)
    assert t.hold_until == 0.0 and later < stopped + HOLD_GAP_S
