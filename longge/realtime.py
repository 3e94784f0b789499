"""Scheduling for the processes with deadlines: the radio processes and the emulated hardware.

A receiver's FIFO holds 3 frames: at 2 Mbit/s that is ~1.4 ms, and a radio process that wakes
later than that (plus the sender's retries) turns a frame into MAX_RT and a lost packet. Under
Linux's default scheduler a woken process can wait for a busy CPU for milliseconds; a real-time
(SCHED_FIFO) process is run at once. Measured on the 2-core testbed at saturation: the base's
RX FIFO overflowed 33-106 times in 15 s without it, 29-48 with it, and goodput rose from
0.87-0.95 to 0.97-0.99 of the model. Every loop that runs this way blocks in select(), so it
cannot starve the machine (and Linux keeps 5 % of each second for other processes anyway).
Needs root (CAP_SYS_NICE); without it, a lower nice value, or nothing.
"""

from __future__ import annotations

import contextlib
import os

#: SCHED_FIFO priorities: the emulated hardware (air, modems) above the radio processes, and the
#: receivers (a hard deadline: their FIFO) above the senders (an empty TX FIFO only idles the
#: air). Equal priorities would not preempt each other: a receiver woken while both CPUs run
#: senders that are sealing and fragmenting a packet would wait for them.
HARDWARE = 30
RADIO_RX = 22
RADIO_TX = 20


def prioritise(fifo_priority: int, fallback_nice: int) -> str:
    """Make the calling process real-time if allowed; say what it got."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo_priority))
        return f"SCHED_FIFO {fifo_priority}"
    with contextlib.suppress(OSError):
        os.nice(fallback_nice)
        return f"nice {fallback_nice}"
    return "default"
