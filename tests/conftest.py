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


def required(reason: str | None, what: str) -> pytest.MarkDecorator:
    """A module's mark for a prerequisite: skipped here where ``reason`` says it is missing,
    but a failure on CI (which runs as root with everything installed: a skip there would hide
    a test that no longer runs)."""
    if reason and os.environ.get("CI"):
        pytest.fail(f"{what} must run on CI: {reason}", pytrace=False)
    return pytest.mark.skipif(reason is not None, reason=reason or "")
