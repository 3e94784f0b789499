"""The emulated channel in the running airs (compiled and Python): a path loss loses frames
as the receiver's sensitivity at the data rate says, and ``./run.sh air set`` changes the
channel of a running air live, for every link or for one node's, laying what it is given
over what each link has."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from longge.air import control, native
from longge.air.loss import AirLoss, frame_error, margin_db
from longge.air.wire import query
from longge.chip.datasheet import bits_on_air
from longge.errors import ConfigError
from longge.radio.options import RadioOptions, configure
from longge.radio.sim import SimRadio
from longge.radiobench import BenchPlan, run_bench

ADDR = b"1Node"


@pytest.fixture(params=["compiled", "python"])
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setenv("LONGGE_AIR_SERVER", "python")
    return str(request.param)


@pytest.fixture
def air(server: str, tmp_path: os.PathLike[str]) -> Iterator[str]:
    path = os.path.join(str(tmp_path), "air.sock")
    proc = native.start(path)
    try:
        yield path
    finally:
        native.stop(proc)


@pytest.mark.parametrize("rate", ["2M", "1M"])
def test_a_path_loss_loses_the_frames_the_sensitivity_says(server: str, rate: str) -> None:
    """83 dB at 0 dBm: 1 dB under 2 Mbit/s's sensitivity (about 7 frames in 10 lost),
    2 dB over 1 Mbit/s's (about 1 in 100): the running air's share of lost attempts is the
    formula's (counts, not times: a busy machine moves neither)."""
    opts = RadioOptions(rate=rate, ard_us=500, arc=15)
    plan = BenchPlan(options=opts, loss=AirLoss(path_loss=83.0), seconds=2.0)
    r = run_bench(plan)
    want_data = frame_error(margin_db(83.0, 3, rate), bits_on_air(opts.payload))
    want_ack = frame_error(margin_db(83.0, 3, rate), bits_on_air(0))
    want = 1 - (1 - want_data) * (1 - want_ack)
    assert r.q_configured == pytest.approx(want, rel=1e-9)
    assert r.attempts > 300
    sd = (want * (1 - want) / r.attempts) ** 0.5
    assert abs(r.q_measured - want) < 5 * sd + 0.005, (r.q_measured, want, r.attempts)


def _radio(air: str, name: str, address: bytes | None = None) -> SimRadio:
    """A radio called ``name``: listening on ``address``, else a sender."""
    radio = SimRadio(air=air, name=name)
    assert radio.begin()
    configure(radio, RadioOptions(rate="2M", ard_us=500, arc=0))
    if address is not None:
        radio.open_rx_pipe(1, address)
        radio.start_listening()
    else:
        radio.stop_listening(ADDR)
    return radio


def _delivered(tx: SimRadio, rx: SimRadio, count: int = 50) -> int:
    """Frames acknowledged of ``count`` written (``rx`` read after each: its FIFO never fills)."""
    ok = 0
    for i in range(count):
        ok += bool(tx.write(bytes([i % 256]) * 32))
        while rx.available():
            rx.read()
    return ok


def test_air_set_changes_one_nodes_links_live_and_keeps_the_rest(air: str) -> None:
    base = _radio(air, "base-tx")
    near = _radio(air, "mobile1-rx", ADDR)
    far = _radio(air, "mobile2-rx", b"2Node")
    try:
        stats = control.apply(air, {"per": 0.01}, interferer="wifi:6:0.2")
        assert stats["loss"]["per"] == stats["loss"]["ack_per"] == 0.01
        assert stats["interferers"][0]["duty"] == 0.2
        # one mobile far away: only its links get the path loss, each keeping per 0.01
        stats = control.apply(air, {"path_loss": 95.0}, node="mobile2")
        links = {(s["tx"], s["rx"]): s for s in stats["links"]}
        assert links[("base-tx", "mobile2-rx")]["path_loss"] == 95.0
        assert links[("mobile2-rx", "base-tx")]["per"] == 0.01
        assert ("base-tx", "mobile1-rx") not in links  # (the near mobile's link: as it was)
        assert stats["loss"]["path_loss"] is None
        # every link again: the far link keeps its path loss, the interferer goes
        stats = control.apply(air, {"per": 0.0, "ack_per": 0.0}, interferer="none")
        links = {(s["tx"], s["rx"]): s for s in stats["links"]}
        assert links[("base-tx", "mobile2-rx")] == {
            "tx": "base-tx",
            "rx": "mobile2-rx",
            "per": 0.0,
            "ack_per": 0.0,
            "burst": 1.0,
            "path_loss": 95.0,
        }
        assert stats["interferers"] == []
        # and the frames meet it: 95 dB at 0 dBm is 13 dB under the sensitivity
        base.stop_listening(b"2Node")
        assert _delivered(base, far) == 0
        base.stop_listening(ADDR)
        assert _delivered(base, near) == 50
        control.apply(air, {"path_loss": None}, node="mobile2")
        base.stop_listening(b"2Node")
        assert _delivered(base, far) == 50
    finally:
        for r in (base, near, far):
            r.close()


def test_air_set_puts_wifi_beside_one_node_and_moves_it_live(air: str) -> None:
    """Wi-Fi 13 (over channels 61..83) near the mobile only: the base's frames die there, a
    frame to a radio of another node gets through; moved to channel 1, every frame does; the
    traffic model's interferer is set the same way."""
    base = _radio(air, "base-tx")
    mobile = _radio(air, "mobile-rx", ADDR)
    other = _radio(air, "base-rx", b"2Node")
    try:
        stats = control.apply(air, {}, node="mobile", interferer="wifi:13:0.5:traffic")
        (w,) = stats["interferers"]
        assert (w["near"], w["model"], w["centre_channel"]) == ("mobile", "traffic", 72)
        # (busy all the time: slots at duty 1; traffic's load changes around its duty)
        control.apply(air, {}, node="mobile", interferer="wifi:13:1.0")
        assert "near mobile only" in control.describe(stats)
        assert _delivered(base, mobile) == 0  # (busy all the time, at the mobile)
        base.stop_listening(b"2Node")
        assert _delivered(base, other) == 50  # (not heard at the base's own radios)
        control.apply(air, {}, interferer="wifi:1:1.0")
        base.stop_listening(ADDR)
        assert _delivered(base, mobile) == 50
    finally:
        for r in (base, mobile, other):
            r.close()


def test_air_set_refuses_what_it_cannot_do_by_name(air: str) -> None:
    radio = _radio(air, "base-tx")
    try:
        with pytest.raises(ConfigError, match="--node"):
            control.apply(air, {"per": 0.1}, node="mobile9")
        with pytest.raises(ConfigError, match="path_loss"):
            control.apply(air, {"path_loss": 500.0})
        with pytest.raises(ConfigError, match="per"):
            control.apply(air, {"per": 2.0})
        with pytest.raises(ConfigError, match="--interferer"):
            control.apply(air, {}, interferer="wifi:20")
        assert query(air)["loss"]["per"] == 0.0  # nothing was half applied
    finally:
        radio.close()


def test_air_set_from_the_command_line(air: str) -> None:
    """``./run.sh air set``'s parser and output (the CLI over control.apply)."""
    run = [sys.executable, "-m", "longge", "air", "set", "--socket", air]
    done = subprocess.run(
        [*run, "--per", "0.05", "--path-loss", "72.5"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "every link: per 0.05, ack_per 0.05, burst 1, path loss 72.5 dB" in done.stdout
    done = subprocess.run([*run, "--path-loss", "none"], capture_output=True, text=True)
    assert "per 0.05, ack_per 0.05, burst 1, no path loss" in done.stdout
    done = subprocess.run([*run, "--path-loss", "far"], capture_output=True, text=True)
    assert done.returncode == 2 and "--path-loss" in done.stderr
