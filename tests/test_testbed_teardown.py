"""A testbed that cannot come up, or is stopped while it comes up, leaves nothing behind: no
namespace, no process. As root (network namespaces)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from longge import testbed
from longge.radio.options import RadioOptions

ROOTLESS = os.geteuid() != 0 or shutil.which("ip") is None


def namespaces_left() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [ns for ns in testbed.NAMESPACES if ns in listed]


@pytest.mark.skipif(ROOTLESS, reason="needs root and iproute2 (network namespaces)")
def test_ctrl_c_while_the_testbed_comes_up_leaves_nothing_behind() -> None:
    """Once KeyboardInterrupt (Ctrl-C, or SIGTERM in a sweep) passed the clean-up, which took
    Exception only: three namespaces, the air and both daemons were left running."""

    def interrupt(step: str) -> None:
        if step.startswith("starting the measurement servers"):  # the air and daemons are up
            raise KeyboardInterrupt

    testbed.down()
    try:
        with pytest.raises(KeyboardInterrupt):
            testbed.up(testbed.TestbedSpec(RadioOptions()), say=interrupt)
        assert namespaces_left() == []
        assert testbed._testbed_pids() == set()
    finally:
        testbed.down()


def test_a_process_that_exits_while_awaited_fails_the_wait_at_once(tmp_path: Path) -> None:
    """A daemon (or the servers) that exits at once is reported with its log as soon as it
    has, not after the whole wait for it."""
    log = tmp_path / "x.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", "print('no libiperf'); exit(1)"], stdout=out)
    proc.wait()
    with pytest.raises(testbed.TestbedError, match="exited") as err:
        testbed._wait_for(lambda: False, "the measurement servers", log, proc.pid)
    assert "no libiperf" in str(err.value)
