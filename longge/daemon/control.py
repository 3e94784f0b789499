"""The daemon's control socket: one JSON object per line, each way, on a Unix stream socket.

    {"cmd": "status"}                                  -> the status object
    {"cmd": "set", "options": {"ard_us": 250, ...}}    -> {"ok": true, "radio": {...}}
                                                          or {"error": "...", "key": "..."}

A malformed or oversized request gets an ``error`` reply and the connection is closed; it
never stops the daemon. Nor does a client that holds the socket: one that does not read its
replies is dropped as soon as a reply would wait for it, and beyond MAX_CLIENTS connections (or
when the process has no descriptor left) a new one is refused. Each is counted (``counts()``).
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
#: Connections served at once; the tools hold one each, for a request or two.
MAX_CLIENTS = 32

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
        self.clients_refused = 0  # over MAX_CLIENTS, or no descriptor left to accept with
        self.clients_dropped = 0  # did not read their replies

    def counts(self) -> dict[str, int]:
        """What the socket refused since it opened (the daemon's status, ``control``)."""
        return {
            "bad_requests": self.bad_requests,
            "handler_errors": self.handler_errors,
            "clients_refused": self.clients_refused,
            "clients_dropped": self.clients_dropped,
        }

    def waitables(self) -> Iterator[socket.socket]:
        yield self.sock
        yield from self.clients

    def service(self, ready: list[Any]) -> None:
        if self.sock in ready:
            self._accept()
        for conn in [c for c in self.clients if c in ready]:
            self._read(conn)

    def _accept(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return
        except OSError:  # EMFILE, ENFILE, ECONNABORTED: this one is lost, the daemon is not
            self.clients_refused += 1
            return
        conn.setblocking(False)
        if len(self.clients) >= MAX_CLIENTS:
            self.clients_refused += 1
            self._reply(conn, {"error": f"too many control connections (at most {MAX_CLIENTS})"})
            conn.close()
            return
        self.clients[conn] = bytearray()

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
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                # (RecursionError: JSON nested deeper than the parser goes, "[[[[...")
                self.bad_requests += 1
                self._reply(conn, {"error": f"bad request: {exc}"})
                self._close(conn)
                return
            if not self._reply(conn, self._answer(req)):
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

    def _reply(self, conn: socket.socket, obj: dict[str, Any]) -> bool:
        """Send ``obj`` without waiting: False if it did not go whole (the client has let its
        earlier replies pile up unread, or has gone)."""
        data = json.dumps(obj).encode() + b"\n"
        try:
            return conn.send(data) == len(data)
        except OSError:
            return False

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
