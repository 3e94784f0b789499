"""Every command a user types runs somewhere in this suite, end to end.

README's command reference and every ``./run.sh`` line in README are read here; each command
(with the flags README shows it with) must be in ``RUNS``, naming the tests that run it as a
user would (through ``python -m longge`` or ``./run.sh``), or in ``EXCLUDED`` with the reason.
A command documented and run nowhere fails ``test_every_documented_command_runs_somewhere``.
The runs themselves that need the testbed are in ``test_commands_run.py``; the quick ones that
need no root are here, with one bad value for every command (a clear error naming the key,
exit 2, never a traceback).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

#: Commands whose second word is an action, not an argument.
ACTIONS = {"testbed": ("up", "down", "status"), "air": ("set",), "radio": ("set",)}

#: Each documented use ("command [action|experiment] flags...", flags sorted) and the tests
#: that run it; together their code holds every word of it.
RUNS: dict[str, list[str]] = {
    "tTest": ["test_commands_run.py::test_ttest_quick_download_from_nothing_on_a_busy_channel"],
    "tTest --quick": [
        "test_commands_run.py::test_ttest_quick_download_from_nothing_on_a_busy_channel"
    ],
    "tTest --quick -R": [
        "test_commands_run.py::test_ttest_quick_download_from_nothing_on_a_busy_channel"
    ],
    "tTest --arc --interferer --quick": [
        "test_commands_run.py::test_ttest_quick_download_from_nothing_on_a_busy_channel"
    ],
    "tTest --host": ["test_commands_run.py::test_ttest_with_host_from_the_mobile"],
    "tTest --host -R": [
        "test_commands_run.py::test_ttest_with_host_from_the_mobile",
        "test_commands_run.py::test_ttest_quick_download_from_nothing_on_a_busy_channel",
    ],
    "tTest --bidir --host": ["test_commands_run.py::test_ttest_with_host_from_the_mobile"],
    "lTest": ["test_sweeps_testbed.py::test_ltest_quick_from_nothing"],
    "lTest --quick": ["test_sweeps_testbed.py::test_ltest_quick_from_nothing"],
    "lTest --host": ["test_commands_run.py::test_ltest_with_host_from_the_mobile"],
    "tune": [
        "test_commands_run.py::test_tune_from_nothing_finds_a_killed_runs_testbed",
        "test_commands_run.py::test_tune_on_a_running_testbed",
    ],
    "tune --control --host": ["test_commands_run.py::test_tune_with_host_from_the_mobile"],
    "tune --vs-stream": ["test_commands_run.py::test_tune_with_host_from_the_mobile"],
    "experiment NAME": [
        "test_commands_run.py::test_experiment_mode_from_nothing",
        "test_commands_run.py::test_experiment_multinode_and_plot",
        "test_commands_run.py::test_experiment_adaptive_stream",
        "test_commands_run.py::test_experiment_hostile",
        "test_commands_run.py::test_experiment_agility",
    ],
    "experiment mode": ["test_commands_run.py::test_experiment_mode_from_nothing"],
    "experiment list": ["test_commands.py::test_experiment_list_names_every_experiment"],
    "plot": ["test_commands_run.py::test_experiment_multinode_and_plot"],
    "daemon --config": [
        "test_commands_run.py::test_the_testbeds_nodes_are_the_documented_commands"
    ],
    "servers": ["test_commands_run.py::test_the_testbeds_nodes_are_the_documented_commands"],
    "status": ["test_testbed.py::test_status_reports_both_nodes_up"],
    "status --json": ["test_testbed.py::test_status_reports_both_nodes_up"],
    "status --watch": ["test_testbed.py::test_status_watch_shows_the_rates_change_in_a_terminal"],
    "status --prometheus": [
        "test_metrics.py::test_status_prometheus_passes_promtool_and_says_what_status_says"
    ],
    "radio set --arc --ard-us --mode": [
        "test_testbed.py::test_live_radio_change_keeps_the_interface",
        "test_testbed.py::test_a_new_link_mode_returns_once_the_link_is_back",
    ],
    "radio set --mode": ["test_testbed.py::test_a_new_link_mode_returns_once_the_link_is_back"],
    "radio set --rate": ["test_commands_run.py::test_radio_set_rate_on_a_running_testbed"],
    "testbed up": ["test_testbed.py::bed"],
    "testbed down": ["test_testbed.py::bed"],
    "testbed status": ["test_testbed.py::test_status_reports_both_nodes_up"],
    "testbed up --backend": [
        "test_testbed_rf24.py::test_the_link_runs_on_real_pyrf24_over_emulated_chips"
    ],
    "testbed up --serial": ["test_commands_run.py::test_testbed_up_serial_links_over_usb_modems"],
    "testbed up --mobiles": ["test_testbed_multi.py::star_testbed"],
    "scan": ["test_testbed.py::test_scan_finds_the_links_channels_and_a_wifi_interferer"],
    "scan --traffic": ["test_testbed.py::test_scan_finds_the_links_channels_and_a_wifi_interferer"],
    "scan --backend": [
        "test_pyrf24_emulated.py::test_scan_on_an_emulated_chip_finds_the_wifi_next_door"
    ],
    "doctor": ["test_doctor.py::test_without_radios_or_config_the_machine_is_fine"],
    "keygen --out": ["test_commands.py::test_keygen_writes_a_key_once"],
    "radio-bench": ["test_options_cli.py::test_radio_bench_json_reports_what_the_air_saw"],
    "modem-bench": [
        "test_modem_avr.py::test_modem_bench_prints_the_figures_and_refuses_bad_options"
    ],
    "modem-bench --seconds": [
        "test_modem_avr.py::test_modem_bench_prints_the_figures_and_refuses_bad_options"
    ],
    "air": ["test_commands.py::test_a_standalone_air_answers_and_changes_live"],
    "air-stats": ["test_commands.py::test_a_standalone_air_answers_and_changes_live"],
    "air set": ["test_commands.py::test_a_standalone_air_answers_and_changes_live"],
    "help": ["test_commands.py::test_help_lists_every_command"],
}

#: Documented, and run nowhere here: why.
EXCLUDED = {
    "test": "it is this suite: CI runs ./run.sh test (.ci/run)",
    "experiment all": "every experiment one after another (--quick: over 15 minutes); each "
    "kind runs here by its name (experiment NAME), and the folder all writes is the one "
    "experiment NAME writes (test_experiment_multinode_and_plot reads it)",
}

#: Documented in the command table beside a command (not on a ./run.sh line): the variants of
#: `testbed up` each backend and several mobiles.
TABLE_VARIANTS = ("testbed up --backend", "testbed up --serial", "testbed up --mobiles")


def _use(words: list[str]) -> str:
    """ "tTest --host 10.24.0.1 -R" -> "tTest --host -R": the command, its action or
    experiment name, and its flags sorted."""
    head, rest = words[0], [w.strip("[]") for w in words[1:]]
    cmd = [head]
    if rest and (rest[0] in ACTIONS.get(head, ()) or head == "experiment"):
        cmd.append(rest.pop(0))
    flags = sorted({w for w in rest if w.startswith("-") and w != "-"})
    return " ".join(cmd + flags)


def documented() -> set[str]:
    """Every use of a command README documents: the command table's first column and every
    ``./run.sh`` line (in code blocks and inline)."""
    text = (ROOT / "README.md").read_text()
    uses: set[str] = set()
    for m in re.finditer(r"\./run\.sh ([^`#\n|)]*)", text):
        words = m.group(1).split()
        if words and re.fullmatch(r"[A-Za-z][\w-]*", words[0]) and words[0] != "COMMAND":
            uses.add(_use(words))
    table = text[text.index("## Command reference") :]
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        first = re.split(r"(?<!\\)\|", line)[1].replace("\\|", "¦")
        for cell in re.findall(r"`([^`]+)`", first):
            words = cell.split()
            if len(words) > 1 and "¦" in words[1]:  # `testbed up|down|status`
                uses |= {_use([words[0], alt]) for alt in words[1].split("¦")}
            elif any(w.startswith("[") for w in words):  # `status [--json] [--watch]`
                uses.add(words[0])
                uses |= {_use([words[0], w]) for w in words[1:]}
            else:
                uses.add(_use(words))
    return uses | set(TABLE_VARIANTS)


def _source(ref: str) -> str:
    """The code of test (or fixture) ``file::name``."""
    file, name = ref.split("::")
    tree = ast.parse((TESTS / file).read_text())
    for node in ast.walk(tree):  # (a test in a class too)
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment((TESTS / file).read_text(), node) or ""
    raise AssertionError(f"{ref}: no such test or fixture")


def test_readme_documents_the_commands_this_test_knows() -> None:
    """The parser finds what a reader sees (else the next test would pass on nothing)."""
    uses = documented()
    for use in ("tTest --quick", "tune", "testbed up", "air set", "status --watch", "help"):
        assert use in uses, sorted(uses)
    assert len(uses) >= 40


def test_every_documented_command_runs_somewhere() -> None:
    missing = sorted(documented() - set(RUNS) - set(EXCLUDED))
    assert not missing, f"documented, run by no test (add one to RUNS, or a reason): {missing}"


@pytest.mark.parametrize("use", sorted(RUNS))
def test_each_run_named_holds_the_command_it_stands_for(use: str) -> None:
    """The tests named run what they stand for: their code holds the command and each flag
    (a test renamed or changed to run something else fails here)."""
    code = "\n".join(_source(ref) for ref in RUNS[use])
    words = [w for w in use.split() if w != "NAME"]
    for word in words:
        assert re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", code), (use, word)


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "longge", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


#: One bad value for every command, and the key its error must name.
BAD = [
    (["tTest", "--arc", "20"], "arc"),
    (["lTest", "-t", "0"], "time"),
    (["tune", "--ard-list", "x"], "--ard-list"),
    (["tune", "-t", "0"], "--time"),
    (["experiment", "tcp-vs-udp", "--values", "7"], "--values"),
    (["experiment", "multinode", "--values", "9"], "--values"),
    (["experiment", "adaptive", "--values", "fast"], "--values"),
    (["experiment", "all", "--time", "2"], "--time"),
    (["experiment", "hostile", "--backend", "rf24"], "--backend"),  # (multinode's only)
    (["plot", "/nonexistent/results"], "summary.json"),
    (["daemon", "--config", "/nonexistent.toml"], "config"),
    (["radio", "set", "--arc", "99"], "arc"),
    (["servers", "--bind", "999.1.1.1"], "--bind"),
    (["testbed", "up", "--mobiles", "9"], "--mobiles"),
    (["scan", "--sweeps", "0"], "--sweeps"),
    (["keygen", "--out", "/nonexistent/folder/key"], "--out"),
    (["radio-bench", "--arc", "20"], "arc"),
    (["modem-bench", "--baud", "7"], "--baud"),
    (["air", "--per", "2"], "per"),
    (["air", "set", "--socket", "/nonexistent.sock", "--per", "2"], "per"),
]


@pytest.mark.parametrize(("args", "key"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_value_is_named_with_exit_2_and_no_traceback(args: list[str], key: str) -> None:
    r = run_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-1500:])
    assert "Traceback" not in r.stderr + r.stdout
    assert key in r.stderr, r.stderr


def test_every_command_has_a_bad_value_tried() -> None:
    from longge.cli import build_parser

    commands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    tried = {args[0] for args, _ in BAD}
    # status, doctor and air-stats take no value that can be wrong before they look (a socket
    # that does not answer is said, exit 1: test_options_cli, test_doctor)
    assert commands - tried == {"status", "doctor", "air-stats"}, commands - tried


def test_keygen_writes_a_key_once(tmp_path: Path) -> None:
    from longge.protocol.secure import KEY_LEN, parse_key

    key = tmp_path / "key"
    r = run_cli("keygen", "--out", str(key))
    assert r.returncode == 0, r.stderr
    assert key.stat().st_mode & 0o777 == 0o600
    assert len(parse_key(key.read_text().strip(), "key")) == KEY_LEN
    again = run_cli("keygen", "--out", str(key))
    assert again.returncode == 1 and "not overwriting" in again.stderr


def test_help_lists_every_command() -> None:
    from longge.cli import build_parser

    r = subprocess.run(
        ["bash", str(ROOT / "run.sh"), "help"], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-2000:]
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in commands:
        assert re.search(rf"^\s+{re.escape(name)}\b", r.stdout, re.M), name


def test_experiment_list_names_every_experiment() -> None:
    from longge.measure.experiment_plans import EXPERIMENTS

    r = run_cli("experiment", "list")
    assert r.returncode == 0, r.stderr
    for name in [*EXPERIMENTS, "multinode", "adaptive", "adaptive-stream", "hostile", "agility"]:
        assert re.search(rf"^\s+{re.escape(name)}\s", r.stdout, re.M), name


def test_a_standalone_air_answers_and_changes_live(tmp_path: Path) -> None:
    """./run.sh air in the foreground, air-stats of it, air set changing its loss live."""
    sock = tmp_path / "air.sock"
    air = subprocess.Popen(
        [sys.executable, "-m", "longge", "air", "--socket", str(sock), "--per", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < deadline and air.poll() is None:
            time.sleep(0.05)
        stats = run_cli("air-stats", "--socket", str(sock))
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["loss"]["per"] == pytest.approx(0.1)
        changed = run_cli("air", "set", "--socket", str(sock), "--per", "0.2")
        assert changed.returncode == 0, changed.stderr
        again = json.loads(run_cli("air-stats", "--socket", str(sock)).stdout)
        assert again["loss"]["per"] == pytest.approx(0.2)
    finally:
        air.terminate()
        try:
            air.wait(timeout=10)
        except subprocess.TimeoutExpired:
            air.kill()
    assert not os.path.exists(sock) or air.returncode is not None
