"""run.sh's set-up, by command: a node's own commands (the daemon and its units, status,
doctor, keys) get neither the emulator's Debian packages nor the compiled air; the emulator's
commands get both. run.sh runs for real in a copy of the repository's entry point, on a PATH
without dpkg-query, apt-get and cargo (so it installs nothing and says what it skipped), with a
venv whose ``python`` prints what it was asked to run."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("dirname", "sha256sum", "cut", "cat", "id", "stat", "flock", "mkdir", "sed", "rm", "grep")


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
        ("experiment", "list"),
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


@pytest.mark.skipif(os.geteuid() != 0, reason="run.sh installs packages only as root")
def test_a_missing_emulator_package_does_not_keep_the_nodes_out(
    copy: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """One apt-get installs both package sets; when it fails (a release without simavr, say),
    the node's own set still goes in. Here dpkg-query finds nothing installed and apt-get
    (both stand-ins on PATH, logging their calls) refuses any list with simavr in it. A Rust
    toolchain that did not come leaves the Python air (run.sh once stopped there, set -e)."""
    root, env = copy
    log = tmp_path / "apt.log"
    bin_dir = Path(env["PATH"])
    (bin_dir / "dpkg-query").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "$*" >>{log}\ncase "$*" in *simavr*) exit 100;; esac\nexit 0\n'
    )
    for tool in ("dpkg-query", "apt-get"):
        (bin_dir / tool).chmod(0o755)
    done = run(root, env, "testbed", "up")
    assert done.returncode == 0, done.stderr
    installs = [line for line in log.read_text().splitlines() if line.startswith("install")]
    assert len(installs) == 3 and "simavr" in installs[0], installs
    assert "iperf3" in installs[1] and "simavr" not in installs[1], installs
    # then Rust for the air, which (a stand-in apt-get) brings no cargo: the Python air, said
    assert installs[2].endswith("cargo rustc") and "Python air is used" in done.stderr
    assert (root / ".venv" / ".longge-debs").exists()
    assert not (root / ".venv" / ".longge-debs-emulator").exists()
