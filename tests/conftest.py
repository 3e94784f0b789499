"""Shared fixtures: an air emulator in its own process, reachable at a temporary socket."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longge.air import native
from longge.air.loss import NO_LOSS, AirLoss
from longge.radiobench import start_air


@contextlib.contextmanager
def running_air(tmp_path: os.PathLike[str], loss: AirLoss = NO_LOSS) -> Iterator[str]:
    """An air emulator in its own process with ``loss`` on its channel, reachable at a socket
    in ``tmp_path`` (its path yielded), stopped afterwards whatever happened."""
    path = os.path.join(str(tmp_path), "air.sock")
    proc = start_air(path, loss)
    try:
        yield path
    finally:
        native.stop(proc)


@pytest.fixture
def air_path(tmp_path: os.PathLike[str]) -> Iterator[str]:
    with running_air(tmp_path) as path:
        yield path


def required(reason: str | None, what: str) -> pytest.MarkDecorator:
    """A module's mark for a prerequisite: skipped here where ``reason`` says it is missing,
    but a failure on CI (which runs as root with everything installed: a skip there would hide
    a test that no longer runs)."""
    if reason and os.environ.get("CI"):
        pytest.fail(f"{what} must run on CI: {reason}", pytrace=False)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


#: Modules that use fixed system names (the testbed's namespaces, interfaces in the root
#: namespace, iptables chains, /run/longge). ``./run.sh test`` runs two xdist workers: one
#: runs all of these, one after another, from the start; both share the rest test by test.
SYSTEM_MODULES = frozenset(
    {
        "test_air_keep_awake",  # (the kernel's CPU latency limit: another air holds it)
        "test_commands_run",
        "test_daemon_tun",
        "test_doctor",  # (it reports a running daemon: the testbed's)
        "test_exposure",
        "test_pyrf24_emulated",  # (its doctor and scan: as above)
        "test_runsh",
        "test_sweeps_testbed",
        "test_testbed",
        "test_testbed_multi",
        "test_testbed_multi_stream",
        "test_testbed_multi_rf24",
        "test_testbed_multi_serial",
        "test_units_run",
        "test_testbed_rf24",
        "test_testbed_teardown",
    }
)


def _is_system(nodeid: str) -> bool:
    return Path(nodeid.split("::", 1)[0]).stem in SYSTEM_MODULES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The system modules first (the longest share, started at once); otherwise as found."""
    items.sort(key=lambda item: not _is_system(item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's load-scope scheduling with one scope for all the system modules and one per
    test otherwise. (Its own ``loadgroup`` marks did not group here: pytest 9.2, xdist 3.8.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SystemApart(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "system" if _is_system(nodeid) else nodeid

    return SystemApart(config, log)
