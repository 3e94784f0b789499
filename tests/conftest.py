"""Shared fixtures: an air emulator in its own process, reachable at a temporary socket."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Iterator

import pytest

from longge.radio.options import RadioOptions
from longge.radiobench import run_air

_CTX = mp.get_context("fork")


@pytest.fixture
def air_path(tmp_path: os.PathLike[str]) -> Iterator[str]:
    path = os.path.join(str(tmp_path), "air.sock")
    ready = _CTX.Event()
    proc = _CTX.Process(target=run_air, args=(path, RadioOptions(), ready), daemon=True)
    proc.start()
    assert ready.wait(10), "air emulator did not start"
    try:
        yield path
    finally:
        proc.terminate()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
