"""The compiled air server (``emulator/``, Rust): where it is, how it is built, how it starts.

The air runs in real time beside the radios it serves; in Python it took 29-61 % of a core at
one saturated 2 Mbit/s direction and could not keep up with a two-way no-ack stream, so the
real-time server is compiled (docs/emulator.md says why Rust). It speaks the wire protocol of
``wire.py`` and runs a twin of ``model.py``, which stays the specification:
``tests/test_air_differential.py`` replays event scripts through both.

``./run.sh`` builds it on first use (cargo, release profile). ``LONGGE_AIR_SERVER=python``
selects the Python server (``server.py``) instead, e.g. on a machine without a Rust toolchain.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from longge.air.loss import NO_LOSS, AirLoss
from longge.errors import AirUnavailable

CRATE = Path(__file__).resolve().parents[2] / "emulator"
BINARY = CRATE / "target" / "release" / "longge-air"


def use_python() -> bool:
    return os.environ.get("LONGGE_AIR_SERVER", "") == "python"


def _sources() -> list[Path]:
    return [CRATE / "Cargo.toml", CRATE / "Cargo.lock", *sorted((CRATE / "src").glob("*.rs"))]


def stale() -> bool:
    """Is the binary missing or older than a source file?"""
    if not BINARY.exists():
        return True
    built = BINARY.stat().st_mtime
    return any(p.exists() and p.stat().st_mtime > built for p in _sources())


def cargo() -> str | None:
    found = shutil.which("cargo")
    if found:
        return found
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin" / "cargo"
    return str(home) if home.exists() else None


def build() -> Path:
    """Build the air server if it is missing or stale; return its path."""
    if not stale():
        return BINARY
    tool = cargo()
    if tool is None:
        raise AirUnavailable(
            "the compiled air server is not built and cargo is not installed: run ./run.sh once "
            "(as root it installs a Rust toolchain), or set LONGGE_AIR_SERVER=python"
        )
    done = subprocess.run(
        [tool, "build", "--release", "--quiet", "--manifest-path", str(CRATE / "Cargo.toml")],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not BINARY.exists():
        raise AirUnavailable(f"building the air server failed:\n{done.stderr[-2000:]}")
    return BINARY


def command(socket: str, loss: AirLoss = NO_LOSS) -> list[str]:
    """The command line that serves the air at ``socket`` with these losses (the compiled
    server, or the Python one when ``LONGGE_AIR_SERVER=python``)."""
    per = str(loss.per)
    if use_python():
        args = [sys.executable, "-m", "longge", "air", "--socket", socket, "--per", per]
    else:
        args = [str(build()), "serve", "--socket", socket, "--per", per]
    if loss.ack_per is not None:
        args += ["--ack-per", str(loss.ack_per)]
    if loss.path_loss is not None:
        args += ["--path-loss", repr(float(loss.path_loss))]
    wifi = loss.wifi()
    if wifi is not None:
        args += (
            ["--interferer", str(loss.interferer)]
            if use_python()
            else [
                *("--wifi", str(wifi.channel), "--wifi-duty", repr(wifi.duty)),
                *("--wifi-model", wifi.model),
            ]
        )
    return [*args, "--burst", str(loss.burst), "--seed", str(loss.seed)]


def serving(path: str | os.PathLike[str]) -> bool:
    """Does an air server at ``path`` answer (not only: has it bound its socket)? A server
    that has bound but is still starting on a busy machine would leave a radio's hello
    unanswered past its timeout."""
    from longge.air.wire import query

    try:
        query(str(path), timeout=1.0)
    except (OSError, ValueError):
        return False
    return True


def wait_for_socket(path: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Wait until the air server at ``path`` answers (up to ``timeout``: a busy machine)."""
    deadline = time.monotonic() + timeout
    while not (os.path.exists(path) and serving(path)):
        if proc.poll() is not None:
            raise AirUnavailable(f"the air server exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AirUnavailable(f"the air server did not answer on {path} within {timeout:.0f} s")
        time.sleep(0.01)


def start(socket: str, loss: AirLoss = NO_LOSS) -> subprocess.Popen[bytes]:
    """Start the compiled air server and wait until it listens."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket)
    proc = subprocess.Popen(
        command(socket, loss),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    wait_for_socket(socket, proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
