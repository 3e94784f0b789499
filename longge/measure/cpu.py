"""CPU time the hypervisor took from this machine ("steal"), over a stretch of a measurement.

On a virtual machine the vCPUs sometimes wait for the host. The emulated air keeps real time,
so while that happens its frames and the daemons' FIFO deadlines slip: the testbed loses
throughput and gains latency that a radio link would not. Measured on this project's 2-core VM:
runs with 10-19 % steal carried 0.69-0.86 of what quiet runs carried. A trial says how much was
stolen while it ran, and the tTest repeats trials that lost more than ``STEAL_LIMIT``.
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

#: A trial that lost more than this share of CPU time to the hypervisor is not trusted.
STEAL_LIMIT = 0.05

_STAT = "/proc/stat"


def _read(path: str) -> list[int] | None:
    try:
        with open(path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    try:
        return [int(x) for x in fields[1:]]
    except ValueError:
        return None


class StealMeter:
    """``share()``: the share of all CPU time since construction (or the last ``restart``)
    that was stolen: 0.0 on bare metal, and also where /proc/stat cannot be read."""

    def __init__(self, path: str = _STAT) -> None:
        self._path = path
        self._start = _read(path)

    def restart(self) -> None:
        self._start = _read(self._path)

    def share(self) -> float:
        now = _read(self._path)
        if self._start is None or now is None:
            return 0.0
        delta = [b - a for a, b in zip(self._start, now, strict=False)]
        total = sum(delta)
        return delta[7] / total if total > 0 else 0.0


def process_cpu_s(pid: int, tid: int | None = None) -> float:
    """CPU time (user + system, s) process ``pid`` (or its thread ``tid`` alone) has used so
    far; 0.0 if it is gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
