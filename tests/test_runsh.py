"""run.sh's set-up, by command: a node's own commands (the daemon and its units, status,
doctor, keys) get neither the emulator's Debian packages nor the compiled air; the emulator's
commands get both. run.sh runs for real in a copy of the repository's entry point, on a PATH
without dpkg-query, apt-get and cargo (so it installs nothing and says what it skipped), with a
venv whose ``python`` prints what it was asked to run."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("dirname", "sha256sum", "cut", "cat", "id", "stat", "flock", "mkdir", "sed", "rm")


@pytest.fixture
def copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "repo"
    (root / "emulator" / "src").mkdir(parents=True)
    for name in ("run.sh", "pyproject.toml"):
        shutil.copy(REPO / name, root / name)
    for name in ("Cargo.toml", "Cargo.lock"):
        shutil.copy(REPO / "emulator" / name, root / "emulator" / name)
    for rs in (REPO / "emulator" / "src").glob("*.rs"):
        shutil.copy(rs, root / "emulator" / "src" / rs.name)
    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text('#!/bin/sh\necho "python $*"\n')
    python.chmod(0o755)
    pyproject = (root / "pyproject.toml").read_bytes()
    (venv / ".longge-installed").write_text(hashlib.sha256(pyproject).hexdigest() + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    return root, env


def run(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash
    return subprocess.run(
        [bash, str(root / "run.sh"), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args",
    [
        ("daemon", "--config", "/etc/longge/longge.toml"),
        ("servers", "--log-dir", "/var/log/longge"),
        ("status",),
        ("doctor",),
        ("help",),
        ("tTest", "--host", "10.24.0.1", "--quick"),
        ("lTest", "--host=10.24.0.1"),
        ("experiment", "mode", "--host", "10.24.0.1"),
        ("scan", "--backend", "rf24"),
        ("scan", "--config", "/etc/longge/longge.toml"),
    ],
)
def test_node_commands_skip_the_emulator(copy: tuple[Path, dict[str, str]], args: tuple) -> None:
    root, env = copy
    done = run(root, env, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "python -m longge " + " ".join(args)
    assert done.stderr == ""  # nothing built, nothing said
    venv = root / ".venv"
    assert (venv / ".longge-debs").exists()
    assert not (venv / ".longge-debs-emulator").exists()


@pytest.mark.parametrize(
    "args",
    [("testbed", "up"), ("tTest", "--quick"), ("radio-bench",), ("modem-bench",), ("scan",)],
)
def test_emulator_commands_set_it_up(copy: tuple[Path, dict[str, str]], args: tuple) -> None:
    root, env = copy
    if args[0] == "tTest" and Path("/run/longge/longge0.sock").exists():
        pytest.skip("a daemon runs here: tTest measures its link, without the emulator")
    done = run(root, env, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "python -m longge " + " ".join(args)
    # build_air ran: without cargo it falls back to the Python air, and says so
    assert "cargo is missing" in done.stderr, done.stderr
    assert (root / ".venv" / ".longge-debs-emulator").exists()
