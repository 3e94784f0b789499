"""What a turn of the RX process costs in Python, without an air or a radio: its whole
``radio_rx.run`` on a fake chip that has one frame (a packet's first, dropped later as a
stranger's) each turn, a fake clock, the TUN in memory and the process's waiting replaced by
a step of the clock. Prints CPU µs a turn. Run it in two checkouts in turn to compare them:

    PYTHONPATH=. .venv/bin/python -m tools.rx_turn_bench [--mode stream] [--turns N]

(The RX process of an ESB base at saturation turns about 2000 times a second: a microsecond
a turn is 0.2 % of a core.)"""

from __future__ import annotations

import argparse
import socket
import tempfile
import time
import types
from multiprocessing import Pipe
from pathlib import Path
from typing import Any

from longge import realtime
from longge.config import NodeConfig, PeerConfig
from longge.daemon import child as childmod
from longge.daemon import radio_rx
from longge.radio.options import RadioOptions
from longge.tun import MemoryTun


class Chip:
    """An RX chip whose FIFO holds what the test put there; one look at a time."""

    irq_edges = None
    link_errors = None
    failure_detected = False
    channel = data_rate = pa_level = 0

    def __init__(self) -> None:
        self.fifo: list[bytes] = []

    def fileno(self) -> int:
        return 99

    def take_edges(self) -> int:
        return 0

    def _pipe(self) -> int:
        return 1 if self.fifo else 7

    def available_pipe(self) -> tuple[bool, int]:
        pipe = self._pipe()
        return pipe != 7, pipe

    def available(self) -> bool:
        return self._pipe() != 7

    def get_status_flags(self) -> int:
        return self._pipe() << 1

    def is_fifo(self, about_tx: bool, check_empty: bool | None = None) -> int:
        return 1 if not self.fifo else 0

    def read(self) -> bytes:
        return self.fifo.pop(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("esb", "stream"), default="esb")
    ap.add_argument("--turns", type=int, default=40000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    cfg = NodeConfig(
        role="mobile",
        address="10.24.0.2/24",
        peers=(
            PeerConfig(
                name="base",
                address="10.24.0.1",
                tx_address=b"LGm2b",
                rx_address=b"LGb2m",
                key=bytes(range(32)),
            ),
        ),
        air=str(tmp / "air.sock"),
        control=str(tmp / "m.sock"),
        radio=RadioOptions(mode=args.mode),
        state_dir=str(tmp / "state"),
    )
    chip, clock, turns = Chip(), [0.0], [0]
    realtime.prioritise = lambda *a, **k: "default"  # (no SCHED_FIFO)
    radio_rx.time = types.SimpleNamespace(monotonic=lambda: clock[0])  # type: ignore[attr-defined, assignment]

    def ensure(self: Any, now: float) -> Chip:
        return chip

    def wait(self: Any, radio: Any, timeout: float, **_: Any) -> list[Any]:
        turns[0] += 1
        clock[0] += 0.0005
        chip.fifo.append(bytes((0x80,)) + b"x" * 31)
        if turns[0] >= args.turns:
            self.running = False
        return []

    childmod.Child.ensure_radio = ensure  # type: ignore[method-assign, assignment]
    childmod.Child.wait = wait  # type: ignore[method-assign]
    conn, _ = Pipe()
    ours, _theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    start = time.process_time()
    radio_rx.run(cfg, MemoryTun(), conn, ours)
    spent = time.process_time() - start
    print(f"{args.mode}: {spent / args.turns * 1e6:.2f} µs a turn ({args.turns} turns)")


if __name__ == "__main__":
    main()
