"""./run.sh doctor on this machine (no radios): clear about it, and non-zero only for real
problems (a config that asks for radios that are not there, a wrong config value)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from longge import doctor
from longge.radio.rf24 import spidev

pytestmark = pytest.mark.skipif(
    os.path.exists(spidev(0)), reason="this machine has an SPI bus: radios may be real"
)


def statuses(checks: list[doctor.Check]) -> dict[str, str]:
    return {c.what: c.status for c in checks}


def test_without_radios_or_config_the_machine_is_fine(tmp_path: Path) -> None:
    checks = doctor.run(None) if not os.path.exists(doctor.DEFAULT_CONFIG) else []
    if not checks:
        pytest.skip(f"{doctor.DEFAULT_CONFIG} exists here")
    s = statuses(checks)
    assert s["radios"] == doctor.INFO and s["node config"] == doctor.INFO
    assert s["python module pyrf24"] == s["iperf3 installed"] == doctor.PASS
    text = doctor.render(checks)
    assert "no radios on this machine" in text and "./run.sh testbed up" in text
    if os.geteuid() == 0:
        assert s["TUN device"] == doctor.PASS
        assert s["real-time scheduling"] == doctor.PASS
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # it tried in a child, not in itself
    assert not [c for c in checks if c.status == doctor.FAIL], text


def test_a_config_that_wants_radios_that_are_missing_fails_with_the_fix(tmp_path: Path) -> None:
    f = tmp_path / "node.toml"
    f.write_text('[radio]\nbackend = "rf24"\n[security]\ninsecure = true\n')
    checks = doctor.run(str(f))
    bad = [c for c in checks if c.status == doctor.FAIL]
    assert [c.what for c in bad] == ["SPI devices"]
    assert "/dev/spidev0.0" in bad[0].detail and "raspi-config" in bad[0].fix
    assert statuses(checks)["link security"] == doctor.WARN


def test_a_wrong_config_value_is_a_problem_named_by_its_key(tmp_path: Path) -> None:
    f = tmp_path / "node.toml"
    f.write_text("[radio]\narc = 99\n")
    checks = doctor.run(str(f))
    bad = [c for c in checks if c.status == doctor.FAIL]
    assert len(bad) == 1 and "radio.arc" in bad[0].detail
    key = tmp_path / "key"
    key.write_text("ab" * 32)
    os.chmod(key, 0o644)
    f.write_text(f'[security]\nkey_file = "{key}"\nstate_dir = "{tmp_path}"\n')
    # a key others can read: the daemon refuses the config, and so doctor fails it (it warned)
    bad = [c for c in doctor.run(str(f)) if c.status == doctor.FAIL]
    assert len(bad) == 1 and "security.key_file" in bad[0].detail, bad
    assert "chmod 600" in bad[0].detail
    os.chmod(key, 0o600)
    s = statuses(doctor.run(str(f)))
    assert s["link security"] == doctor.PASS


def test_with_the_daemon_running_the_radios_are_reported_from_it(
    air_path: str, tmp_path: Path
) -> None:
    """The daemon holds the radios (on a Pi, RF24 holds their CE lines and a second open is
    refused as busy): doctor once probed them anyway and failed both, blaming the wiring. It
    reports them from the running daemon's status now."""
    import contextlib
    import multiprocessing
    import time

    from daemonlink import LINK_KEY

    from longge.config import NodeConfig, PeerConfig
    from longge.daemon.control import ControlError
    from longge.daemon.status import DaemonClient
    from longge.daemon.supervisor import Supervisor
    from longge.tun import MemoryTun

    control = str(tmp_path / "c.sock")
    cfg = NodeConfig(
        peers=(PeerConfig(key=LINK_KEY),), state_dir=str(tmp_path), control=control, air=air_path
    )
    proc = multiprocessing.get_context("fork").Process(
        target=lambda: Supervisor(cfg, MemoryTun("d0"), network=False).run()
    )
    proc.start()
    try:
        deadline = time.monotonic() + 30  # (it is up in a second; this bounds a failure)
        state = None
        while time.monotonic() < deadline and state != ("up", "up"):
            with contextlib.suppress(ControlError):
                st = DaemonClient(control).status()
                state = (st.tx.state, st.rx.state)
            time.sleep(0.1)
        assert state == ("up", "up")
        f = tmp_path / "node.toml"
        f.write_text(
            f'[radio]\nbackend = "rf24"\n[node]\ncontrol = "{control}"\n'
            "[security]\ninsecure = true\n"
        )
        checks = doctor.run(str(f))
        s = statuses(checks)
        assert s["tx radio"] == s["rx radio"] == doctor.PASS, doctor.render(checks)
        assert "held by the running daemon: up" in doctor.render(checks)
        assert "SPI devices" not in s
    finally:
        proc.terminate()
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(10)


def test_a_control_socket_that_does_not_answer_keeps_doctor_off_the_radios(
    tmp_path: Path,
) -> None:
    """Not root, a busy daemon, or a socket a crash left: doctor cannot tell which, and a probe
    of its own would fail on lines a daemon may hold, blaming the wiring. It says so instead."""
    import socket

    control = tmp_path / "c.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(control))  # (never listening: a connection is refused)
    f = tmp_path / "node.toml"
    f.write_text(
        f'[radio]\nbackend = "rf24"\n[node]\ncontrol = "{control}"\n[security]\ninsecure = true\n'
    )
    checks = doctor.run(str(f))
    s = statuses(checks)
    assert s["radios"] == doctor.WARN and "SPI devices" not in s, doctor.render(checks)
    assert f"sudo rm {control}" in doctor.render(checks)
