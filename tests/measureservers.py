"""The measurement servers (``run_servers``) in a process of their own, on ports free now,
for the tests that measure against them on loopback."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import socket
import time
from collections.abc import Iterator

from longge.measure.servers import run_servers, tcp_listening

_CTX = mp.get_context("fork")
#: The longest the servers may take to be ready (they take ~0.1 s; a busy CI machine more).
READY_S = 20.0


def free_port(kind: int) -> int:
    """A port nobody holds now (the kernel's pick for port 0): SOCK_STREAM for iperf3,
    SOCK_DGRAM for the RTT echo."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def measure_servers() -> Iterator[tuple[int, int]]:
    """(iperf3 port, RTT port) of both servers, once they are ready: they said so through
    ``ready``, and the iperf3 server listens (which ``ready`` now waits for: it once came
    50-75 ms before). Stopped by SIGTERM, as the
    unit stops them. A server that dies first, or is not ready in READY_S, fails the test."""
    iperf_port, rtt_port = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_DGRAM)
    said = _CTX.Event()
    proc = _CTX.Process(
        target=run_servers,
        args=(iperf_port, rtt_port),
        kwargs={"ready": lambda _: said.set()},
        daemon=False,
    )
    deadline = time.monotonic() + READY_S

    def not_yet() -> None:
        assert proc.is_alive(), f"the servers died before they were ready: {proc.exitcode}"
        assert time.monotonic() < deadline, f"the servers were not ready in {READY_S} s"

    proc.start()
    try:
        while not said.wait(0.05):
            not_yet()
        while not tcp_listening(iperf_port):
            not_yet()
            time.sleep(0.005)
        yield iperf_port, rtt_port
    finally:
        assert proc.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
