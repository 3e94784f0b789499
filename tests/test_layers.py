"""The layers of docs/design.md §1 as a contract (import-linter, pyproject.toml), and an
import graph without cycles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_hold() -> None:
    """cli > commands > measure > daemon > config > radio > air > protocol > chip: a module
    imports from its own layer or below, directly or through others."""
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "0 broken" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("longge", exclude_type_checking_imports=True)
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycles.append((module, *back))
    assert not cycles, cycles[:5]
