"""The daemon's control socket: one JSON object per line, each way, on a Unix stream socket.

    {"cmd": "status"}                                  -> the status object
    {"cmd": "set", "options": {"ard_us": 250, ...}}    -> {"ok": true, "radio": {...}}
                                                          or {"error": "...", "key": "..."}

A malformed or oversized request gets an ``error`` reply and the connection is closed; it
never stops the daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from longge.errors import LongGeError

MAX_REQUEST = 64 * 1024

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControlError(LongGeError):
    """The daemon's control socket cannot be reached or answered badly."""


class ControlServer:
    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o660)
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.clients: dict[socket.socket, bytearray] = {}
        self.bad_requests = 0
        self.handler_errors = 0

    def waitables(self) -> Iterator[socket.socket]:
        yield self.sock
        yield from self.clients

    def service(self, ready: list[Any]) -> None:
        if self.sock in ready:
            with contextlib.suppress(BlockingIOError):
                conn, _ = self.sock.accept()
                conn.setblocking(False)
                self.clients[conn] = bytearray()
        for conn in [c for c in self.clients if c in ready]:
            self._read(conn)

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
        buf += data
        if len(buf) > MAX_REQUEST:
            self._reply(conn, {"error": "request too large"})
            self._close(conn)
            return
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except (ValueError, UnicodeDecodeError) as exc:
                self.bad_requests += 1
                self._reply(conn, {"error": f"bad request: {exc}"})
                self._close(conn)
                return
            self._reply(conn, self._answer(req))

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

    def _reply(self, conn: socket.socket, obj: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            conn.setblocking(True)
            conn.settimeout(2)
            conn.sendall(json.dumps(obj).encode() + b"\n")
            conn.setblocking(False)

    def _close(self, conn: socket.socket) -> None:
        self.clients.pop(conn, None)
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
        reply: dict[str, Any] = json.loads(buf)
    except ValueError as exc:
        raise ControlError(f"control socket {path} answered badly: {buf[:80]!r}") from exc
    return reply
