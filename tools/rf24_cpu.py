"""What the rf24 backend's radio processes cost in CPU, sleeping on the IRQ pins against polling
the chips every 0.2 ms (issue 17's targets: with IRQ, <= 1 % of a core idle and <= 15 % at ESB
saturation). The real pyrf24 on emulated chips, with the Pi's SPI timing on (each ioctl spins
as long as a Pi's would: that CPU is counted, as on a Pi). Run by hand, as root:

    .venv/bin/python -m tools.rf24_cpu [--seconds 10] [--rounds 3] [--mode esb|stream]

Each round brings the testbed up with ``--backend rf24`` twice (IRQ pins wired; polled) and
reads the four radio processes' CPU time (utime + stime, /proc/PID/stat, threads included) over
--seconds idle (keepalives only) and over --seconds of stock iperf3 1400-byte UDP at 1.5x the
model's bound, mobile to base. Printed per process as a share of one core (its main thread:
what the process itself costs, the modelled SPI time included; "watcher": the preload's thread
that takes in the air's messages for the emulated IRQ pin, which a Pi's kernel does instead);
at saturation the busy pair is mobile-tx and base-rx. The goodput is printed beside it (a
cheap radio process that carries less is no win). Issue 17's "<= 15 % at saturation (this
machine)" is read with LONGGE_SPI_TIMING=off: this machine's own work, without the modelled
Pi bus time (docs/measurements.md, 2026-11-25, code of cc70425).
"""

from __future__ import annotations

import json
import os
import time

from longge import testbed
from longge.measure.cpu import process_cpu_s
from longge.radio.options import RadioOptions
from tools.rf24_link import rounds_of
from tools.testbed_link import emulator_processes, iperf_udp, ns, stock_server


def radio_processes() -> dict[str, int]:
    """PID of each radio process, by role and direction ("mobile-tx", ...)."""
    return {k: pid for k, pid in emulator_processes().items() if k != "air"}


def cpu_seconds(pid: int, main: bool) -> float:
    """CPU time of the process's main thread (main), or of its other threads: the preload's
    thread that watches the air for the emulated IRQ pin, the emulator's own work (on a Pi the
    kernel's GPIO interrupt does it)."""
    tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    return sum(process_cpu_s(pid, t) for t in tids if (t == pid) == main)


def shares(pids: dict[str, int], seconds: float, during: object = None) -> dict[str, float]:
    keys = [(k, main) for k in pids for main in (True, False)]
    before = {(k, m): cpu_seconds(pids[k], m) for k, m in keys}
    t0 = time.monotonic()
    if callable(during):
        during()
    else:
        time.sleep(seconds)
    wall = time.monotonic() - t0
    return {
        k if m else f"{k} watcher": (cpu_seconds(pids[k], m) - before[(k, m)]) / wall
        for k, m in keys
    }


def one_variant(opts: RadioOptions, irq: bool, bound: float, seconds: int) -> dict[str, float]:
    testbed.up(testbed.TestbedSpec(opts, rf24=True, irq=irq))
    server = stock_server()
    try:
        time.sleep(2)  # radios up, the first keepalives through
        pids = radio_processes()
        idle = shares(pids, seconds)
        got: dict[str, float] = {}

        def load() -> None:
            run = json.loads(ns("lg-mobile", *iperf_udp(bound * 1.5, seconds)))
            got["bps"] = float(run["end"]["sum_received"]["bits_per_second"])

        busy = shares(pids, seconds, load)
    finally:
        server.kill()
        testbed.down()
    name = "irq" if irq else "poll"
    r = {f"{name} idle {k}": v for k, v in idle.items()}
    r.update({f"{name} saturated {k}": v for k, v in busy.items()})
    r[f"{name} goodput of model"] = got["bps"] / bound
    print(
        f"  {name}: idle "
        + ", ".join(f"{k} {v:.1%}" for k, v in sorted(idle.items()))
        + "; saturated "
        + ", ".join(f"{k} {v:.1%}" for k, v in sorted(busy.items()))
        + f"; goodput {got['bps'] / bound:.3f} of the model",
        flush=True,
    )
    return r


def main() -> None:
    if os.environ.get("LONGGE_SPI_TIMING") == "off":
        print("SPI timing off: this machine's own work for the radio processes", flush=True)
    else:
        print(
            "SPI timing like a Pi's: each transfer spins as long as on a Pi, counted "
            "(LONGGE_SPI_TIMING=off: this machine's own work only)",
            flush=True,
        )
    rounds_of(
        lambda opts, bound, seconds: {
            **one_variant(opts, True, bound, seconds),
            **one_variant(opts, False, bound, seconds),
        }
    )


if __name__ == "__main__":
    main()
