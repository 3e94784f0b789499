"""The TX power chosen live (``adapt``, protocol/power.py): its rules on a virtual clock
against the channel model's frame errors (each PA level's from the path loss, as the air
draws them), and two daemons on an emulated air whose path changes under them."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import running_air
from daemonlink import ip_packet, make_link

from longge.air.loss import AirLoss, frame_error, margin_db
from longge.chip.datasheet import bits_on_air
from longge.protocol import power as pw
from longge.protocol.rate import PROBE_ATTEMPTS
from longge.radio.options import RadioOptions

FRAME_BITS = bits_on_air(32)
WINDOW = 128  # attempts in a window of data (the retry adapter's)
WINDOW_S = 0.05  # a full window's time at 2 Mbit/s under load (about)


class _Channel:
    """Each window's failures drawn from the frame error of the level in force: the path's
    (``path_loss`` dB, 2 Mbit/s) combined with ``per`` that no power helps."""

    def __init__(self, path_loss: float, per: float = 0.0, seed: int = 5) -> None:
        self.path_loss, self.per = path_loss, per
        self.random = random.Random(seed)

    def q(self, level: int) -> float:
        noise = frame_error(margin_db(self.path_loss, level, "2M"), FRAME_BITS)
        return 1 - (1 - noise) * (1 - self.per)

    def failures(self, level: int, attempts: int) -> int:
        q = self.q(level)
        return sum(self.random.random() < q for _ in range(attempts))


def _drive(
    chooser: pw.PowerChooser, channel: _Channel, seconds: float, start: float = 0.0
) -> dict[str, int]:
    """The TX process's part on a virtual clock: a step when one may come, its probes'
    window (PROBE_ATTEMPTS), then windows of data; MAX_RT where a frame failed 16 times in a
    row (judged: ARC 15) or 4 (settled: the adapter's floor, ARC 3). What the data met."""
    now = start
    met = {"attempts": 0, "failures": 0, "max_rt": 0, "probe_windows": 0, "judged_dead": 0}
    while now < start + seconds:
        if chooser.may_step(now):
            chooser.step_down(now)
        if chooser.stage == "probe":
            attempts = PROBE_ATTEMPTS
            met["probe_windows"] += 1
        else:
            attempts = WINDOW
        level = chooser.level
        failures = channel.failures(level, attempts)
        arc = 15 if chooser.stage == "judge" else 3
        max_rt = int(channel.q(level) ** (arc + 1) * (attempts - failures) > 0.5)
        if chooser.stage != "probe":
            met["attempts"] += attempts
            met["failures"] += failures
            met["max_rt"] += max_rt
            met["judged_dead"] += chooser.stage == "judge" and channel.q(level) > 0.5
        now += WINDOW_S
        chooser.window(attempts, failures, max_rt, now)
    return met


def test_where_the_path_is_short_the_power_comes_down_to_the_least_and_costs_nothing() -> None:
    """50 dB at 2 Mbit/s: even −18 dBm is 14 dB above the sensitivity. From 0 dBm, step by
    step to −18 dBm, each step kept (and again after each REFRESH_S); the data met no more
    failures than at the ceiling."""
    chooser = pw.PowerChooser(3, 0.0)
    met = _drive(chooser, _Channel(50.0), 60.0)
    assert chooser.level == 0 and chooser.stage is None, chooser.stats(60.0)
    assert chooser.lowered >= 3 and chooser.failed_steps == 0
    assert chooser.raised <= 60 / pw.REFRESH_S  # (only to measure the ceiling again)
    assert met["failures"] == 0 and met["max_rt"] == 0


def test_where_less_power_fails_its_probes_say_so_and_no_data_is_risked() -> None:
    """66 dB at 2 Mbit/s from −12 dBm (the nodes' default): 4 dB over the sensitivity; at
    −18 dBm 2 dB under (nine attempts in ten fail). Each step down fails on its probes, the
    level is back at once, the next try waits twice as long: in a minute a handful of tries,
    and no window of data at the level that does not work."""
    channel = _Channel(66.0)
    assert channel.q(1) < 0.001 and channel.q(0) > 0.8  # (the model says so)
    chooser = pw.PowerChooser(1, 0.0)
    met = _drive(chooser, channel, 60.0)
    assert chooser.level == 1
    assert 3 <= chooser.failed_steps <= 5, chooser.stats(60.0)  # (2+4+8+16+32 s of waits)
    assert met["judged_dead"] == 0 and met["max_rt"] == 0


def test_loss_no_power_helps_does_not_hold_the_power_up() -> None:
    """10 % frame error that is not the path's (a fading neighbour, collisions): the
    failures at −18 dBm are the same as at 0 dBm, so the power comes down all the same,
    and stays down (no window reads as clearly worse), ten seeds."""
    for seed in range(10):
        chooser = pw.PowerChooser(3, 0.0)
        met = _drive(chooser, _Channel(40.0, per=0.1, seed=seed), 120.0)
        assert chooser.level == 0, chooser.stats(120.0)
        assert chooser.failed_steps <= 1, chooser.stats(120.0)  # (one lost to chance, at most)
        # (and back to the ceiling only to measure it again, every REFRESH_S)
        assert chooser.raised <= chooser.failed_steps + 120 / pw.REFRESH_S, chooser.stats(120.0)
        assert 0.08 < met["failures"] / met["attempts"] < 0.12


def test_a_path_that_worsens_puts_the_ceiling_back_at_once() -> None:
    """Settled at −18 dBm on a short path; the path grows to 70 dB (−18 dBm is now 6 dB
    under the sensitivity, the ceiling 12 dB over): the first window back at the ceiling, and
    the steps down fail on their probes from then on."""
    chooser = pw.PowerChooser(3, 0.0)
    _drive(chooser, _Channel(50.0), 60.0)
    assert chooser.level == 0
    far = _Channel(70.0)
    chooser.window(WINDOW, far.failures(0, WINDOW), 1, 60.05)
    assert chooser.level == 3 and chooser.stage is None
    met = _drive(chooser, far, 60.0, start=60.1)
    assert chooser.level >= 1 and met["judged_dead"] == 0
    assert far.q(chooser.level) < 0.01


def test_a_window_is_clearly_worse_only_beyond_chance() -> None:
    assert not pw.clearly_worse(128, 20, 0.1)  # (12.8 expected: within 4 standard deviations)
    assert pw.clearly_worse(128, 40, 0.1)
    assert not pw.clearly_worse(128, 2, 0.0) and pw.clearly_worse(128, 10, 0.0)


# -- two daemons on an emulated air ------------------------------------------------------------


@pytest.fixture
def air_55db(tmp_path: os.PathLike[str]) -> Iterator[str]:
    """55 dB: at −12 dBm (the nodes' default) 2 Mbit/s is 15 dB over its sensitivity, at
    −18 dBm 9 dB over: nothing lost at either."""
    with running_air(tmp_path, AirLoss(path_loss=55.0)) as path:
        yield path


def _down_then_farther(
    air: str, tmp_path: os.PathLike[str], radio: RadioOptions, collect_s: float
) -> tuple[list[bytes], list[bytes], dict[str, Any]]:
    """Packets go until the mobile's power is at −18 dBm (asserted, ceiling −12 dBm); then the
    path grows to 66 dB and 200 more go: (sent after, got after, the mobile's ``adapt``)."""
    from longge.air import control

    with make_link(air, str(tmp_path), radio=radio) as lk:
        end = time.monotonic() + 20.0
        tag = 1
        power = lk.mobile.status()["tx"]["adapt"]["power"]
        while power["dbm"] != -18 and time.monotonic() < end:
            lk.send(lk.mtun, [ip_packet(1000, tag + i) for i in range(20)], to=lk.btun, timeout=2)
            tag += 20
            power = lk.mobile.status()["tx"]["adapt"]["power"]
        assert power["dbm"] == -18 and power["ceiling_dbm"] == -12, power
        control.apply(air, {"path_loss": 66.0})
        sent: list[bytes] = []
        got: list[bytes] = []
        for _ in range(10):
            batch = [ip_packet(1000, 5000 + len(sent) + i) for i in range(20)]
            got += lk.send(lk.mtun, batch, to=lk.btun, timeout=3.0)
            sent += batch
        got += lk.collect(lk.btun, collect_s)
        # the level in force: a trial of a lower one (every so often) may be on when the
        # status is read, and ends within a window (at most 3 s here). The daemons are
        # stepped meanwhile: their status is what their radio processes last sent (a sleep
        # read the same trial again and again: a fresh clone's run failed so)
        adapt = lk.mobile.status()["tx"]["adapt"]
        end = time.monotonic() + 3.0
        while adapt["power"]["stage"] is not None and time.monotonic() < end:
            lk.pump(0.1)
            adapt = lk.mobile.status()["tx"]["adapt"]
        return sent, got, adapt


def test_two_daemons_lower_the_power_where_it_does_as_well_and_raise_it_when_not(
    air_55db: str, tmp_path: os.PathLike[str]
) -> None:
    """The mobile's TX power comes down to −18 dBm on a short path while packets go; the
    path grows to 66 dB (−18 dBm now under the sensitivity, −12 dBm over): the power is back
    at −12 dBm, the rate stays 2 Mbit/s, and the packets sent meanwhile arrive (the one on its
    way when the path changed may be lost)."""
    radio = RadioOptions(ard_us=250, arc=2, adapt=True)
    sent, got, adapt = _down_then_farther(air_55db, tmp_path, radio, 1.0)
    assert adapt["power"]["dbm"] == -12 and adapt["power"]["raised"] >= 1, adapt["power"]
    assert adapt["rate"]["rate"] == "2M", adapt["rate"]
    assert len(set(got)) >= len(sent) - 1, (len(sent), len(got), adapt)
    assert any("power -12 dBm" in what for _, _, what in adapt["recent"]), adapt["recent"]


def test_a_stream_link_lowers_its_power_and_raises_it_losing_nothing(
    air_55db: str, tmp_path: os.PathLike[str]
) -> None:
    """Stream mode (protocol/power_stream.py): the same path, the mobile's power comes down to
    −18 dBm while packets go (judged on the ARQ's fates); the path grows to 66 dB: back at
    −12 dBm, the rate stays 2 Mbit/s, and the ARQ delivers every packet."""
    radio = RadioOptions(mode="stream", adapt=True)
    sent, got, adapt = _down_then_farther(air_55db, tmp_path, radio, 2.0)
    assert adapt["power"]["dbm"] == -12 and adapt["power"]["raised"] >= 1, adapt["power"]
    assert adapt["rate"]["rate"] == "2M" and adapt["rate"]["fallbacks"] == 0, adapt["rate"]
    assert sorted(set(got)) == sorted(sent), (len(sent), len(got), adapt)
