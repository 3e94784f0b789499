"""A trial knows how long the emulated air stood still while it ran, and one that stood still
too long is not trusted (longge.measure.emulator)."""

from __future__ import annotations

from longge.measure.emulator import FROZEN_LIMIT, AirMeter, health, spoilt_reason


def test_a_trial_is_spoilt_by_steal_or_by_a_frozen_air_beyond_the_limits() -> None:
    assert spoilt_reason(0.0, 0.05, 0.0, 3) is None
    assert spoilt_reason(0.049, 0.05, 0.99 * FROZEN_LIMIT * 3000, 3) is None
    assert "CPU steal 6 %" in str(spoilt_reason(0.06, 0.05, 0.0, 3))
    frozen = spoilt_reason(0.0, 0.05, 1.01 * FROZEN_LIMIT * 3000, 3)
    assert frozen is not None and "stood still 30 ms of 3 s" in frozen


def test_without_an_air_there_is_nothing_to_report(tmp_path: object) -> None:
    assert AirMeter(None).delta() == {}
    assert AirMeter("/nonexistent/air.sock").delta() == {}
    assert health(None, "trial", []) is None


def test_a_running_air_reports_its_freezes_and_lag(air_path: str) -> None:
    meter = AirMeter(air_path)
    assert meter.delta() == {"freezes": 0.0, "frozen_ms": 0.0}  # idle: nothing was due
    h = health(air_path, "trial", [])
    assert h is not None and h["server"] in ("rust", "python") and "p99_us" in h["lag_us"]
