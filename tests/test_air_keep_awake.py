"""While frames are on the air, the compiled air keeps the CPUs from halting (a PM QoS CPU
latency request of 0, see docs/emulator.md): it holds the request while the link carries
something, releases it when the link has been idle, and a killed air leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import time
from pathlib import Path

import pytest
from conftest import required
from test_sim_radio import pair

from longge.air import native
from longge.air.wire import query
from longge.radiobench import start_air

QOS = "/dev/cpu_dma_latency"


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "PM QoS needs root"
    if not os.path.exists(QOS):
        return f"no {QOS}: a kernel without PM QoS"
    return None


reason = _skip_reason()
pytestmark = required(reason, "the keep-awake tests")


def latency_limit_us() -> int:
    """The kernel's current CPU latency limit (the strictest request of all processes)."""
    with open(QOS, "rb") as f:
        return int(struct.unpack("i", f.read(4))[0])


def qos_holders() -> list[str]:
    """The processes that hold a PM QoS request open (pid and command), for the message."""
    out = []
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        with contextlib.suppress(OSError):
            if os.readlink(fd) == QOS:
                pid = fd.parent.parent.name
                cmd = (fd.parent.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                out.append(f"{pid} {cmd.decode(errors='replace').strip()[:80]}")
    return out or ["none found"]


def until(cond, seconds: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


def test_held_while_frames_fly_released_when_idle_and_on_a_crash(tmp_path: Path) -> None:
    # Another air (another test's, on the other worker) holds the CPUs awake while its frames
    # fly: wait for a gap in them rather than fail on one moment's.
    if not until(lambda: latency_limit_us() != 0, seconds=20.0):
        held = "another process holds the CPUs awake: nothing to observe"
        if os.environ.get("CI"):
            pytest.fail(f"{held} (on CI: {', '.join(qos_holders())})", pytrace=False)
        pytest.skip(held)
    path = str(tmp_path / "air.sock")
    proc = start_air(path)
    try:
        assert query(path)["server"] == "rust"
        assert query(path)["keep_awake"] == {
            "available": True,
            "holding": False,
            "holds": 0,
            "held_ms": 0.0,
        }
        tx, rx = pair(path)
        for i in range(20):
            assert tx.write_fast(bytes([i]) * 32)
            assert tx.tx_standby()
            rx.read(32) if rx.available() else None
        assert latency_limit_us() == 0, "frames on the air, yet the CPUs may halt"
        stats = query(path)["keep_awake"]
        assert stats["holding"] and stats["holds"] == 1
        # idle: the request goes within its hold time (0.1 s) plus any scheduling delay
        assert until(lambda: latency_limit_us() != 0)
        stats = query(path)["keep_awake"]
        assert not stats["holding"] and stats["held_ms"] >= 100
        # frames again, then the air is killed while holding: the kernel drops its request
        assert tx.write_fast(b"x" * 32) and tx.tx_standby()
        assert latency_limit_us() == 0
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        assert until(lambda: latency_limit_us() != 0)
    finally:
        native.stop(proc)


def test_off_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGGE_KEEP_AWAKE", "off")
    path = str(tmp_path / "air.sock")
    proc = start_air(path)
    try:
        tx, _ = pair(path)
        assert tx.write_fast(b"x" * 32) and tx.tx_standby()
        stats = query(path)["keep_awake"]
        assert stats["available"] is False and stats["holds"] == 0
    finally:
        native.stop(proc)
