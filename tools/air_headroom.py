"""Headroom of the emulator for a no-ack stream in both directions at once. Run by hand:

    .venv/bin/python -m tools.air_headroom [--seconds 10] [--rounds 3]

One air server and four radio hosts (an uplink and a downlink, each a transmitter and a
receiver in its own process, event-driven as the daemon's radio processes are: they sleep on
the radio's descriptor instead of polling). Each transmitter keeps its TX FIFO full of 32-byte
payloads with auto-ack off (2 Mbit/s, two channels 4 MHz apart). Printed per round: each
direction's throughput as a ratio to the datasheet's no-ack bound, and the CPU the emulator
used (air + the four hosts) in cores. Target: >= 0.95 each way with at most one core in all.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

from longge.air import native
from longge.measure.cpu import process_cpu_s
from longge.radio.options import RadioOptions, configure
from longge.radio.sim import SimRadio
from longge.realtime import RADIO_RX, RADIO_TX, prioritise
from tools.rounds import repeat

_CTX = mp.get_context("fork")
_FULL = 2


def host(air: str, role: str, channel: int, seconds: float, conn: Connection) -> None:
    opts = RadioOptions(rate="2M", auto_ack=False)
    prioritise(RADIO_RX if role.endswith("rx") else RADIO_TX, -5, "world")
    radio = SimRadio(air=air, name=role)
    assert radio.begin()
    configure(radio, opts, channel=channel)
    address = f"LG{channel:03d}".encode()
    if role.endswith("rx"):
        radio.open_rx_pipe(1, address)
        radio.start_listening()
    else:
        radio.stop_listening(address)
    conn.send("ready")
    conn.recv()  # go
    payload = bytes(range(32))
    frames = nbytes = 0
    first = last = 0.0
    t0 = os.times()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if role.endswith("tx"):
            while radio.is_fifo(True) != _FULL:
                radio.write_fast(payload)
                frames += 1
            radio.wait(0.01)
        elif radio.wait(0.01):
            while radio.available():
                got = radio.read()
                now = time.monotonic()
                if frames == 0:
                    first = now
                else:
                    nbytes += len(got)
                frames += 1
                last = now
    t1 = os.times()
    cpu = (t1.user - t0.user) + (t1.system - t0.system)
    rate = nbytes * 8 / (last - first) if last > first else 0.0
    conn.send({"role": role, "frames": frames, "bps": rate, "cpu_s": cpu})
    radio.close()


def one_round(seconds: float) -> dict[str, float]:
    bound = RadioOptions(rate="2M", auto_ack=False).timing().bound_bps(False)
    with tempfile.TemporaryDirectory(prefix="longge-headroom-") as tmp:
        path = os.path.join(tmp, "air.sock")
        air = native.start(path)
        procs: list[tuple[Any, Connection]] = []
        try:
            for role, channel in (("up-rx", 76), ("down-rx", 80), ("up-tx", 76), ("down-tx", 80)):
                ours, theirs = _CTX.Pipe()
                p = _CTX.Process(target=host, args=(path, role, channel, seconds, theirs))
                p.start()
                assert ours.recv() == "ready"
                procs.append((p, ours))
            air_cpu0 = process_cpu_s(air.pid)
            t0 = time.monotonic()
            for _, conn in procs:
                conn.send("go")
            results = {r["role"]: r for r in (conn.recv() for _, conn in procs)}
            span = time.monotonic() - t0
            air_cpu = process_cpu_s(air.pid) - air_cpu0
            for p, _ in procs:
                p.join(5)
        finally:
            native.stop(air)
    hosts = sum(r["cpu_s"] for r in results.values())
    out = {
        "up_ratio": results["up-rx"]["bps"] / bound,
        "down_ratio": results["down-rx"]["bps"] / bound,
        "air_cores": air_cpu / span,
        "hosts_cores": hosts / span,
        "emulator_cores": (air_cpu + hosts) / span,
    }
    for role in ("up-tx", "up-rx", "down-tx", "down-rx"):
        out[f"{role}_cores"] = results[role]["cpu_s"] / span
    each = ", ".join(
        f"{r} {out[r + '_cores']:.2f}" for r in ("up-tx", "up-rx", "down-tx", "down-rx")
    )
    print(
        f"  uplink {results['up-rx']['bps'] / 1e3:.1f} kbit/s = {out['up_ratio']:.3f} of the "
        f"no-ack bound {bound / 1e3:.1f}; downlink {out['down_ratio']:.3f}; CPU: air "
        f"{out['air_cores']:.2f}, hosts {out['hosts_cores']:.2f} ({each})"
        f" = {out['emulator_cores']:.2f} cores",
        flush=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    repeat(args.rounds, lambda: one_round(args.seconds))


if __name__ == "__main__":
    main()
