"""The daemon on a real kernel TUN (root: each test's daemon runs in a network namespace of its
own, which goes with its process)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from longge.config import NodeConfig, PeerConfig
from longge.daemon.supervisor import Supervisor
from longge.radio.options import RadioOptions
from longge.tun import LinuxTun, TunError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (TUN, a network namespace)")

CLONE_NEWNET = 0x40000000  # unshare(2)


def in_own_namespace(body: Callable[[], Any], seconds: float = 30) -> Any:
    """``body()`` in a forked child in a network namespace of its own (it goes with the
    child): what it returns, or the repr of what it raised. The child must end cleanly."""
    ctx = multiprocessing.get_context("fork")
    said, say = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "unshare")
            say.send(body())
        except Exception as exc:  # (the test says what, instead of waiting for nothing)
            say.send(repr(exc))

    proc = ctx.Process(target=child)
    proc.start()
    try:
        assert said.poll(seconds), f"nothing said within {seconds} s"
        got = said.recv()
        proc.join(10)
        assert proc.exitcode == 0
        return got
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(10)


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_deleted_interface_stops_the_daemon_with_its_name(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """``ip link del`` under a running daemon: its descriptor reads EBADFD from then on, and
    select() finds it readable every time. Once that killed the TX process with a traceback,
    again every second after each restart, while the daemon ran on with no interface."""
    cfg = NodeConfig(
        tun="lgone0",
        peers=(PeerConfig(key=bytes(range(1, 33))),),
        state_dir=str(tmp_path),
        control=str(tmp_path / "c.sock"),
        air=air_path,
        radio=RadioOptions(mode=mode),
    )

    def daemon() -> str:
        sup = Supervisor(cfg, LinuxTun(cfg.tun, cfg.mtu), network=False)
        sup.start()
        subprocess.run(["ip", "link", "set", cfg.tun, "up"], check=True)
        sup.step(0.5)
        subprocess.run(["ip", "link", "del", cfg.tun], check=True)
        try:
            sup.run()
            return "ran on"
        except TunError as exc:
            return f"TunError: {exc}"

    message = in_own_namespace(daemon)  # (30 s: the daemon stopped, or said why)
    assert message.startswith("TunError"), message
    assert "lgone0" in message and "deleted" in message


def test_the_base_role_is_undone_forwarding_as_it_was(tmp_path: Path) -> None:
    """The base turns IP forwarding on; it stayed on after the daemon stopped (a router with no
    daemon). In a network namespace of its own, with forwarding off: on while set up, off after."""
    from longge.roles import IP_FORWARD, setup_base

    cfg = NodeConfig(role="base", insecure=True, state_dir=str(tmp_path), nat=False)

    def base() -> list[str]:
        Path(IP_FORWARD).write_text("0\n")
        undo = setup_base(cfg)
        seen = [Path(IP_FORWARD).read_text().strip()]
        for u in reversed(undo):
            u()
        return [*seen, Path(IP_FORWARD).read_text().strip()]

    assert in_own_namespace(base) == ["1", "0"]


def test_the_mobile_role_gives_back_the_routes_it_replaced(tmp_path: Path) -> None:
    """The mobile's routes through the link replace those of the same prefix and metric 0 (a
    static default route); once the daemon stopped the node had none. In a network namespace
    of its own: the link's routes while set up; after the undo steps (run while the link's
    routes are there, as the daemon runs them), the replaced ones back as they were (a gateway
    on-link, a path MTU and RTT, a multipath route, an unreachable route), a DHCP-like one
    (metric 100) untouched. A route that took the link's place meanwhile stays."""
    from longge.roles import setup_mobile

    nets = ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
    cfg = NodeConfig(
        role="mobile",
        insecure=True,
        state_dir=str(tmp_path),
        tun="lgroute0",
        address="10.24.0.2/24",
        peers=(PeerConfig(address="10.24.0.1"),),
        default_route=True,
        routes=nets,
    )

    def routes() -> list[str]:
        out = []
        for dst in ("default", *nets):
            shown = subprocess.run(
                ["ip", "route", "show", "exact", dst], capture_output=True, text=True
            )
            out += [" ".join(line.split()) for line in shown.stdout.splitlines()]
        return sorted(out)

    def mobile() -> tuple[list[str], ...]:
        for cmd in (
            "link add lgeth0 type veth peer name lgeth1",
            "addr add 10.9.0.2/24 dev lgeth0",
            "link set lgeth1 up",
            "link set lgeth0 up",
            "route add default via 10.9.0.1 dev lgeth0 proto static",
            "route add default via 10.9.0.254 dev lgeth0 metric 100",
            "route add 192.0.2.0/24 nexthop via 10.9.0.1 dev lgeth0 weight 1 "
            "nexthop via 10.9.0.3 dev lgeth0 weight 2",
            "route add 198.51.100.0/24 via 172.16.9.9 dev lgeth0 onlink mtu 1400 rtt 100ms",
            "route add unreachable 203.0.113.0/24",  # a kill switch
            f"tuntap add dev {cfg.tun} mode tun",
            f"addr add {cfg.address} dev {cfg.tun}",
            f"link set {cfg.tun} up",
        ):
            subprocess.run(["ip", *cmd.split()], check=True, capture_output=True)
        before = routes()
        undo = setup_mobile(cfg)
        during = routes()
        for u in reversed(undo):  # the daemon's order: undo, then the TUN goes
            u()
        after = routes()
        # again, and something else takes the link's default route meanwhile: it stays
        undo = setup_mobile(cfg)
        subprocess.run(["ip", "route", "replace", "default", "via", "10.9.0.77"], check=True)
        for u in reversed(undo):
            u()
        newer = routes()
        subprocess.run(["ip", "link", "del", cfg.tun], check=True)
        return (before, during, after, newer)

    got = in_own_namespace(mobile)
    assert isinstance(got, tuple), got
    before, during, after, newer = got
    # (a TUN without its daemon has no carrier: "linkdown")
    for dst in ("default", *nets):
        assert any(r.startswith(f"{dst} via 10.24.0.1 dev lgroute0") for r in during), during
    assert not any("10.9.0.1" in r or "172.16.9.9" in r for r in during), during
    assert any("metric 100" in r for r in during)
    assert after == before, (before, after)
    assert "default via 10.9.0.77 dev lgeth0" in newer, newer
    assert "default via 10.9.0.1 dev lgeth0 proto static" not in newer, newer
