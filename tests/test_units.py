"""The systemd units we ship: their exposure as systemd itself scores it
(``systemd-analyze security --offline=true``), and the hardening keeps what the daemon needs.

The daemon at work under these restrictions, as near as a machine without systemd as PID 1
allows: ``test_units_run.py``; what each one allows is named beside it in the unit."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import required

ROOT = Path(__file__).resolve().parents[1]
DAEMON_UNITS = ("basestation/longge.service", "mobile/longge.service")
pytestmark = required(
    None if shutil.which("systemd-analyze") else "systemd-analyze missing (apt install systemd)",
    "the units' exposure",
)


def exposure(unit: str) -> float:
    out = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(ROOT / unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = re.search(r"Overall exposure level for \S+: ([\d.]+)", out.stdout + out.stderr)
    assert found, out.stdout[-2000:] + out.stderr[-2000:]
    return float(found.group(1))


@pytest.mark.parametrize("unit", [*DAEMON_UNITS, "basestation/longge-servers.service"])
def test_each_unit_is_exposed_no_more_than_5(unit: str) -> None:
    """Issue 67: the daemon's units scored 9.6 UNSAFE (root, every capability, no sandbox)."""
    assert exposure(unit) <= 5.0


def unit_settings(unit: str) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {}
    for line in (ROOT / unit).read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            got.setdefault(key.strip(), []).append(value.strip())
    return got


@pytest.mark.parametrize("unit", DAEMON_UNITS)
def test_the_hardening_keeps_what_the_daemon_needs(unit: str) -> None:
    """The TUN, routes, forwarding and netfilter (CAP_NET_ADMIN; /proc/sys writable: no
    ProtectKernelTunables), real-time priority (CAP_SYS_NICE, no RestrictRealtime), the
    radios' devices and the TUN's, its state and control directories, ctypes' callbacks (no
    MemoryDenyWriteExecute), its own subprocesses (ip, iptables: netlink)."""
    s = unit_settings(unit)
    caps = set(s["CapabilityBoundingSet"][0].split())
    assert {"CAP_NET_ADMIN", "CAP_SYS_NICE"} <= caps
    for absent in ("ProtectKernelTunables", "RestrictRealtime", "MemoryDenyWriteExecute", "User"):
        assert absent not in s, absent
    devices = {d.split()[0] for d in s["DeviceAllow"]}
    assert {"/dev/net/tun", "char-spi", "char-gpiochip", "char-ttyUSB", "char-ttyACM"} <= devices
    assert s["StateDirectory"] == ["longge"] and s["RuntimeDirectory"] == ["longge"]
    assert "AF_NETLINK" in s["RestrictAddressFamilies"][0]
    assert "AF_UNIX" in s["RestrictAddressFamilies"][0]
