"""The base station's measurement servers: iperf3 (libiperf) and the UDP RTT echo.

The iperf3 server runs each test in a fresh forked process (python-iperf3's ``Server`` handles
one test and keeps state we do not trust across tests). libiperf's own timeouts end a test
whose client vanished (120 s without data) and an idle wait (``IDLE_TIMEOUT_S``);
a process that outlives both plus the longest test is killed. Either way a new server is
listening again within seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import multiprocessing as mp
import os
import signal
import socket
import time
import traceback
from collections.abc import Callable
from typing import Any

from longge.errors import LongGeError
from longge.measure import rtt

IPERF_PORT = 5201
IDLE_TIMEOUT_S = 30
MAX_TEST_S = 600
_F_SETPIPE_SZ = 1031
_CTX = mp.get_context("fork")


class ServersError(LongGeError):
    """The measurement servers cannot run here (names what is missing)."""


def check_libiperf() -> None:
    """python-iperf3 finds libiperf (else each forked test would die at once, forever)."""
    import iperf3

    try:
        iperf3.Server()
    except OSError as exc:
        raise ServersError(
            f"iperf3's library cannot be loaded ({exc}): apt install iperf3 libiperf0, or "
            "./run.sh help"
        ) from exc


def _one_iperf_test(port: int, log: str | None) -> None:
    import iperf3

    server = iperf3.Server()
    for fd in (server._pipe_in, server._pipe_out):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
    server.port = port
    server.json_output = True
    lib = server.lib
    with contextlib.suppress(AttributeError):  # libiperf >= 3.11
        # (iperf_set_test_rcv_timeout crashes libiperf 3.12 when called through ctypes; its
        # default, 120 s without data, ends a test whose client vanished from the network.
        # A client that dies on a live network closes its connections and ends it at once.)
        fn = lib.iperf_set_test_idle_timeout
        fn.argtypes = (ctypes.c_void_p, ctypes.c_int)
        fn.restype = None
        fn(server._test, IDLE_TIMEOUT_S)
    result = server.run()
    raw = getattr(result, "json", None) or {"error": getattr(result, "error", "no result")}
    if log:
        end = raw.get("end", {}) if isinstance(raw, dict) else {}
        line = {
            "time": time.time(),
            "received_bps": end.get("sum_received", {}).get("bits_per_second"),
            "error": raw.get("error") if isinstance(raw, dict) else None,
        }
        with open(log, "a") as f:
            f.write(json.dumps(line) + "\n")


def iperf_server_loop(
    port: int = IPERF_PORT, log: str | None = None, stop: Callable[[], bool] = lambda: False
) -> None:
    """Serve iperf3 tests back to back until ``stop()``."""
    while not stop():
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _one_iperf_test(port, log)
            except BaseException:
                traceback.print_exc()  # (the servers' log)
                code = 1
            os._exit(code)
        started = time.monotonic()
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if stop() or time.monotonic() - started > IDLE_TIMEOUT_S + MAX_TEST_S:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.05)
        time.sleep(0.05)  # "server is busy" otherwise: let the port settle


def _iperf_process(
    echo: socket.socket, port: int, log: str | None, stop: Callable[[], bool]
) -> None:
    echo.close()  # (the echo server's, inherited: not this process's to hold)
    iperf_server_loop(port, log, stop)


def run_servers(
    iperf_port: int = IPERF_PORT,
    rtt_port: int = rtt.DEFAULT_PORT,
    log_dir: str | None = None,
    ready: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Both servers until SIGTERM/SIGINT; returns the echo server's counters. ServersError
    for a port that is taken, before ``ready`` is said (and with no server left running)."""
    check_libiperf()
    # Each iperf3 test is a fresh libiperf server: on a taken port each would fail at once,
    # the next too, without end (a burnt core, and "ready" said). So both ports are asked first.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (TIME_WAIT is no owner)
        try:
            probe.bind(("0.0.0.0", iperf_port))
        except OSError as exc:
            raise ServersError(
                f"the iperf3 server cannot listen on TCP port {iperf_port}: {exc.strerror} "
                "(another iperf3 server? choose another with --iperf-port)"
            ) from exc
    try:
        echo = rtt.bind_echo(port=rtt_port)
    except OSError as exc:
        raise ServersError(
            f"the RTT echo server cannot listen on UDP port {rtt_port}: {exc.strerror} "
            "(choose another with --rtt-port)"
        ) from exc
    with echo:
        stop = _CTX.Event()
        log = os.path.join(log_dir, "iperf3-server.jsonl") if log_dir else None
        iperf = _CTX.Process(
            target=_iperf_process,
            args=(echo, iperf_port, log, stop.is_set),
            daemon=False,
            name="longge-iperf3-server",
        )
        iperf.start()
        try:
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            ready(f"iperf3 server on port {iperf_port}, RTT echo on UDP port {rtt_port}")
            core = rtt.serve(stop=stop, bound=echo)
        finally:
            stop.set()
            iperf.join(3)
            if iperf.is_alive():
                iperf.terminate()
                iperf.join(3)
    return dict(core.counters)
