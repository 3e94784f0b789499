"""Scheduling for the processes with deadlines: the radio processes and the emulated hardware.

A receiver's FIFO holds 3 frames: at 2 Mbit/s that is ~1.4 ms, and a radio process that wakes
later than that (plus the sender's retries) turns a frame into MAX_RT and a lost packet. Under
Linux's default scheduler a woken process can wait for a busy CPU for milliseconds; a real-time
(SCHED_FIFO) process is run at once. Measured on the 2-core testbed at saturation: the base's
RX FIFO overflowed 33-106 times in 15 s without it, 29-48 with it, and goodput rose from
0.87-0.95 to 0.97-0.99 of the model. Every loop that runs this way blocks in select(), so it
cannot starve the machine (and Linux keeps 5 % of each second for other processes anyway).
Needs root (CAP_SYS_NICE); without it, a lower nice value, or nothing.

The emulated world (the air, native modems, radio processes whose radio is emulated) runs on
one CPU when it is real-time, so that a hypervisor that takes that CPU stops all of it at once
and the air sits the stall out as a freeze instead of running on while a radio host is held
back (docs/emulator.md). ``LONGGE_WORLD_CPU`` chooses the CPU (``off``: no pinning); by default
it is the highest CPU the process may use, when it may use two or more.
"""

from __future__ import annotations

import contextlib
import os
from typing import Literal

#: SCHED_FIFO priorities: the emulated hardware (air, modems) above the radio processes, and the
#: receivers (a hard deadline: their FIFO) above the senders (an empty TX FIFO only idles the
#: air). Equal priorities would not preempt each other: a receiver woken while both CPUs run
#: senders that are sealing and fragmenting a packet would wait for them.
HARDWARE = 30
RADIO_RX = 22
RADIO_TX = 20


def world_cpu() -> int | None:
    """The CPU the emulated world runs on, or None (see the module doc)."""
    chosen = os.environ.get("LONGGE_WORLD_CPU", "")
    if chosen == "off":
        return None
    if chosen:
        try:
            return int(chosen)
        except ValueError:
            return None
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1] if len(cpus) >= 2 else None


#: Where a real-time process runs (``prioritise``).
Place = Literal["world", "beside", "any"]


def prioritise(fifo_priority: int, fallback_nice: int, place: Place = "any") -> str:
    """Make the calling process real-time if allowed; say what it got. ``place``, when real-time:
    ``"world"``, part of the emulated world, pinned to its CPU; ``"beside"``, a process of the
    emulated set-up kept off the world's CPU (on the others); ``"any"``, where the kernel likes."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo_priority))
        cpu = world_cpu() if place != "any" else None
        if cpu is not None:
            cpus = {cpu} if place == "world" else set(os.sched_getaffinity(0)) - {cpu}
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, cpus)
                where = ",".join(str(c) for c in sorted(cpus))
                return f"SCHED_FIFO {fifo_priority}, CPU {where}"
        return f"SCHED_FIFO {fifo_priority}"
    with contextlib.suppress(OSError):
        os.nice(fallback_nice)
        return f"nice {fallback_nice}"
    return "default"


#: prctl(2): the signal this process gets when its parent dies.
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, sig: int) -> bool:
    """Have ``sig`` sent to this process when its parent (pid ``parent``) dies, however it
    dies (killed too); False when the parent is gone already (the caller should end). Called
    after any change of user: the kernel clears the setting on one."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    return os.getppid() == parent
