"""End to end, as root: the testbed in network namespaces, real kernel, real iperf3 and curl,
the real daemons over the emulated air. Builds it, passes traffic both ways, tears it down."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import required
from fielddoc import assert_documented

from longge import testbed
from longge.radio.options import downlink_channel

NEEDS = ("ip", "ping", "iperf3", "curl", "iptables", "tmux")


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, TUN)"
    missing = [t for t in NEEDS if shutil.which(t) is None]
    if missing:
        return f"missing tools: {', '.join(missing)} (./run.sh installs them when run as root)"
    return None


reason = _skip_reason()
pytestmark = required(reason, "the testbed test")


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "longge", *args], capture_output=True, text=True, timeout=timeout
    )


def in_ns(ns: str, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def bed() -> Iterator[None]:
    testbed.down()
    up = cli("testbed", "up")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "testbed UP" in up.stdout
        yield
    finally:
        down = cli("testbed", "down")
        assert down.returncode == 0, down.stderr
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert not any(ns in left for ns in testbed.NAMESPACES), left


def test_status_reports_both_nodes_up(bed: None) -> None:
    r = cli("testbed", "status", "--json")
    st = json.loads(r.stdout)
    assert r.returncode == 0 and st["up"]
    assert st["nodes"]["mobile"]["radio"]["rate"] == "2M"
    assert st["nodes"]["base"]["node"]["address"] == "10.24.0.1/24"
    status = cli("status", "--json")
    assert status.returncode == 0
    assert_documented(json.loads(status.stdout), "status --json")  # docs/results.md
    # the typed view reads the same object
    from longge.daemon.status import DaemonClient

    typed = DaemonClient(str(testbed.paths()["mobile"])).status()
    assert typed.node.role == "mobile" and typed.link == "up" and typed.secured
    assert len(typed.tx.queue_delay_hist) == len(typed.tx.queue_delay_edges_ms) + 1 > 1


def test_ping_the_base_station(bed: None) -> None:
    r = in_ns("lg-mobile", "ping", "-c", "10", "-i", "0.05", "-W", "2", "10.24.0.1")
    assert r.returncode == 0, r.stdout
    # ARC 2 on a busy 2-core CI machine may lose a frame now and then; a ping is allowed to.
    received = int(r.stdout.split(" received")[0].rsplit(" ", 1)[-1])
    assert received >= 8, r.stdout


def test_no_ping_waits_for_a_sleeping_sender(bed: None) -> None:
    """300 pings, 20 ms apart (the link idle between them): none may come back a quarter of a
    second late. The TX process once took the news that its FIFO had drained while looking at
    the chip just before sleeping, and then slept its whole 0.25 s timeout with a packet half
    loaded: a run of pings came back 210-410 ms late in 3 of 4 shell runs and 2 of 3 runs of
    this test. A busy machine delays a ping by a few ms, not by 150."""
    r = in_ns("lg-mobile", "ping", "-q", "-c", "300", "-i", "0.02", "-W", "2", "10.24.0.1")
    assert r.returncode == 0, r.stdout
    worst_ms = float(r.stdout.split("rtt min/avg/max/mdev = ")[1].split("/")[2])
    assert worst_ms < 150, r.stdout


def test_large_ping_through_nat_to_the_internet_host(bed: None) -> None:
    r = in_ns("lg-mobile", "ping", "-c", "3", "-i", "0.3", "-s", "1400", "-W", "3", "10.99.0.1")
    assert r.returncode == 0, r.stdout
    # lg-inet has no route back to the radio network: the reply came through the NAT.
    routes = in_ns("lg-inet", "ip", "route").stdout
    assert "10.24.0.0" not in routes


def test_nothing_beyond_the_link_reaches_in(bed: None) -> None:
    """Issue 39: the measurement servers listen on the base's link address only and not as
    root; the base forwards the link to its uplink and the replies back, nothing else (a host
    upstream that routes the link's subnet through the base reaches no mobile); the air's
    socket is root's and its group's."""
    listening, deadline = "", time.monotonic() + 20
    while ":5201 " not in listening and time.monotonic() < deadline:  # (a test may hold it)
        listening = in_ns("lg-base", "ss", "-Hlntup").stdout
        time.sleep(0.2)
    ours = [ln for ln in listening.splitlines() if ":5201 " in ln or ":7770 " in ln]
    assert len(ours) == 2 and all("10.24.0.1:" in ln for ln in ours), listening
    for pid in {ln.split("pid=")[1].split(",")[0] for ln in ours}:
        uid = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if "Uid" in x)
        assert "\t0\t" not in uid + "\t", uid
    fwd = in_ns("lg-base", "iptables", "-S", "FORWARD").stdout.splitlines()
    assert fwd[1] == "-A FORWARD -j LONGGE-longge0", fwd
    chain = in_ns("lg-base", "iptables", "-S", "LONGGE-longge0").stdout.splitlines()
    assert chain[-3:] == [
        "-A LONGGE-longge0 -i longge0 -j DROP",
        "-A LONGGE-longge0 -o longge0 -j DROP",
        "-A LONGGE-longge0 -j DROP",  # (lg-base forwarded nothing before the daemon)
    ]
    st = json.loads(cli("testbed", "status", "--json").stdout)
    assert st["nodes"]["base"]["forwarding"]["uplink"] == "up0"
    added = in_ns("lg-inet", "ip", "route", "add", "10.24.0.0/24", "via", testbed.UPLINK_IP)
    assert added.returncode == 0, added.stderr
    try:
        r = in_ns("lg-inet", "ping", "-c", "3", "-i", "0.2", "-W", "1", testbed.MOBILE_IP)
        assert r.returncode != 0 and " 0 received" in r.stdout, r.stdout
        r = in_ns("lg-inet", "ping", "-c", "2", "-i", "0.2", "-W", "1", testbed.BASE_IP)
        assert r.returncode != 0, r.stdout  # (the base's link address: not forwarded either)
    finally:
        in_ns("lg-inet", "ip", "route", "del", "10.24.0.0/24")
    assert (testbed.paths()["air"].stat().st_mode & 0o777) == 0o660


def test_the_bases_other_interfaces_forward_as_before_the_daemon(bed: None) -> None:
    """Issue 67: a base whose forwarding was off before the daemon forwards only for the
    link. A third interface in lg-base (a LAN, lg-lan behind it): nothing between it and the
    uplink, either way (before: the daemon's ip_forward = 1 forwarded it); the link still
    reaches the internet host."""
    subprocess.run(["ip", "netns", "del", "lg-lan"], capture_output=True)  # (a run killed)
    peer, via = ("name", "eth0", "netns", "lg-lan"), ("via", testbed.UPLINK_IP)
    try:
        for cmd in (
            ["ip", "netns", "add", "lg-lan"],
            ["ip", "link", "add", "lan0", "netns", "lg-base", "type", "veth", "peer", *peer],
            ["ip", "netns", "exec", "lg-base", "ip", "addr", "add", "10.77.0.1/24", "dev", "lan0"],
            ["ip", "netns", "exec", "lg-base", "ip", "link", "set", "lan0", "up"],
            ["ip", "netns", "exec", "lg-lan", "ip", "addr", "add", "10.77.0.2/24", "dev", "eth0"],
            ["ip", "netns", "exec", "lg-lan", "ip", "link", "set", "eth0", "up"],
            ["ip", "netns", "exec", "lg-lan", "ip", "route", "add", "default", "via", "10.77.0.1"],
            ["ip", "netns", "exec", "lg-inet", "ip", "route", "add", "10.77.0.0/24", *via],
        ):
            done = subprocess.run(cmd, capture_output=True, text=True)
            assert done.returncode == 0, (cmd, done.stderr)
        near = in_ns("lg-lan", "ping", "-c", "1", "-W", "2", "10.77.0.1")
        assert near.returncode == 0, near.stdout  # (the LAN itself works)
        for ns, to in (("lg-lan", testbed.INET_IP), ("lg-inet", "10.77.0.2")):
            r = in_ns(ns, "ping", "-c", "2", "-i", "0.2", "-W", "1", to)
            assert r.returncode != 0 and " 0 received" in r.stdout, (ns, to, r.stdout)
        r = in_ns("lg-mobile", "ping", "-c", "2", "-i", "0.2", "-W", "2", testbed.INET_IP)
        assert r.returncode == 0, r.stdout
    finally:
        in_ns("lg-inet", "ip", "route", "del", "10.77.0.0/24")
        in_ns("lg-base", "ip", "link", "del", "lan0")
        subprocess.run(["ip", "netns", "del", "lg-lan"], capture_output=True)


def test_tcp_with_stock_iperf3_both_ways(bed: None) -> None:
    server = subprocess.Popen(
        ["ip", "netns", "exec", "lg-inet", "iperf3", "-s", "-p", "5301"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        for extra in ([], ["-R"]):  # mobile -> internet, then internet -> mobile
            r = in_ns(
                "lg-mobile",
                "iperf3",
                "-c",
                "10.99.0.1",
                "-p",
                "5301",
                "-t",
                "3",
                "-J",
                *extra,
                timeout=40,
            )
            assert r.returncode == 0, r.stdout[-500:]
            end = json.loads(r.stdout)["end"]
            assert end["sum_received"]["bytes"] > 50_000
            time.sleep(0.5)
    finally:
        server.kill()
        server.wait(5)


def test_http_download_from_the_internet_host(bed: None, tmp_path: Path) -> None:
    www = tmp_path / "www"
    www.mkdir()
    blob = www / "blob.bin"
    blob.write_bytes(os.urandom(60_000))
    server = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            "lg-inet",
            sys.executable,
            "-m",
            "http.server",
            "8088",
            "--bind",
            "10.99.0.1",
            "--directory",
            str(www),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        got = tmp_path / "got.bin"
        for _ in range(50):  # the server needs a moment to listen
            r = in_ns(
                "lg-mobile",
                "curl",
                "-sf",
                "--max-time",
                "20",
                "-o",
                str(got),
                "http://10.99.0.1:8088/blob.bin",
            )
            if r.returncode != 7:  # 7: connection refused
                break
            time.sleep(0.1)
        assert r.returncode == 0, r.stderr
        assert filecmp.cmp(got, blob, shallow=False)
    finally:
        server.kill()
        server.wait(5)


def test_live_radio_change_keeps_the_interface(bed: None) -> None:
    r = cli("radio", "set", "--ard-us", "500", "--arc", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ARD 500 µs ARC 3") == 2  # both nodes
    p = in_ns("lg-mobile", "ping", "-c", "3", "-i", "0.1", "-W", "2", "10.24.0.1")
    assert p.returncode == 0
    bad = cli("radio", "set", "--arc", "40")
    assert bad.returncode == 2 and "arc = 40 is not allowed" in bad.stderr
    assert cli("radio", "set", "--ard-us", "250", "--arc", "2").returncode == 0


def test_a_new_link_mode_returns_once_the_link_is_back(bed: None) -> None:
    """radio set --mode restarts both daemons' radio processes: the command returns when both
    ends hear each other in the new mode, so a ping right after it crosses."""
    try:
        for mode in ("stream", "esb"):
            r = cli("radio", "set", "--mode", mode)
            assert r.returncode == 0, r.stderr
            assert f"link up in {mode} mode" in r.stdout
            p = in_ns("lg-mobile", "ping", "-c", "2", "-i", "0.2", "-W", "1", "10.24.0.1")
            assert p.returncode == 0 and "2 received" in p.stdout, p.stdout
    finally:
        cli("radio", "set", "--mode", "esb")


def test_reverse_loads_the_downlink_and_bidir_both(bed: None, tmp_path: Path) -> None:
    """tTest -R sends base -> mobile over the link, --bidir both ways at once: counted by the
    daemon that sends each direction (the other one carries only iperf3's control and
    keepalives)."""
    from longge.daemon.status import DaemonClient
    from longge.measure.results import ResultsDir
    from longge.measure.runner import testbed_target
    from longge.measure.sweep import TTestPlan
    from longge.measure.ttest import TTest

    target = testbed_target()

    def sent() -> dict[str, int]:
        paths = dict(zip(("mobile", "base"), target.controls, strict=True))
        return {role: DaemonClient(path).status().tx.packets_sent for role, path in paths.items()}

    for direction, loaded in (("down", {"base"}), ("both", {"base", "mobile"})):
        plan = TTestPlan(
            duration=3,
            repeats=1,
            start_bps=200_000,
            max_bps=200_000,
            length=1000,
            direction=direction,
        )
        # A trial that did not count (iperf3 failed it: its control connection timed out on a
        # machine busy with the other worker's tests, once in CI: the base sent 3 packets) is
        # run again once; its errors are in the message if the second fails too.
        for attempt in range(2):
            before = sent()
            out = tmp_path / f"{direction}{attempt}"
            summary = TTest(target, plan, ResultsDir(out)).run()
            after = sent()
            ways = [summary, *([summary["reverse"]] if direction == "both" else [])]
            errors = [e for way in ways for point in way["points"] for e in point["errors"]]
            if not any(point["failed_trials"] for way in ways for point in way["points"]):
                break
        datagrams = 200_000 * 3 // 8000  # 75
        for role in ("base", "mobile"):
            n = after[role] - before[role]
            why = (direction, role, n, errors)
            assert (n >= 0.9 * datagrams) is (role in loaded), why
        # each loaded way carried the load (a way not routed would carry nothing); how much of
        # it is a timing figure: a hog run received 0.87 of 200 kbit/s in 3 s (iperf3 and the
        # daemons starved), so only half is asked for here
        for way in [summary, *([summary["reverse"]] if direction == "both" else [])]:
            assert way["points"][0]["received_bps"] > 0.5 * 200_000, (direction, way["points"])


def test_status_watch_shows_the_rates_change_in_a_terminal(bed: None) -> None:
    """status --watch in a real terminal (tmux): while iperf3 loads the uplink, the screen is
    redrawn in place and the delivered rate it shows changes and reaches the load."""
    import re

    session = f"longge-watch-{os.getpid()}"
    root = Path(__file__).resolve().parents[1]
    cmd = f"cd {root} && {sys.executable} -m longge status --watch --interval 0.5"
    tmux = ["tmux", "-L", session]

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout

    server = subprocess.Popen(
        ["ip", "netns", "exec", "lg-base", "iperf3", "-s", "-p", "5401"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", "132", "-y", "40", cmd], check=True
    )
    screens = []
    try:
        deadline = time.monotonic() + 30
        while "kbit/s delivered" not in screen() and time.monotonic() < deadline:
            time.sleep(0.2)  # the first view (Python starting on a busy machine)
        screens.append(screen())
        client = ("iperf3", "-c", testbed.BASE_IP, "-p", "5401", "-u", "-b", "300k", "-l", "1000")
        load = subprocess.Popen(
            ["ip", "netns", "exec", "lg-mobile", *client, "-t", "6", "--connect-timeout", "3000"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while load.poll() is None and time.monotonic() < deadline:
            time.sleep(1.0)
            screens.append(screen())
        assert load.wait(30) == 0
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        server.kill()
        server.wait(5)
    rates = []
    for shown in screens:
        assert shown.count("LongGe live view") == 1, shown  # redrawn in place, not scrolled
        up = re.search(r"([\d.]+) kbit/s delivered", shown)
        assert up, shown
        rates.append(float(up.group(1)))
    assert "mobile -> base" in screens[-1] and "base -> mobile" in screens[-1]
    # the rate history (left column) went from nothing to the full load while it watched
    history = re.search(r"history ([ ▁▂▃▄▅▆▇█]+?)\s{2,}history", screens[-1])
    assert history and " " in history.group(1) and "█" in history.group(1), screens[-1]
    assert max(rates) > 200, rates  # 300 kbit/s offered, less the moments of ramp-up


def test_the_link_is_secured_and_status_says_so(bed: None) -> None:
    st = cli("status")
    assert st.returncode == 0
    assert st.stdout.count("secure ChaCha20-Poly1305") == 2, st.stdout
    key = testbed.paths()["key"]
    assert oct(key.stat().st_mode & 0o777) == "0o600" and len(key.read_text().strip()) == 64


def test_scan_finds_the_links_channels_and_a_wifi_interferer(bed: None, tmp_path: Path) -> None:
    out = tmp_path / "scan"
    # A look of 200 µs leaves 70 µs after the receiver settles: a carrier of >= 40 µs shows in it
    # ~1 look in 6 on the busy link. 500 µs looks see it more often than not, and 24 sweeps
    # with a traffic that flows before the first (cmd_scan waits for it) never miss it.
    r = cli(
        "scan",
        "--sweeps",
        "24",
        "--dwell-us",
        "500",
        "--traffic",
        "--wifi",
        "1",
        "--duty",
        "0.5",
        "--out",
        str(out),
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.with_suffix(".json").read_text())
    busy = set(data["busy"])
    up = 76  # the testbed's uplink, and its downlink:
    down = downlink_channel(up)
    assert {up, down} <= busy, data["busy"]
    assert len(busy & set(range(1, 24))) >= 15  # Wi-Fi channel 1: 2401..2423 MHz
    assert not busy & set(range(30, 70))  # nothing there
    a, b = data["suggested"]
    assert a not in busy and b not in busy and b <= 83
    assert out.with_suffix(".png").stat().st_size > 1000
    assert "suggested: channels" in r.stdout
    assert_documented(data, "scan")
