"""The testbed with both nodes on the rf24 backend: the daemons drive their radios with the
real pyrf24, whose SPI and GPIO calls reach emulated chips (firmware/native/spidev_preload.c),
attached to the air like every emulated radio. Ping, NAT and stock iperf3 as on `sim`, in both
link modes."""

from __future__ import annotations

import json
import os
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
        # the radio processes slept on their IRQ pins (README's wiring), and woke on edges
        for role in ("mobile", "base"):
            st = testbed.status()["nodes"][role]
            assert st["tx"]["waits_on"] == st["rx"]["waits_on"] == "irq", st
        assert testbed.status()["nodes"]["base"]["rx"]["irq_edges"] > 0
    finally:
        if server is not None:
            server.kill()
            server.wait(5)
        testbed.down()


def test_a_chip_that_goes_and_comes_back_is_retried_with_the_interface_up(
    tmp_path: Path,
) -> None:
    """README: with a radio missing the daemon keeps its interface up and retries. The link
    runs; then the chips stop answering (MISO stuck high: LONGGE_CHIP read from a file every
    0.2 s of SPI use): the TX radios hit MAX_RT, are brought up again and refused with the
    message and its fix, longge0 stays up; the chips answer again and pings flow, with no
    process restarted."""
    testbed.down()
    fault = tmp_path / "chip"
    fault.write_text("plus\n")
    env = {**os.environ, "LONGGE_CHIP": f"@{fault}"}
    up = subprocess.run(
        [sys.executable, "-m", "longge", "testbed", "up", "--backend", "rf24"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    try:
        assert up.returncode == 0, up.stdout[-1500:] + up.stderr[-1500:]
        fault.write_text("absent\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st = testbed.status()["nodes"]["mobile"]
            if "does not answer on SPI" in st.get("tx", {}).get("state", ""):
                break
            time.sleep(0.5)
        assert "does not answer on SPI" in st["tx"]["state"], st
        assert "3.3 V" in st["tx"]["state"]  # the message carries what to check
        link = subprocess.run(
            ["ip", "netns", "exec", "lg-mobile", "ip", "-o", "link", "show", "longge0"],
            capture_output=True,
            text=True,
        )
        assert link.returncode == 0 and "UP" in link.stdout, link.stdout
        attempts = st["tx"]["radio_attempts"]
        fault.write_text("plus\n")
        ping = subprocess.run(
            ["ip", "netns", "exec", "lg-mobile", "ping", "-c", "3", "-w", "30", "10.24.0.1"],
            capture_output=True,
            text=True,
            timeout=40,
        )
        assert ping.returncode == 0, ping.stdout
        st = testbed.status()["nodes"]["mobile"]
        assert st["tx"]["state"] == st["rx"]["state"] == "up"
        assert st["tx"]["radio_attempts"] > attempts
        assert all(p["restarts"] == 0 for p in st["processes"].values()), st["processes"]
    finally:
        testbed.down()
