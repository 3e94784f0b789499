"""Shared fixtures: an air emulator in its own process, reachable at a temporary socket."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from longge.air import native
from longge.radiobench import start_air


@pytest.fixture
def air_path(tmp_path: os.PathLike[str]) -> Iterator[str]:
    path = os.path.join(str(tmp_path), "air.sock")
    proc = start_air(path)
    try:
        yield path
    finally:
        native.stop(proc)
