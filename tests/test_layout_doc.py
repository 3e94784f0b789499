"""docs/details.md's layout table names every module of longge/ (it once missed 14)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout_rows() -> dict[str, str]:
    """{path cell: what cell} of the table under '## Layout'."""
    text = (ROOT / "docs" / "details.md").read_text()
    table = text.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0]] = cells[1]
    return rows


def test_the_layout_table_names_every_module() -> None:
    rows = layout_rows()
    missing = []
    for path in sorted((ROOT / "longge").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if path.name in ("__init__.py", "__main__.py"):
            continue
        if len(rel.parts) == 2:  # longge/x.py: named in a path cell
            named = any(f"`{rel}`" in cell for cell in rows)
        else:  # longge/pkg/x.py: in its package's row
            what = next((w for cell, w in rows.items() if f"`{rel.parent}/`" in cell), "")
            named = re.search(rf"`{re.escape(path.name)}`", what) is not None
        if not named:
            missing.append(str(rel))
    assert not missing, missing
