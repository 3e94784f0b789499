"""The modem's AVR image on a simulated ATmega328P (firmware/sim, simavr): the very .elf
``make -C firmware avr`` builds, run cycle by cycle with its USART fed at the wire's pace.

Simulated time does not depend on this machine's load: these runs give the same figures on a
busy machine as on a quiet one, so they can assert on them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from longge.chip.datasheet import T_SETTLE_NS, LinkTiming
from longge.errors import ConfigError
from longge.modembench import (
    FIRMWARE,
    RAM_BUDGET_BYTES,
    ModemBenchPlan,
    build_image,
    simulate,
)

ROOT = Path(__file__).resolve().parent.parent


def _need_simavr() -> None:
    missing = [
        what
        for what, ok in (
            ("avr-gcc (gcc-avr avr-libc binutils-avr)", shutil.which("avr-gcc")),
            ("libsimavr-dev", Path("/usr/include/simavr/sim_avr.h").exists()),
        )
        if not ok
    ]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"missing on CI (./run.sh installs them as root): {', '.join(missing)}")
        pytest.skip(f"not installed: {', '.join(missing)}")


@pytest.fixture(scope="module")
def image() -> Path:
    _need_simavr()
    return build_image()


def assert_clean(r: dict[str, Any]) -> None:
    """What every run of a sound image shows: it answered to the end, lost no byte from the
    host, and its RAM (static and the deepest stack) stayed within the budget."""
    assert r["completed"], r
    assert r["uart_overruns"] == 0, r
    assert r["ring_drops"] == 0, r
    assert r["frame_errors"] == 0, r
    assert r["static_ram_bytes"] + r["stack_max_bytes"] <= RAM_BUDGET_BYTES, r


def test_the_air_in_the_simulator_keeps_the_datasheet_times(image: Path) -> None:
    """The simulator's air (firmware/sim/vair.c) against longge/chip/datasheet.py."""
    for rate, code in (("2M", "2M"), ("1M", "1M"), ("250k", "250k")):
        t = LinkTiming(rate)
        esb = simulate(image, seconds=0.05, rate=code)
        assert esb["air_frames_per_s"] == pytest.approx(1e9 / t.ack_cycle_ns, abs=0.1)
        noack = simulate(image, seconds=0.05, rate=code, no_ack=True)
        k = t.stream_burst_frames
        want = k * 1e9 / (T_SETTLE_NS + k * t.toa_data_ns)
        assert noack["air_frames_per_s"] == pytest.approx(want, abs=0.1)
        assert noack["air"]["tx_mode_over_4ms"] == 0  # the image keeps the 4 ms rule itself


def test_the_image_answers_version_and_settings(image: Path) -> None:
    r = simulate(image, seconds=0.1)
    header = (FIRMWARE / "src" / "modem.h").read_text()
    version = [
        int(re.search(rf"MODEM_VERSION_{p} (\d+)", header).group(1)) for p in ("MAJOR", "MINOR")
    ]  # type: ignore[union-attr]
    assert r["version"] == version
    assert (r["chip_ok"], r["plus"], r["config_ok"]) == (1, 1, 1)
    assert r["depth"] == 3 + 16  # the chip's FIFO and the modem's queue
    assert r["modem_counters"]["bad_args"] == 0 and r["host"]["errors"] == 0
    assert_clean(r)


@pytest.mark.parametrize("no_ack", [False, True], ids=["esb", "no-ack"])
def test_frames_stream_both_ways_whole_and_in_order(image: Path, no_ack: bool) -> None:
    tx = simulate(image, seconds=0.5, direction="tx", no_ack=no_ack)
    assert_clean(tx)
    assert tx["frames"] > 100
    assert tx["air"]["chip_bad_frames"] == 0  # each payload the host sent, in order
    assert tx["air"]["tx_mode_over_4ms"] == 0
    rx = simulate(image, seconds=0.5, direction="rx", no_ack=no_ack)
    assert_clean(rx)
    assert rx["frames"] > 100
    assert rx["host"]["rx_corrupt"] == 0
    if no_ack:  # the peer floods a full FIFO: what is lost there is a gap, never a bad frame
        assert rx["host"]["rx_gaps"] <= rx["air"]["peer_fifo_drops"]
    else:  # with acknowledgements nothing is lost
        assert rx["host"]["rx_gaps"] == 0
        # (but for what was still on its way when the counters were asked for)
        assert 0 <= rx["air"]["peer_frames"] - rx["modem_counters"]["rx_frames"] <= 3


def test_garbage_at_full_baud_is_counted_and_the_stream_goes_on(image: Path) -> None:
    """300 pieces of what the native build's fuzz test sends (noise, truncated frames,
    oversized messages, bad CRCs, unknown types), each at full baud and followed by a V:
    every V is answered, the UART never overruns, the stack stays within bounds, and the
    stream that follows is whole and in order. A 2 Mbaud flood is more than 16 MHz can
    decode, so some garbage is lost from the 256-byte ring: counted, never a crash."""
    clean = simulate(image, seconds=0.5)
    r = simulate(image, seconds=0.5, fuzz=300)
    assert r["host"]["garbage_sent"] == 300 and r["host"]["answers_after_garbage"] == 300
    assert r["uart_overruns"] == 0 and r["frame_errors"] == 0 and r["completed"]
    assert r["static_ram_bytes"] + r["stack_max_bytes"] <= RAM_BUDGET_BYTES
    c = r["modem_counters"]
    judged = c["bad_crc"] + c["bad_cobs"] + c["bad_length"] + c["unknown"]
    # every piece is judged bad once, unless lost bytes merged it with its neighbour
    assert 250 <= judged <= 300, c
    assert r["ring_drops"] > 0  # the flood is counted where it is lost
    assert c["bad_args"] == 0  # nothing garbled into a valid request
    assert r["air"]["chip_bad_frames"] == 0
    assert abs(r["frames"] - clean["frames"]) <= 2  # the window starts after the garbage


def test_a_slowed_image_overruns_and_the_check_fails(image: Path) -> None:
    """The overrun count can fail: an image that keeps interrupts off for 30 µs a turn."""
    slow = build_image(extra_cflags="-DLONGGE_TEST_SLOW", tag="slow")
    r = simulate(slow, seconds=0.3)
    assert r["uart_overruns"] > 0
    with pytest.raises(AssertionError):
        assert_clean(r)


def test_a_wire_at_another_baud_rate_is_frame_errors_not_frames(image: Path) -> None:
    r = simulate(image, seconds=0.1, baud=1_000_000)  # the image runs at 2 Mbaud
    assert r["frame_errors"] > 0 and not r["completed"] and r["frames"] == 0


def test_modem_bench_prints_the_figures_and_refuses_bad_options(image: Path) -> None:
    run = [sys.executable, "-m", "longge", "modem-bench", "--seconds", "0.2"]
    r = subprocess.run([*run, "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in (
        "frames_per_s",
        "air_frames_per_s",
        "uart_overruns",
        "stack_max_bytes",
        "idle_share",
    ):
        assert key in out
    assert set(out["directions"]) == {"tx", "rx"}
    assert out["frames_per_s"] == min(w["frames_per_s"] for w in out["directions"].values())
    bad = subprocess.run([*run, "--baud", "115200"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode != 0 and "--baud" in bad.stderr and "117647" in bad.stderr
    with pytest.raises(ConfigError, match="--seconds"):
        ModemBenchPlan(seconds=0)
    with pytest.raises(ConfigError, match="--rate"):
        ModemBenchPlan(rate="3M")
