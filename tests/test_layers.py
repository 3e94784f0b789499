"""The layers of docs/design.md §1 as a contract (import-linter, pyproject.toml), and an
import graph without cycles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_hold() -> None:
    """cli > commands > ... > measure > testbed > daemon > config > radio > air > protocol >
    chip > errors (pyproject.toml): a module imports from its own layer or below, directly or
    through others, imports for type checking too."""
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "0 broken" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_every_top_level_module_has_its_layer() -> None:
    """Issue 68, item 5: no module of the package sits outside the contract."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = conf["contracts"]
    placed = {m.strip() for layer in contract["layers"] for m in layer.split("|")}
    package = ROOT / "longge"
    tops = {f"longge.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    tops |= {f"longge.{p.name}" for p in package.iterdir() if (p / "__init__.py").exists()}
    assert conf["exclude_type_checking_imports"] is False
    assert tops - placed == set() and placed - tops == set()


def test_no_module_imports_itself_through_others() -> None:
    """No module imports one that imports it back, directly or through others, imports made
    only for type checking counted (issue 68, item 5; ``measure/``'s last two, ``tune`` with
    ``tune_verdict`` and ``experiments`` with ``experiment_report``, parted by their plans:
    issue 72, item 5)."""
    graph = grimp.build_graph("longge", exclude_type_checking_imports=False)
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycles.append((module, *back))
    assert not cycles, cycles[:5]


def test_every_module_that_brings_a_testbed_up_runs_on_the_system_worker() -> None:
    """A module that brings the testbed up (fixed namespaces, /run/longge/testbed) and is not
    in conftest's SYSTEM_MODULES runs beside another on the second worker: each takes the
    other's testbed down (a fresh clone's run, 2026-12-08: test_testbed_multi_serial beside
    test_testbed_rf24)."""
    from conftest import SYSTEM_MODULES

    bring_up = ("star_testbed(", 'cli("testbed", "up"', "testbed.up(")
    missing = [
        p.stem
        for p in sorted((ROOT / "tests").glob("test_*.py"))
        if p.stem != "test_layers"
        and any(s in p.read_text() for s in bring_up)
        and p.stem not in SYSTEM_MODULES
    ]
    assert not missing, missing
