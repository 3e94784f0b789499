"""Retry tuning's pure parts: the model it compares with, and its recommendation rule."""

from __future__ import annotations

import bisect
import csv
import json
import math
import random
from pathlib import Path

import pytest

from longge.errors import ConfigError
from longge.measure.link import Target
from longge.measure.model import udp_goodput_bps
from longge.measure.report import tune_text
from longge.measure.results import ResultsDir
from longge.measure.tune import (
    GRID_FIELDS,
    Tune,
    failure_rate,
    model_capacity,
    model_rtt_ms,
    packet_service_ms,
)
from longge.measure.tune_plan import TunePlan
from longge.measure.tune_plots import best_and_worst, curve_of, plot_tune, plot_tune_curves
from longge.measure.tune_verdict import mode_verdict
from longge.radio.options import RadioOptions


def test_model_capacity_follows_the_retry_trade_off() -> None:
    short = RadioOptions(ard_us=250, arc=2)
    long = RadioOptions(ard_us=2500, arc=15)
    assert model_capacity(short, 0.0) == pytest.approx(udp_goodput_bps(short, 1400))
    # With q = 0.1 the long setting is clearly slower (docs/design.md §2: ~338 vs ~505) ...
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
        "curve": {
            "load": [[0.6 * cap, 0.6 * cap], [0.9 * cap, 0.9 * cap], [1.3 * cap, cap]],
            "rtt": [[0.5, rtt / 2, rtt], [0.9, rtt / 1.5, rtt]],
        },
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
    r = row(250, 2, 450e3, 22.0, 0.05)
    r["curve"] = json.dumps(r["curve"])
    with open(first.grid_csv, "a", newline="") as f:
        csv.DictWriter(f, GRID_FIELDS, extrasaction="ignore").writerow(r)
    again = Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1)
    assert len(again.rows) == 1 and again.rows[0]["capacity_bps"] == 450000
    assert curve_of(again.rows[0])["load"][2] == [1.3 * 450e3, 450e3]
    assert curve_of({"curve": "not json"}) == {}


def test_model_rtt_is_the_wait_for_the_datagram_in_service() -> None:
    """Check the closed form against a small simulation of the queue it describes: datagrams
    arrive as a Poisson stream and are served one at a time (service S); a probe, served first,
    waits only for the remainder of the service in progress."""
    opts = RadioOptions()
    s_ms = packet_service_ms(opts, 0.0)
    assert s_ms == pytest.approx(1400 * 8 / udp_goodput_bps(opts, 1400) * 1e3)
    rng = random.Random(7)
    for rho in (0.3, 0.5, 0.9):
        t, free_at, starts = 0.0, 0.0, []
        for _ in range(40_000):
            t += rng.expovariate(rho / s_ms)
            starts.append(max(t, free_at))
            free_at = starts[-1] + s_ms
        waits = []
        for _ in range(20_000):  # probes at uniformly random instants
            at = rng.uniform(0, t)
            i = bisect.bisect_right(starts, at) - 1
            in_service = i >= 0 and at < starts[i] + s_ms
            waits.append(starts[i] + s_ms - at if in_service else 0.0)
        measured = sorted(waits)[int(0.95 * len(waits))]
        model = model_rtt_ms(opts, 0.0, rho, 0.0, opts)
        assert model == pytest.approx(measured, rel=0.08, abs=0.3), rho
    # idle: nothing to wait for; a slower setting costs the probe's own frames more
    assert model_rtt_ms(opts, 0.1, 0.0, 3.0, opts) == 3.0
    slow = RadioOptions(ard_us=2500, arc=15)
    assert model_rtt_ms(slow, 0.1, 0.0, 3.0, opts) > 3.5
    assert model_rtt_ms(slow, 0.1, 0.9, 3.0, opts) > model_rtt_ms(opts, 0.1, 0.9, 3.0, opts)


def test_best_and_worst_curves_are_plotted(tmp_path: Path) -> None:
    summary = {
        "idle_rtt_ms": 3.3,
        "grid": [row(250, 15, 467e3, 25.0, 0.0), row(2500, 15, 315e3, 40.0, 0.0)],
        "recommendation": None,
    }
    pairs = best_and_worst(summary)
    assert [(r["ard_us"], label) for label, r in pairs] == [
        (250, "recommended"),
        (2500, "lowest capacity"),
    ]
    made = plot_tune_curves(summary, RadioOptions(), tmp_path)
    assert [p.name for p in made] == ["tune_curves.png", "tune_curves.svg"]
    assert all(p.stat().st_size > 1000 for p in made)


def test_failure_rate_counts_max_rt_as_a_failed_attempt() -> None:
    # ARC 1, q = 0.1, 10 000 frames: 1000 retransmissions, 100 MAX_RT
    assert failure_rate(10_000, 1_000, 100) == pytest.approx(0.1)
    # ARC 0: no retransmissions at all, every failure is a MAX_RT
    assert failure_rate(10_000, 0, 1_000) == pytest.approx(0.1)
    assert failure_rate(0, 0, 0) == 0.0


def test_model_counts_only_the_frames_sent_before_a_packet_is_abandoned() -> None:
    """Against a simulation of the daemon's rule (abandon a packet at its first lost frame):
    the capacity is the loss-free one, slowed by retries, times the packets delivered per frame
    actually put on the air (times frames per packet)."""
    opts = RadioOptions(ard_us=500, arc=1)
    q = 0.1
    t = opts.timing()
    r = t.residual_loss(q)
    frames = math.ceil((1400 + 34) / 31)
    rng = random.Random(11)
    sent = delivered = 0
    for _ in range(20_000):
        for _k in range(frames):
            sent += 1
            if rng.random() < r:
                break
        else:
            delivered += 1
    slow = t.expected_service_ns(q) / t.expected_service_ns(0.0)
    simulated = udp_goodput_bps(opts, 1400) / slow * delivered / sent * frames
    assert model_capacity(opts, q, 1400) == pytest.approx(simulated, rel=0.03)
    # and it is more than charging every packet its full length would give
    assert model_capacity(opts, q, 1400) > udp_goodput_bps(opts, 1400) / slow * (1 - r) ** frames


def test_a_lossy_settings_capacity_stands_only_where_its_points_bracket_it() -> None:
    """A setting that delivers 80 % below saturation and carries at most C = 400 kbit/s (tune's
    loads: 0.6, 0.9, 1.05, 1.3 of C over that share): judged on the loss floor, its loads
    bracket C. A point that saturated well below C (a stall) makes the verdict refuse C and
    name the load, so tune measures it again."""
    from longge.measure.floor import Sample, judge_lossy

    a, c, frames = 0.8, 400e3, 48

    def sample(offered: float, stall: float = 1.0) -> Sample:
        sent = round(offered * 3 / 8 / 1400)
        got = min(a * sent, c * 3 / 8 / 1400) * stall
        return Sample(offered, got * 1400 * 8 / 3, sent, sent - round(got), frames)

    loads = [0.6 * c / a, 0.9 * c / a, 1.05 * c / a, 1.3 * c / a]
    v = judge_lossy([sample(x) for x in loads])
    assert v.verdict.capacity_bps == pytest.approx(c, rel=0.01)
    assert v.loss_floor == pytest.approx(1 - a, abs=0.05)
    v = judge_lossy([sample(x, 0.7 if x == loads[1] else 1.0) for x in loads])
    assert v.verdict.capacity_bps is None and v.verdict.contradicting == (loads[1],)


def test_a_setting_that_loses_packets_at_every_load_is_never_recommended(tmp_path: Path) -> None:
    """ARD 250 µs ARC 2 at 10 % frame error: the highest C but 28 % of its datagrams lost at
    every load. Recommended: the best setting with its floor below the PDR loss; without one,
    the lowest floor, and the line says why."""
    t = Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), ResultsDir(tmp_path), 0.19)
    t.idle_rtt_ms = 4.0
    lossy = {**row(250, 2, 480e3, 12.0, 0.28), "loss_floor": 0.28}
    t.rows = [lossy, {**row(250, 15, 420e3, 30.0, 0.0), "loss_floor": 0.0}]
    s = t.summary()
    assert (s["recommendation"]["ard_us"], s["recommendation"]["arc"]) == (250, 15)
    assert "at most 0.5%" in s["why"] and "1 setting(s) left out" in s["why"]
    t.rows = [lossy, {**row(2500, 2, 180e3, 30.0, 0.30), "loss_floor": 0.30}]
    s = t.summary()
    assert (s["recommendation"]["ard_us"], s["recommendation"]["arc"]) == (250, 2)
    assert "every setting loses more" in s["why"]


def test_a_point_still_spoilt_after_its_repeat_is_never_recommended(tmp_path: Path) -> None:
    """Once such a point (the machine held it back twice) was recommended like any other."""
    t = Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), ResultsDir(tmp_path), 0.1)
    t.idle_rtt_ms = 4.0
    spoilt = {**row(250, 2, 480e3, 22.0, 0.0), "disturbed": "CPU steal 12 %: not counted"}
    t.rows = [spoilt, row(250, 15, 440e3, 27.0, 0.0)]
    s = t.summary()
    assert (s["recommendation"]["ard_us"], s["recommendation"]["arc"]) == (250, 15)
    assert "not counted: CPU steal" in tune_text(s)
    t.rows = [spoilt]
    s = t.summary()
    assert s["recommendation"] is None and "no recommendation" in tune_text(s)
    t.rows = [{"ard_us": 500, "arc": 3, "error": "RuntimeError: boom"}]
    assert plot_tune(t.summary(), tmp_path) == []  # (imshow of nothing raised)


def test_a_mode_verdict_on_an_unknown_loss_compares_nothing() -> None:
    best = row(250, 15, 440e3, 27.0, 0.0)
    stream = {"capacity_bps": 1.3e6, "rtt_p95_09_ms": 12.0, "loss_09": float("nan")}
    assert str(mode_verdict(best, stream)).startswith("not compared")


@pytest.mark.parametrize(
    "text",
    [
        "ard_us,arc\n250,2\n",  # not this version's columns
        "ard_us,arc,capacity_bps,error\n250\n",  # a short row
        "ard_us,arc,capacity_bps,error\nx,2,1,\n",
    ],
)
def test_a_grid_csv_it_cannot_resume_from_is_named(tmp_path: Path, text: str) -> None:
    out = ResultsDir(tmp_path)
    Path(out.path, "grid.csv").write_text(text)
    with pytest.raises(ConfigError) as err:
        Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1)
    assert err.value.key == "grid.csv" and "move it away" in str(err.value)
    Path(out.path, "grid.csv").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError):
        Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1)


def test_a_folder_is_resumed_only_with_the_link_its_grid_was_measured_on(tmp_path: Path) -> None:
    """Once a tune resumed at 1 Mbit/s onto a grid measured at 2 Mbit/s (or secured onto an
    open link's) judged and drew both as one grid."""
    out = ResultsDir(tmp_path)
    first = Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1, overhead=0)
    # a folder with no point measured yet is anybody's
    first = Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1, overhead=28)
    r = row(250, 2, 450e3, 22.0, 0.05)
    r["curve"] = json.dumps(r["curve"])
    with open(first.grid_csv, "a", newline="") as f:
        csv.DictWriter(f, GRID_FIELDS, extrasaction="ignore").writerow(r)
    # the same link: resumed, whatever ARD/ARC it was started with; an overhead not known
    # (the mobile daemon did not answer) is no difference, and does not wipe the one known
    Tune(Target("127.0.0.1"), RadioOptions(ard_us=500, arc=5), TunePlan(), out, 0.1, overhead=28)
    Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1, overhead=None)
    for opts, overhead, q, named in [
        (RadioOptions(rate="1M"), 28, 0.1, "rate '2M' there, '1M' here"),
        (RadioOptions(payload=16), 28, 0.1, "payload"),
        (RadioOptions(), 0, 0.1, "security_overhead"),
        (RadioOptions(), 28, 0.3, "q_hint"),
    ]:
        with pytest.raises(ConfigError) as err:
            Tune(Target("127.0.0.1"), opts, TunePlan(), out, q, overhead=overhead)
        assert err.value.key == "--out" and named in str(err.value)
    Path(out.path, "tune_link.json").write_text("[1")
    with pytest.raises(ConfigError) as err:
        Tune(Target("127.0.0.1"), RadioOptions(), TunePlan(), out, 0.1, overhead=28)
    assert err.value.key == "tune_link.json"
