"""As root: the testbed with three mobiles on one base (issue 41; ESB): three namespaces,
three daemons with a key each, every mobile reaches the base and the internet host through it,
the base's status has a line per mobile, the three loaded at once share both directions (the
base grants the uplink), and ``down`` leaves nothing behind."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from conftest import required
from fielddoc import assert_documented

from longge import testbed
from longge.measure.model import udp_goodput_bps
from longge.measure.multinode import load_all
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions

N = 3


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, TUN)"
    missing = [t for t in ("ip", "ping", "iptables") if shutil.which(t) is None]
    return f"missing tools: {', '.join(missing)}" if missing else None


pytestmark = required(_skip_reason(), "the testbed test with several mobiles")


def cli(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "longge", *args], capture_output=True, text=True, timeout=timeout
    )


def in_ns(ns: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True, timeout=60
    )


@contextlib.contextmanager
def star_testbed(*options: str) -> Iterator[None]:
    """``testbed up --mobiles N`` with ``options``; down after, leaving no namespace."""
    testbed.down()
    up = cli("testbed", "up", "--mobiles", str(N), *options)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield
    finally:
        down = cli("testbed", "down")
        assert down.returncode == 0, down.stderr
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert "lg-" not in left, left


def mobiles_reach_the_base_and_through_it(base_back: bool = True) -> None:
    """Each mobile pings the base and the internet host; ``base_back``: the base each
    mobile too."""
    for i in range(N):
        ns = f"lg-mobile{i + 1}"
        for dst in (testbed.BASE_IP, testbed.INET_IP):
            r = in_ns(ns, "ping", "-c", "3", "-i", "0.3", "-W", "5", dst)
            assert r.returncode == 0, (ns, dst, r.stdout + r.stderr)
        if base_back:
            r = in_ns("lg-base", "ping", "-c", "3", "-i", "0.3", "-W", "5", testbed.mobile_ip(i))
            assert r.returncode == 0, (i, r.stdout + r.stderr)


def backends() -> set[str]:
    """The radio backends the testbed's nodes say they run."""
    nodes = json.loads(cli("testbed", "status", "--json").stdout)["nodes"]
    return {n["radio"]["backend"] for n in nodes.values()}


@pytest.fixture(scope="module")
def star() -> Iterator[None]:
    with star_testbed():
        yield


def test_every_mobile_reaches_the_base_and_through_it(star: None) -> None:
    mobiles_reach_the_base_and_through_it()


def test_a_mobiles_link_local_address_reaches_that_mobile_only(star: None) -> None:
    """Issue 67: each node's TUN has the link-local address its link address gives
    (fe80::a18:3 for 10.24.0.3) and no other; the base's packet to mobile 2's reaches mobile 2
    (with fe80::/10 for every mobile, mobile 1 got it, sealed under its key)."""
    from longge.tun import link_local

    for i, name in enumerate(testbed.mobile_names(N)):
        own = str(link_local(ipaddress.ip_address(testbed.mobile_ip(i))))
        shown = in_ns(f"lg-{name}", "ip", "-6", "-o", "addr", "show", "dev", "longge0").stdout
        assert shown.count("fe80::") == 1 and f"{own}/64" in shown, shown
        r = in_ns("lg-base", "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", f"{own}%longge0")
        assert r.returncode == 0 and "2 received" in r.stdout, (name, r.stdout)
    base = str(link_local(ipaddress.ip_address(testbed.BASE_IP)))
    r = in_ns("lg-mobile2", "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", f"{base}%longge0")
    assert r.returncode == 0 and "2 received" in r.stdout, r.stdout


def test_the_base_reports_each_mobile(star: None) -> None:
    st = json.loads(cli("testbed", "status", "--json").stdout)
    assert st["up"] and set(st["nodes"]) == {"base", "mobile1", "mobile2", "mobile3"}
    base = st["nodes"]["base"]
    assert [p["name"] for p in base["peers"]] == ["mobile1", "mobile2", "mobile3"]
    assert all(p["link"] == "up" for p in base["peers"]), base["peers"]
    status = cli("status", "--json")
    assert status.returncode == 0
    assert_documented(json.loads(status.stdout), "status --json")
    text = cli("status").stdout
    assert text.count("peer   mobile") == N, text
    # each mobile its own key: the files differ
    keys = {testbed.key_path(n, N).read_text() for n in testbed.mobile_names(N)}
    assert len(keys) == N


def test_three_mobiles_share_the_uplink_and_the_downlink(star: None) -> None:
    """Stock iperf3 from (then to) all three at once, started together, each offered 300
    kbit/s (together 1.8 x what one link carries): every client gets its result (sent freely,
    the mobiles' first datagrams collided and clients failed), and each mobile at least half
    its fair share of what they carried together; the base granted the uplink in turn.
    (Margins, not targets: the shares' figures are tools/multinode_look's.)"""
    bound = udp_goodput_bps(RadioOptions(), 1400, OVERHEAD) / 1000
    for direction in ("up", "down"):
        sh = load_all(direction, N, "300k", 4)
        assert not any(sh.errors), sh
        assert all(k >= 0.5 * sh.total / N for k in sh.kbps), sh
        assert sh.total >= 0.4 * bound, (sh, bound)
    base = json.loads(cli("testbed", "status", "--json").stdout)["nodes"]["base"]
    assert base["tx"]["uplink"]["grants"] > 0, base["tx"]
    for i in range(N):
        mobile = json.loads(cli("testbed", "status", "--json").stdout)["nodes"][f"mobile{i + 1}"]
        assert mobile["tx"]["uplink"]["granted"] == 1, mobile["tx"]


def _state() -> dict[str, object]:
    return json.loads(testbed.paths()["state"].read_text())  # type: ignore[no-any-return]


def _pings(ns: str, dst: str, within_s: float = 40) -> bool:
    """A ping gets through within ``within_s`` (a bound on a failure, not a target)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if in_ns(ns, "ping", "-c", "1", "-W", "2", dst).returncode == 0:
            return True
    return False


@pytest.mark.parametrize("name", ["air", "mobile2", "servers"])
def test_the_keeper_starts_a_killed_process_again(star: None, name: str) -> None:
    """kill -9 of the emulated air, a mobile's daemon or the servers: the keeper starts it
    again, the radios attach to the new air, and every mobile's link carries pings again."""
    pid = _state()["pids"][name]  # type: ignore[index]
    log = testbed.STATE_DIR / "servers.log"
    since = log.stat().st_size
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        st = _state()
        if st["restarts"].get(name, 0) >= 1 and st["pids"][name] != pid:  # type: ignore[attr-defined,index]
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"{name} was not started again: {_state()}")
    for i in range(N):
        assert _pings(f"lg-mobile{i + 1}", testbed.BASE_IP), (name, i)
    if name == "servers":  # (listening again: said in its log after the kill)
        deadline = time.monotonic() + 30
        while "iperf3 server on port" not in log.read_bytes()[since:].decode(errors="replace"):
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
