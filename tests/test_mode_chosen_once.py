"""The link mode is chosen once (docs/design.md §1, "One pump per radio process"): in the data
path (daemon/, protocol/) the mode's name is compared only where each radio process picks its
strategy (radio_tx.run: ``Sending``; radio_rx.run: ``Receiving``). Everything else asks the
strategy (its ARQ, where it runs) or is the strategy. Read from the code."""

from __future__ import annotations

import ast
from pathlib import Path

import longge

PACKAGE = Path(longge.__file__).parent
MODES = {"esb", "stream"}
#: (module, function) where the strategy is chosen
CHOSEN = {("daemon/radio_tx.py", "run"), ("daemon/radio_rx.py", "run")}
#: the status's views render what a daemon reported (its settings' "mode"), not the data path
VIEWS = {"daemon/statusview.py", "daemon/status.py"}


def mode_compared(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, enclosing function) of each comparison with a mode's name, and each ``case``."""
    found: list[tuple[int, str]] = []

    def walk(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef) else func
            named = (
                isinstance(child, ast.Compare)
                and any(
                    isinstance(c, ast.Constant) and c.value in MODES
                    for c in (child.left, *child.comparators)
                )
            ) or (
                isinstance(child, ast.MatchValue)
                and isinstance(child.value, ast.Constant)
                and child.value.value in MODES
            )
            if named:
                found.append((child.lineno, func))
            walk(child, name)

    walk(tree, "")
    return found


def test_the_mode_is_compared_only_where_the_strategy_is_chosen() -> None:
    places = []
    for part in ("daemon", "protocol"):
        for path in sorted((PACKAGE / part).glob("*.py")):
            rel = str(path.relative_to(PACKAGE))
            if rel in VIEWS:
                continue
            for line, func in mode_compared(ast.parse(path.read_text())):
                places.append((rel, func, line))
    assert {(rel, func) for rel, func, _ in places} == CHOSEN, places


def test_the_check_finds_a_comparison() -> None:
    code = 'def f(cfg):\n    if cfg.radio.mode == "stream":\n        pass\n    match cfg.m:\n'
    code += '        case "esb":\n            pass\n'
    assert mode_compared(ast.parse(code)) == [(2, "f"), (5, "f")]
