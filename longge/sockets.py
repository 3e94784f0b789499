"""Unix sockets made safe to bind in a shared folder (the daemon's control socket, the air's)."""

from __future__ import annotations

import contextlib
import os
import socket


def make_unix_socket(path: str, kind: int, mode: int = 0o660) -> socket.socket:
    """A Unix socket bound at ``path`` with ``mode`` from the start (umask while it binds: a
    chmod after it would follow a symlink put there in a world-writable folder). A file
    already at ``path`` is replaced; a symlink there is removed, never followed."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, kind)
    old = os.umask(0o777 & ~mode)
    try:
        sock.bind(path)
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old)
    return sock
