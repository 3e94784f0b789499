"""The testbed with both nodes on the rf24 backend: the daemons drive their radios with the
real pyrf24, whose SPI and GPIO calls reach emulated chips (firmware/native/spidev_preload.c),
attached to the air like every emulated radio. Ping, NAT and stock iperf3 as on `sim`, in both
link modes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_testbed import pytestmark  # noqa: F401  (same root/tool requirements)

from longge import testbed
from longge.air.wire import query


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_the_link_runs_on_real_pyrf24_over_emulated_chips(tmp_path: Path, mode: str) -> None:
    testbed.down()
    up = subprocess.run(
        [sys.executable, "-m", "longge", "testbed", "up", "--backend", "rf24", "--mode", mode],
        capture_output=True,
        text=True,
        timeout=120,
    )
    server = None
    try:
        assert up.returncode == 0, up.stdout[-1500:] + up.stderr[-1500:]
        ping = subprocess.run(
            # through both radios and the base's NAT to the "internet" host
            ["ip", "netns", "exec", "lg-mobile", "ping", "-c", "5", "-i", "0.2", "10.99.0.1"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert ping.returncode == 0, ping.stdout
        server = subprocess.Popen(
            ["ip", "netns", "exec", "lg-base", "iperf3", "-s", "-p", "5402"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        client = ("iperf3", "-c", testbed.BASE_IP, "-p", "5402", "-u", "-b", "300k", "-l", "1400")
        load = subprocess.run(
            ["ip", "netns", "exec", "lg-mobile", *client, "-t", "3", "-J"],
            capture_output=True,
            text=True,
            timeout=40,
        )
        assert load.returncode == 0, load.stdout[-800:]
        got = json.loads(load.stdout)["end"]["sum_received"]["bits_per_second"]
        assert got > 0.9 * 300_000, got  # carried (a capacity figure is the bench's business)
        # every radio process runs pyrf24's own extension through the spidev library
        state = json.loads(testbed.paths()["state"].read_text())
        kids = subprocess.run(
            ["pgrep", "-P", f"{state['pids']['base']},{state['pids']['mobile']}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        assert len(kids) == 4, kids
        for pid in kids:
            maps = Path(f"/proc/{pid}/maps").read_text()
            assert "pyrf24" in maps and "longge-spidev.so" in maps, pid
        conf = (testbed.STATE_DIR / "mobile.toml").read_text()
        assert 'backend = "rf24"' in conf and 'driver = "pyrf24"' in conf
        assert f'mode = "{mode}"' in conf
        radios = query(str(testbed.paths()["air"]))["air"]["radios"]
        # stream mode: the chips never acknowledged, and no stay in TX mode was over 4 ms
        assert all(r.get("tx_mode_over_4ms", 0) == 0 for r in radios.values())
        if mode == "stream":
            assert all(r.get("acks_sent", 0) == 0 for r in radios.values())
    finally:
        if server is not None:
            server.kill()
            server.wait(5)
        testbed.down()
