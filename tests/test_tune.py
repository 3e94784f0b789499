"""Retry tuning's pure parts: the model it compares with, and its recommendation rule."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from longge.measure.model import udp_goodput_bps
from longge.measure.results import ResultsDir
from longge.measure.sweep import Target
from longge.measure.tune import Tune, TunePlan, model_capacity, plot_tune
from longge.radio.options import RadioOptions


def test_model_capacity_follows_the_retry_trade_off() -> None:
    short = RadioOptions(ard_us=250, arc=2)
    long = RadioOptions(ard_us=2500, arc=15)
    assert model_capacity(short, 0.0) == pytest.approx(udp_goodput_bps(short, 1400))
    # With q = 0.1 the long setting is clearly slower (DESIGN.md: ~338 vs ~505 frame kbit/s) ...
    ratio = model_capacity(long, 0.1) / model_capacity(short, 0.1)
    assert 0.6 < ratio < 0.8
    # ... and loses almost nothing, while ARC 2 loses ~1e-3 of frames, ~5 % of 47-frame packets.
    assert model_capacity(short, 0.1) < udp_goodput_bps(short, 1400) * 0.9
    assert math.isclose(long.timing().residual_loss(0.1), 1e-16)


def row(ard: int, arc: int, cap: float, rtt: float, loss: float) -> dict[str, object]:
    return {
        "ard_us": ard,
        "arc": arc,
        "capacity_bps": cap,
        "model_capacity_bps": cap,
        "q_measured": 0.1,
        "rtt_p95_05_ms": rtt,
        "rtt_p95_09_ms": rtt,
        "loss_09": loss,
        "model_residual_loss": 0.0,
        "error": "",
    }


def test_recommendation_is_the_fastest_setting_that_keeps_the_rules(tmp_path: Path) -> None:
    t = Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), ResultsDir(tmp_path), 0.1)
    t.idle_rtt_ms = 4.0
    t.rows = [
        row(250, 2, 450e3, 22.0, 0.05),  # fastest, but loses 5 % of packets
        row(250, 15, 440e3, 27.0, 0.0),  # the one
        row(2500, 15, 300e3, 48.0, 0.0),  # RTT p95 too high
        {"ard_us": 500, "arc": 3, "error": "RuntimeError: boom"},
    ]
    s = t.summary()
    assert (s["recommendation"]["ard_us"], s["recommendation"]["arc"]) == (250, 15)
    assert s["rule_met"] and "--ard-us 250 --arc 15" in s["apply"]
    made = plot_tune(s, tmp_path)
    assert all(p.stat().st_size > 1000 for p in made)


def test_resume_reads_the_grid_written_so_far(tmp_path: Path) -> None:
    out = ResultsDir(tmp_path)
    first = Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1)
    assert first.rows == []
    with open(first.grid_csv, "a") as f:
        f.write("250,2,450000,460000,0.1,22,22,0.05,0.001,\n")
    again = Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1)
    assert len(again.rows) == 1 and again.rows[0]["capacity_bps"] == 450000
