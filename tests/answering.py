"""A Unix socket that answers with given bytes: a daemon or an air of another version, or
something else on the socket, as the clients under test meet it."""

from __future__ import annotations

import socket
import threading


def answering(path: str, kind: int, answers: list[bytes]) -> threading.Thread:
    """A socket at ``path`` (``kind``: SOCK_STREAM, SOCK_SEQPACKET) answering each connection's
    first message with the next of ``answers``; the thread ends after the last."""
    srv = socket.socket(socket.AF_UNIX, kind)
    srv.bind(path)
    srv.listen(len(answers))
    srv.settimeout(10)

    def serve() -> None:
        with srv:
            for answer in answers:
                conn, _ = srv.accept()
                with conn:
                    conn.recv(4096)
                    conn.sendall(answer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t
