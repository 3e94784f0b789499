"""The daemon on a real kernel TUN (root: each test's daemon runs in a network namespace of its
own, which goes with its process)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import subprocess
from pathlib import Path

import pytest

from longge.config import NodeConfig
from longge.daemon.supervisor import Supervisor
from longge.radio.options import RadioOptions
from longge.tun import LinuxTun, TunError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (TUN, a network namespace)")

CLONE_NEWNET = 0x40000000  # unshare(2)


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_deleted_interface_stops_the_daemon_with_its_name(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """``ip link del`` under a running daemon: its descriptor reads EBADFD from then on, and
    select() finds it readable every time. Once that killed the TX process with a traceback,
    again every second after each restart, while the daemon ran on with no interface."""
    cfg = NodeConfig(
        tun="lgone0",
        key=bytes(range(1, 33)),
        state_dir=str(tmp_path),
        control=str(tmp_path / "c.sock"),
        air=air_path,
        radio=RadioOptions(mode=mode),
    )
    ctx = multiprocessing.get_context("fork")
    said, say = ctx.Pipe(duplex=False)

    def daemon() -> None:
        if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) != 0:
            say.send(f"unshare: errno {ctypes.get_errno()}")
            return
        sup = Supervisor(cfg, LinuxTun(cfg.tun, cfg.mtu), network=False)
        sup.start()
        subprocess.run(["ip", "link", "set", cfg.tun, "up"], check=True)
        sup.step(0.5)
        subprocess.run(["ip", "link", "del", cfg.tun], check=True)
        try:
            sup.run()
            say.send("ran on")
        except TunError as exc:
            say.send(f"TunError: {exc}")

    proc = ctx.Process(target=daemon)
    proc.start()
    try:
        assert said.poll(30), "the daemon neither stopped nor said why within 30 s"
        message = said.recv()
        assert message.startswith("TunError"), message
        assert "lgone0" in message and "deleted" in message
        proc.join(10)
        assert proc.exitcode == 0
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(10)


def test_the_base_role_is_undone_forwarding_as_it_was(tmp_path: Path) -> None:
    """The base turns IP forwarding on; it stayed on after the daemon stopped (a router with no
    daemon). In a network namespace of its own, with forwarding off: on while set up, off after."""
    from longge.roles import IP_FORWARD, setup_base

    cfg = NodeConfig(role="base", insecure=True, state_dir=str(tmp_path), nat=False)
    ctx = multiprocessing.get_context("fork")
    said, say = ctx.Pipe(duplex=False)

    def base() -> None:
        if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) != 0:
            say.send(["unshare failed"])
            return
        Path(IP_FORWARD).write_text("0\n")
        undo = setup_base(cfg)
        seen = [Path(IP_FORWARD).read_text().strip()]
        for u in reversed(undo):
            u()
        say.send([*seen, Path(IP_FORWARD).read_text().strip()])

    proc = ctx.Process(target=base)
    proc.start()
    try:
        assert said.poll(30)
        assert said.recv() == ["1", "0"]
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(10)
