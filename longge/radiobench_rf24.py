"""The two sides of radio-bench through the real pyrf24 (``radio-bench --backend rf24``), each
run as ``python -m longge.radiobench_rf24 tx|rx`` by ``radiobench.run_sides``: the same stream
as ``radiobench._stream``, with each radio driven by pyrf24 (through ``Rf24Radio``, the
daemon's backend) in a process of its own on an emulated chip (firmware/native/
spidev_preload.c: one chip per process, each SPI transfer as long as a Pi's unless
LONGGE_SPI_TIMING=off).

The receiver starts first and reads everything; the sender keeps its TX FIFO full for the
plan's seconds (flushing after MAX_RT; in stream mode letting the FIFO drain after each burst,
the 4 ms rule), then lets the last frames go. Each prints its counts as JSON; the receiver's
first-to-last span gives the throughput, as with the sim backend.
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import asdict
from typing import Any

from longge.radio.options import RadioOptions, configure
from longge.radiobench import ADDRESS, FIFO_FULL, Counts

#: The receiver stops this long after the last frame (the sender has finished by then).
QUIET_S = 1.0


def _radio(role: str, options: RadioOptions) -> Any:
    from longge.radio.rf24 import Rf24Radio

    radio = Rf24Radio(22 if role == "tx" else 25, 0 if role == "tx" else 1, name=role)
    radio.begin()
    configure(radio, options)
    return radio


def _receive(options: RadioOptions, seconds: float) -> dict[str, int]:
    rx = _radio("rx", options)
    rx.open_rx_pipe(1, ADDRESS)
    rx.start_listening()
    print("listening", flush=True)
    c = Counts()
    deadline = time.monotonic() + seconds + 30
    while time.monotonic() < deadline:
        if rx.available():
            c.take(rx.read())
        elif c.received and time.monotonic_ns() - c.last_ns > QUIET_S * 1e9:
            break
    rx.close()
    return asdict(c)


def _send(options: RadioOptions, seconds: float, seed: int) -> dict[str, int]:
    tx = _radio("tx", options)
    tx.stop_listening(ADDRESS)
    rng = random.Random(seed)
    payloads = [rng.randbytes(options.payload) for _ in range(64)]
    stream = options.mode == "stream"
    no_ack = not options.acked and not stream
    burst = options.timing().stream_burst_frames
    in_burst = sent = max_rt = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if stream and in_burst >= burst and tx.is_fifo(True, True):
            in_burst = 0  # the FIFO drained: the chip is back in standby (the 4 ms rule)
        while tx.is_fifo(True) != FIFO_FULL and not (stream and in_burst >= burst):
            tx.write_fast(payloads[sent % 64], no_ack)
            sent += 1
            in_burst += 1
        if tx.what_happened()[1]:  # MAX_RT: drop the frame, as a link would
            max_rt += 1
            tx.flush_tx()
    deadline = time.monotonic() + 1.0
    while not tx.is_fifo(True, True) and time.monotonic() < deadline:
        if tx.what_happened()[1]:
            max_rt += 1
            tx.flush_tx()
            break
    tx.close()
    return {"sent": sent, "max_rt": max_rt}


def main(role: str, options_json: str, seconds: str, seed: str) -> None:
    options = RadioOptions(**json.loads(options_json))
    if role == "rx":
        out = _receive(options, float(seconds))
    else:
        out = _send(options, float(seconds), int(seed))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
