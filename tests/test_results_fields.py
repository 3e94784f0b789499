"""docs/results.md lists every field LongGe writes (the tests that produce results check their
own output with fielddoc); here: the checker itself, and the columns known up front."""

from __future__ import annotations

from fielddoc import documented, undocumented

from longge.measure.results import SCHEMA, TRIAL_FIELDS
from longge.measure.tune import GRID_FIELDS


def test_the_checker_finds_a_field_the_document_does_not_list() -> None:
    written = {"schema": SCHEMA, "points": [{"offered_bps": 1.0, "surely_new_field": 2}]}
    assert undocumented(written) == {".points[].surely_new_field"}


def test_maps_keyed_by_data_check_their_values_not_their_keys() -> None:
    _, maps = documented()
    assert "daemons" in maps
    ok = {"daemons": {"/run/x.sock": {"node": {"role": "base"}}}}
    assert undocumented(ok) == set()
    assert undocumented({"daemons": {"/run/x.sock": {"nodes": 1}}}) == {".daemons.*.nodes"}


def test_csv_columns_are_documented() -> None:
    assert undocumented(dict.fromkeys(TRIAL_FIELDS + GRID_FIELDS)) == set()
