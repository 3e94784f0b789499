"""protocol/part.py: the pump sleeps till the soonest of its parts' moments, never past
``longest``, never a negative time; a part that needs no turn (None) and one the process
does not run (None in place of the part) move nothing."""

from __future__ import annotations

import pytest

from longge.protocol.part import wake_in


class At:
    def __init__(self, at: float | None) -> None:
        self.at = at
        self.asked: list[float] = []

    def wake_at(self, now: float) -> float | None:
        self.asked.append(now)
        return self.at


def test_the_soonest_part_decides() -> None:
    parts = [At(10.3), At(None), None, At(10.05), At(10.2)]
    assert wake_in(10.0, 0.25, parts, None) == pytest.approx(0.05)
    assert all(p.asked == [10.0] for p in parts if p is not None)  # (each asked, with now)


def test_the_modes_own_moment_and_longest() -> None:
    assert wake_in(10.0, 0.25, [At(10.2)], 10.1) == pytest.approx(0.1)
    assert wake_in(10.0, 0.25, [At(None)], None) == pytest.approx(0.25)
    assert wake_in(10.0, 0.25, [At(11.0)], 12.0) == pytest.approx(0.25)


def test_a_moment_passed_is_now() -> None:
    assert wake_in(10.0, 0.25, [At(9.0)], None) == 0.0
    assert wake_in(10.0, 0.25, [At(float("-inf"))], None) == 0.0  # (a retry never set)
    assert wake_in(10.0, 0.25, [], 9.5) == 0.0
