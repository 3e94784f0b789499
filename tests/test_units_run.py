"""The daemon at work under its unit's restrictions (issue 67, item 8), as near as this
machine allows: no systemd runs as PID 1 here (nor on CI's), so systemd cannot start the unit.
The testbed's base daemon is started again by hand with what the unit says, read from it:

- its capability bounding set (``CapabilityBoundingSet``) and no new privileges
  (``NoNewPrivileges``), through util-linux's ``setpriv``;
- a read-only system (``ProtectSystem=strict``) with only its ``ReadWritePaths`` (and its state
  and runtime directories) writable, and a private /tmp (``PrivateTmp``), in a mount namespace
  of its own (``unshare``).

Not reproduced: the system-call filter, ``DevicePolicy`` (the cgroup's device list),
``IPAddressDeny`` (BPF on the service's cgroup) and the ``Protect*`` settings for the kernel.
Under the rest it must do its work: its TUN and routes, forwarding and NAT (the mobile reaches
the internet host through it), real-time priority for its radio processes; and the same start
with CAP_NET_ADMIN taken away must fail, said, so that the restrictions are shown to bite."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import required
from test_units import unit_settings

from longge import testbed
from longge.daemon.status import DaemonClient
from longge.testbed_spec import BASE_IP, INET_IP, node_socket

ROOT = Path(__file__).resolve().parents[1]
UNIT = "basestation/longge.service"
pytestmark = required(None if os.geteuid() == 0 else "needs root", "the testbed")
#: The kernel's capability numbers (linux/capability.h) of those the unit keeps.
CAP_BITS = {"net_admin": 12, "net_raw": 13, "sys_nice": 23}

#: Read-only system, its writable paths, a private /tmp; then the capabilities, and the daemon.
#: (A checkout under /tmp, a fresh clone's, is put back into the private /tmp through /mnt of
#: this namespace: the unit runs the daemon from /opt/longge, which no /tmp hides.)
CONFINE = """
set -e
root=$1
shift
for p in "$@"; do
    [ "$p" = -- ] && break
    mkdir -p "$p" && mount --bind "$p" "$p"
done
mount --bind "$root" /mnt
mount -o remount,bind,ro /
mount -t tmpfs tmpfs /tmp
case "$root" in /tmp/*) mkdir -p "$root" && mount --bind /mnt "$root" ;; esac
while [ "$1" != -- ]; do shift; done
shift
caps=$1
shift
exec setpriv --bounding-set "-all,$caps" --inh-caps -all --no-new-privs -- "$@"
"""


def confined(args: list[str], drop: str = "") -> list[str]:
    """``args`` (``ip netns exec NS CMD...``) under the unit's restrictions, less ``drop``."""
    s = unit_settings(UNIT)
    assert s["NoNewPrivileges"] == ["yes"] and s["ProtectSystem"] == ["strict"]
    assert s["PrivateTmp"] == ["yes"]
    caps = [c.removeprefix("CAP_").lower() for c in s["CapabilityBoundingSet"][0].split()]
    caps = [c for c in caps if c != drop]
    writable = [p for v in s.get("ReadWritePaths", []) for p in v.split()]
    writable += [f"/var/lib/{d}" for d in s.get("StateDirectory", [])]
    writable += [f"/run/{d}" for d in s.get("RuntimeDirectory", [])]
    ns, cmd = args[:4], args[4:]
    assert ns[:3] == ["ip", "netns", "exec"], args
    return [
        *ns,
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        CONFINE,
        "confine",
        str(ROOT),
        *writable,
        "--",
        ",".join(f"+{c}" for c in caps),
        *cmd,
    ]


@pytest.fixture
def base_args() -> Iterator[list[str]]:
    """A testbed whose base daemon is gone (the keeper too): its command line."""
    testbed.down()
    testbed.up(testbed.TestbedSpec(), owner="test_units_run")
    try:
        state = json.loads(testbed.paths()["state"].read_text())
        args = list(state["procs"]["base"]["args"])
        testbed.take_away("base")
        yield args
    finally:
        testbed.down()


def ping(ns: str, host: str) -> bool:
    r = subprocess.run(
        ["ip", "netns", "exec", ns, "ping", "-c", "3", "-i", "0.3", "-W", "2", host],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return r.returncode == 0


def test_the_base_daemon_does_its_work_under_its_units_restrictions(
    base_args: list[str], tmp_path: Path
) -> None:
    log = tmp_path / "base.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(confined(base_args), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        up = False
        while time.monotonic() < deadline and proc.poll() is None and not up:
            time.sleep(0.5)
            try:
                st = DaemonClient(str(node_socket("base")), timeout=2).status()
            except Exception:  # (not up yet)
                continue
            up = st.link == "up"
        assert up, log.read_text()[-3000:]
        assert ping("lg-mobile", BASE_IP), log.read_text()[-3000:]
        assert ping("lg-mobile", INET_IP), "no NAT through the confined base"
        raw = DaemonClient(str(node_socket("base")), timeout=2).status().raw
        for side in ("tx", "rx"):
            assert raw[side]["scheduling"].startswith("SCHED_FIFO"), raw[side]["scheduling"]
        # the daemon itself (setpriv exec'd it in place of the shell): only the unit's
        fields = dict(
            line.split(":\t", 1)
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            if ":\t" in line
        )
        want = sum(1 << CAP_BITS[c] for c in CAP_BITS)
        assert int(fields["CapBnd"], 16) == want and fields["NoNewPrivs"] == "1", fields
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_without_cap_net_admin_the_same_start_fails_and_says_so(
    base_args: list[str], tmp_path: Path
) -> None:
    r = subprocess.run(
        confined(base_args, drop="net_admin"), capture_output=True, text=True, timeout=60
    )
    said = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in said, said[-3000:]
    assert "permitted" in said.lower() or "permission" in said.lower(), said[-3000:]
