"""The base station's measurement servers: iperf3 (libiperf) and the UDP RTT echo.

The iperf3 server runs each test in a fresh forked process (python-iperf3's ``Server`` handles
one test and keeps state we do not trust across tests). libiperf's own timeouts end a test
whose client vanished (120 s without data) and an idle wait (``IDLE_TIMEOUT_S``);
a process that outlives both plus the longest test is killed. Either way a new server is
listening again within seconds.

Both listen on the link's address only (``--bind``: the base's own address on the radio link),
so nobody upstream of the base holds the one iperf3 slot or reaches libiperf's parser; and
with ``--user`` they give up root once their sockets and log are open (the systemd unit runs
them as a user of their own instead).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import multiprocessing as mp
import os
import signal
import socket
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from longge.errors import LongGeError
from longge.measure import rtt
from longge.realtime import die_with_parent

IPERF_PORT = 5201
IDLE_TIMEOUT_S = 30
#: How long the servers wait for the link's address to appear (its TUN coming up).
ADDRESS_WAIT_S = 30.0
#: How long "ready" waits for the iperf3 server to listen.
LISTEN_WAIT_S = 10.0
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


def _one_iperf_test(port: int, log: IO[str] | None, host: str = "0.0.0.0") -> None:
    import iperf3

    server = iperf3.Server()
    for fd in (server._pipe_in, server._pipe_out):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
    server.port = port
    if host != "0.0.0.0":
        server.bind_address = host
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
        log.write(json.dumps(line) + "\n")
        log.flush()


def iperf_server_loop(
    port: int = IPERF_PORT,
    log: IO[str] | None = None,
    stop: Callable[[], bool] = lambda: False,
    host: str = "0.0.0.0",
) -> None:
    """Serve iperf3 tests back to back until ``stop()``, on ``host`` (0.0.0.0: every address);
    a line per test to ``log`` (an open file: the process may no longer be allowed to open one)."""
    while not stop():
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            if not die_with_parent(parent, signal.SIGKILL):  # (its port with it)
                os._exit(1)
            try:
                _one_iperf_test(port, log, host)
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
    echo: socket.socket,
    port: int,
    log: IO[str] | None,
    stop: Callable[[], bool],
    host: str,
    user: str | None,
) -> None:
    echo.close()  # (the echo server's, inherited: not this process's to hold)
    parent = os.getppid()
    if user is not None:
        drop_privileges(user)
    # a servers process killed outright (kill -9) takes this one and its test along: their
    # port would keep the next servers process from listening
    if not die_with_parent(parent, signal.SIGKILL):
        return
    iperf_server_loop(port, log, stop, host)


def drop_privileges(user: str) -> None:
    """Become ``user`` (its group, no supplementary groups) for good: ServersError if it does
    not exist or we cannot (not root)."""
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise ServersError(f"--user {user}: no such user") from None
    try:
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
    except OSError as exc:
        raise ServersError(
            f"--user {user}: cannot become it ({exc.strerror}; run as root)"
        ) from exc
    if os.getuid() == 0 or os.geteuid() == 0:  # (setuid to uid 0 is no drop)
        raise ServersError(f"--user {user}: that is root")


def _check_iperf_port(host: str, port: int) -> None:
    """Can the iperf3 server listen there? Each iperf3 test is a fresh libiperf server: on a
    taken port each would fail at once, the next too, without end (a burnt core, and "ready"
    said). The link's address appears with its TUN: a unit started beside the daemon waits
    for it, ADDRESS_WAIT_S at most. ServersError otherwise."""
    deadline = time.monotonic() + ADDRESS_WAIT_S
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (TIME_WAIT: no owner)
            try:
                probe.bind((host, port))
                return
            except OSError as exc:
                if exc.errno != errno.EADDRNOTAVAIL or time.monotonic() >= deadline:
                    raise ServersError(
                        f"the iperf3 server cannot listen on {host} TCP port {port}: "
                        f"{exc.strerror} (another iperf3 server? choose another with "
                        "--iperf-port; an address not on this machine? --bind takes the "
                        "base's link address)"
                    ) from exc
        time.sleep(0.2)


def tcp_listening(port: int) -> bool:
    """Something listens on TCP ``port`` here (IPv4 or IPv6: /proc/net/tcp{,6})."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.readlines()[1:]
        except OSError:
            continue
        for line in rows:
            fields = line.split()
            if (
                len(fields) > 3
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                return True
    return False


def run_servers(
    iperf_port: int = IPERF_PORT,
    rtt_port: int = rtt.DEFAULT_PORT,
    log_dir: str | None = None,
    ready: Callable[[str], None] = lambda s: None,
    host: str = "0.0.0.0",
    user: str | None = None,
) -> dict[str, Any]:
    """Both servers until SIGTERM/SIGINT, on ``host`` (the link's address; 0.0.0.0: every
    address), as ``user`` once the sockets and the log are open (None: as started); returns
    the echo server's counters. ServersError for a port that is taken or an address that is
    not this machine's, before ``ready`` is said (and with no server left running)."""
    check_libiperf()
    _check_iperf_port(host, iperf_port)  # (both ports are asked first)
    try:
        echo = rtt.bind_echo(host, port=rtt_port)
    except OSError as exc:
        raise ServersError(
            f"the RTT echo server cannot listen on {host} UDP port {rtt_port}: {exc.strerror} "
            "(choose another with --rtt-port)"
        ) from exc
    log = open(os.path.join(log_dir, "iperf3-server.jsonl"), "a") if log_dir else None  # noqa: SIM115
    with echo, log or contextlib.nullcontext():
        # Each process gives up root itself, once started: what Python imports on the way (the
        # multiprocessing machinery) may lie where the user cannot read (root's home).
        stop = _CTX.Event()
        iperf = _CTX.Process(
            target=_iperf_process,
            args=(echo, iperf_port, log, stop.is_set, host, user),
            daemon=False,
            name="longge-iperf3-server",
        )
        iperf.start()
        try:
            if user is not None:
                drop_privileges(user)
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            # "ready" once the first test's iperf3 server listens (it binds in a child of the
            # process just started: 50-75 ms later here), or it has had LISTEN_WAIT_S
            until = time.monotonic() + LISTEN_WAIT_S
            while not tcp_listening(iperf_port) and time.monotonic() < until:
                if not iperf.is_alive():
                    raise ServersError("the iperf3 server stopped as it started (its log)")
                time.sleep(0.005)
            who = f", as {user}" if user is not None else ""
            ready(
                f"iperf3 server on port {iperf_port}, RTT echo on UDP port {rtt_port} "
                f"(on {host}{who})"
            )
            core = rtt.serve(stop=stop, bound=echo)
        finally:
            stop.set()
            iperf.join(3)
            if iperf.is_alive():
                iperf.terminate()
                iperf.join(3)
    return dict(core.counters)
