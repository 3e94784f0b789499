"""The daemon's control socket: one JSON object per line, each way, on a Unix stream socket.

    {"cmd": "status"}                                  -> the status object
    {"cmd": "set", "options": {"ard_us": 250, ...}}    -> {"ok": true, "radio": {...}}
                                                          or {"error": "...", "key": "..."}

A malformed or oversized request gets an ``error`` reply and the connection is closed; it
never stops the daemon. Nor does a client that holds the socket: one that lets its replies
pile up unread is dropped once they have waited REPLY_WAIT_S for it, beyond MAX_CLIENTS
connections a new one is refused, and while the process has no descriptor left to accept with,
the socket is not watched for PAUSE_S (the connection waits in the backlog). A connection
that says nothing for IDLE_S is closed, and when all MAX_CLIENTS are taken the one idle the
longest makes room (32 silent connections once locked ``status`` out). Only root, the daemon's
own user or the socket's group may talk to it (SO_PEERCRED, besides its mode 0660); the socket
is made with that mode (umask), no chmod that a symlink could redirect. Each is counted
(``counts()``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import struct
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from longge.errors import LongGeError
from longge.sockets import make_unix_socket

MAX_REQUEST = 64 * 1024
#: Connections served at once; the tools hold one each, for a request or two.
MAX_CLIENTS = 32
#: The longest the daemon waits, per batch of requests, for a client to read its replies.
REPLY_WAIT_S = 0.5
#: How long the socket is not watched after accept() found no descriptor free.
PAUSE_S = 1.0
#: A connection silent this long is closed (the tools send their request at once).
IDLE_S = 10.0
#: What counts() reports (zeros for a daemon whose socket is closed).
COUNTS = (
    "bad_requests",
    "handler_errors",
    "clients_refused",
    "clients_dropped",
    "out_of_fds",
    "clients_idle",
    "peers_refused",
)
_UCRED = struct.Struct("3i")  # pid, uid, gid (SO_PEERCRED)


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket."""
    return _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))


Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControlError(LongGeError):
    """The daemon's control socket cannot be reached or answered badly."""


class ControlServer:
    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.sock = make_unix_socket(path, socket.SOCK_STREAM, 0o660)
        self.group = os.stat(path).st_gid
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.clients: dict[socket.socket, bytearray] = {}
        self.last_heard: dict[socket.socket, float] = {}
        self.bad_requests = 0
        self.clients_idle = 0  # said nothing for IDLE_S, or made room
        self.peers_refused = 0  # neither root, nor the daemon's user, nor the socket's group
        self.handler_errors = 0
        self.clients_refused = 0  # over MAX_CLIENTS
        self.clients_dropped = 0  # did not read their replies
        self.out_of_fds = 0  # times accept() found no descriptor free
        self._paused_until = 0.0

    def counts(self) -> dict[str, int]:
        """What the socket refused since it opened (the daemon's status, ``control``)."""
        return {name: getattr(self, name) for name in COUNTS}

    def waitables(self) -> Iterator[socket.socket]:
        if time.monotonic() >= self._paused_until:
            yield self.sock
        yield from self.clients

    def service(self, ready: list[Any]) -> None:
        if self.sock in ready:
            self._accept()
        for conn in [c for c in self.clients if c in ready]:
            self._read(conn)
        self._expire(time.monotonic())

    def _expire(self, now: float) -> None:
        """Close the connections silent for IDLE_S."""
        for conn in [c for c, t in self.last_heard.items() if now - t > IDLE_S]:
            self.clients_idle += 1
            self._close(conn)

    def _allowed(self, conn: socket.socket) -> bool:
        """Root, the daemon's own user, or a member (by its primary group) of the socket's."""
        try:
            _, uid, gid = peer_credentials(conn)
        except OSError:
            return False
        return uid in (0, os.geteuid()) or gid == self.group

    def _accept(self) -> None:
        """Take the connections waiting (a few at most: the listen backlog is 16)."""
        for _ in range(MAX_CLIENTS):
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    # The connection stays in the backlog and the socket readable: watched
                    # on, it would wake the daemon at once, again and again.
                    self.out_of_fds += 1
                    self._paused_until = time.monotonic() + PAUSE_S
                    return
                continue  # (ECONNABORTED: that client gave up)
            conn.setblocking(False)
            if not self._allowed(conn):
                self.peers_refused += 1
                refused = "not allowed: the control socket is root's and its group's"
                self._reply(conn, {"error": refused}, time.monotonic())
                conn.close()
                continue
            if len(self.clients) >= MAX_CLIENTS:
                self._make_room()
            if len(self.clients) >= MAX_CLIENTS:
                self.clients_refused += 1
                too_many = f"too many control connections (at most {MAX_CLIENTS})"
                self._reply(conn, {"error": too_many}, time.monotonic())
                conn.close()
                continue
            self.clients[conn] = bytearray()
            self.last_heard[conn] = time.monotonic()

    def _make_room(self) -> None:
        """Close the connection idle the longest that holds no part of a request."""
        quiet = [c for c in self.clients if not self.clients[c]]
        if quiet:
            self.clients_idle += 1
            self._close(min(quiet, key=lambda c: self.last_heard[c]))

    def _read(self, conn: socket.socket) -> None:
        buf = self.clients[conn]
        try:
            data = conn.recv(MAX_REQUEST)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        self.last_heard[conn] = time.monotonic()
        buf += data
        if len(buf) > MAX_REQUEST:
            self._reply(conn, {"error": "request too large"}, time.monotonic())
            self._close(conn)
            return
        deadline = time.monotonic() + REPLY_WAIT_S
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                # (RecursionError: JSON nested deeper than the parser goes, "[[[[...")
                self.bad_requests += 1
                self._reply(conn, {"error": f"bad request: {exc}"}, deadline)
                self._close(conn)
                return
            if not self._reply(conn, self._answer(req), deadline):
                self.clients_dropped += 1
                self._close(conn)
                return

    def _answer(self, req: dict[str, Any]) -> dict[str, Any]:
        """The handler's reply. A request that makes it raise is a bug of ours, but it must not
        take the link down: it is answered with an error, counted, and logged with its
        traceback (stderr: the daemon's log)."""
        try:
            return self.handler(req)
        except Exception as exc:
            self.handler_errors += 1
            traceback.print_exc(file=sys.stderr)
            return {"error": f"internal error on this request ({type(exc).__name__}: {exc})"}

    def _reply(self, conn: socket.socket, obj: dict[str, Any], deadline: float) -> bool:
        """Send ``obj``, waiting for room until ``deadline`` at most: False if it did not go
        whole (the client let its replies pile up unread, or has gone)."""
        data = json.dumps(obj).encode() + b"\n"
        try:
            sent = conn.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            return False
        if sent == len(data):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            conn.settimeout(left)
            conn.sendall(data[sent:])
            return True
        except OSError:  # (TimeoutError too)
            return False
        finally:
            with contextlib.suppress(OSError):
                conn.setblocking(False)

    def _close(self, conn: socket.socket) -> None:
        self.clients.pop(conn, None)
        self.last_heard.pop(conn, None)
        conn.close()

    def close(self) -> None:
        for conn in list(self.clients):
            self._close(conn)
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def request(path: str, req: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """Send one request to a daemon and return its reply."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise ControlError(f"no LongGe daemon at {path} (is it running?)") from exc
    except PermissionError as exc:
        raise ControlError(
            f"control socket {path}: permission denied: the daemon's sockets are root's "
            "(sudo ./run.sh status)"
        ) from exc
    except OSError as exc:
        raise ControlError(f"control socket {path}: {exc}") from exc
    try:
        reply = json.loads(buf)
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise ControlError(f"control socket {path} answered badly: {buf[:80]!r}")
    return reply
