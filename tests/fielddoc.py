"""Every field LongGe writes into a results file is listed in docs/results.md: the tests that
produce results hand them to ``assert_documented``, which fails on a field the document does
not list (a row whose first cell names it in backticks). Rows that say "keyed by" document a
map whose keys are data (radio names, drop reasons): their keys are not checked, their values
are."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[1] / "docs" / "results.md"
_FIRST_CELL = re.compile(r"^\|([^|]*)\|(.*)$")


def documented() -> tuple[set[str], set[str]]:
    """(field names, names of maps keyed by data) from the document's tables."""
    names: set[str] = set()
    maps: set[str] = set()
    for line in DOC.read_text().splitlines():
        m = _FIRST_CELL.match(line)
        if not m:
            continue
        found = re.findall(r"`([^`]+)`", m.group(1))
        names.update(found)
        if "keyed by" in m.group(2):
            maps.update(found)
    return names, maps


def undocumented(obj: Any, where: str = "") -> set[str]:
    names, maps = documented()

    def walk(o: Any, path: str) -> set[str]:
        out: set[str] = set()
        if isinstance(o, dict):
            for k, v in o.items():
                if k not in names:
                    out.add(f"{path}.{k}")
                if k in maps and isinstance(v, dict):
                    for sub in v.values():
                        out |= walk(sub, f"{path}.{k}.*")
                else:
                    out |= walk(v, f"{path}.{k}")
        elif isinstance(o, list):
            for item in o:
                out |= walk(item, f"{path}[]")
        return out

    return walk(obj, where)


def csv_fields(path: Path) -> dict[str, None]:
    with open(path, newline="") as f:
        return dict.fromkeys(next(csv.reader(f)))


def assert_documented(obj: Any, where: str) -> None:
    missing = undocumented(obj, where)
    assert not missing, f"fields not in docs/results.md: {sorted(missing)}"


def assert_folder_documented(folder: Path) -> None:
    """A results folder: its JSON files and the header of every CSV in it."""
    import json

    for p in sorted(folder.glob("*.json")):
        assert_documented(json.loads(p.read_text()), p.name)
    for p in [*folder.glob("*.csv"), *folder.glob("trials/*.csv")]:
        assert_documented(csv_fields(p), str(p.relative_to(folder)))
