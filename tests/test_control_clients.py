"""Clients of a running daemon's control socket that once stopped it: JSON nested deeper than
the parser goes, a client that never reads its replies, more connections than it serves, and a
process out of file descriptors. Each is refused and counted (status ``control``); the daemon
goes on answering and carrying packets."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import time
from collections.abc import Iterator

import pytest
from daemonlink import Link, ip_packet, make_link

from longge.daemon.control import MAX_CLIENTS, MAX_REQUEST, PAUSE_S

#: A guard against a daemon that hangs on a client (the old one blocked ~2 s a reply).
HANG_S = 30.0


@pytest.fixture
def link(air_path: str, tmp_path: os.PathLike[str]) -> Iterator[Link]:
    with make_link(air_path, str(tmp_path)) as lk:
        yield lk


def connect(link: Link) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(HANG_S)  # (a full listen backlog makes connect() wait)
    s.connect(link.mobile.cfg.control)
    s.settimeout(0.05)
    return s


def reply(link: Link, s: socket.socket) -> bytes:
    """The daemon's next line on ``s`` (empty if it closed first), pumping the link meanwhile."""
    buf = b""
    deadline = time.monotonic() + HANG_S
    while not buf.endswith(b"\n") and time.monotonic() < deadline:
        link.pump(0.02)
        try:
            chunk = s.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        buf += chunk
    return buf


def counts(link: Link) -> dict[str, int]:
    return dict(link.mobile.status()["control"])


def still_serves(link: Link) -> None:
    with connect(link) as s:
        s.sendall(b'{"cmd": "status"}\n')
        assert b'"link"' in reply(link, s)
    pkt = ip_packet(120, 9)
    assert link.send(link.mtun, [pkt], to=link.btun) == [pkt]


def test_json_nested_deeper_than_the_parser_goes_is_a_bad_request(link: Link) -> None:
    with connect(link) as s:
        s.sendall(b"[" * 5000 + b"\n")  # json.loads raises RecursionError, not ValueError
        assert b"bad request" in reply(link, s)
    assert counts(link)["bad_requests"] == 1
    still_serves(link)


def test_a_client_that_never_reads_its_replies_is_dropped(link: Link) -> None:
    line = b'{"cmd": "status"}\n'
    with connect(link) as s:
        s.sendall(line * ((MAX_REQUEST - 1) // len(line)))  # far more replies than fit unread
        deadline = time.monotonic() + HANG_S
        while counts(link)["clients_dropped"] == 0 and time.monotonic() < deadline:
            link.pump(0.02)
        assert counts(link)["clients_dropped"] == 1
        # it got the replies that fitted (the last one may be cut), then the end of the stream
        got = b""
        s.settimeout(1)
        with contextlib.suppress(OSError):
            while chunk := s.recv(1 << 20):
                got += chunk
        whole = got.split(b"\n")[:-1]
        assert whole and all(json.loads(r)["link"] in ("up", "down") for r in whole)
    still_serves(link)


def test_connections_beyond_what_the_daemon_serves_make_room_or_are_refused(link: Link) -> None:
    """Beyond 32 connections a silent one makes room (the one silent the longest is closed,
    counted as idle): 32 silent connections once locked ``status`` out. Where every one holds
    part of a request, a new one is refused instead."""
    held: list[socket.socket] = []
    try:
        for i in range(MAX_CLIENTS + 3):
            held.append(connect(link))
            if i % 8 == 7:
                link.pump(0.05)  # accept them: the listen backlog is short
        link.pump(0.1)
        assert counts(link)["clients_idle"] == 3 and counts(link)["clients_refused"] == 0
        for s in held[:3]:  # the three silent the longest: closed
            s.settimeout(2)
            assert s.recv(100) == b""
        for s in held:
            s.close()
        link.pump(0.1)
        held = []
        for i in range(MAX_CLIENTS + 2):
            s = connect(link)
            held.append(s)
            if i < MAX_CLIENTS:
                s.sendall(b'{"cmd": ')  # (half a request: no room made from it)
            if i % 8 == 7:
                link.pump(0.05)
        link.pump(0.1)
        for s in held[MAX_CLIENTS:]:
            assert b"too many control connections" in reply(link, s)
        assert counts(link)["clients_refused"] == 2
    finally:
        for s in held:
            s.close()
    link.pump(0.1)
    still_serves(link)


def test_a_daemon_out_of_file_descriptors_waits_without_spinning_and_lives_on(
    link: Link,
) -> None:
    waiting = connect(link)  # in the listen backlog, not yet accepted
    fillers: list[int] = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        # every descriptor number below the limit taken: accept() fails with EMFILE
        top = max(int(fd) for fd in os.listdir("/proc/self/fd"))
        while not fillers or fillers[-1] <= top:
            fillers.append(os.open(os.devnull, os.O_RDONLY))
        resource.setrlimit(resource.RLIMIT_NOFILE, (fillers[-1] + 1, hard))
        start = time.monotonic()
        for _ in range(3):
            link.mobile.step(0.01)
        took = time.monotonic() - start
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        for fd in fillers:
            os.close(fd)
        if not counts(link)["out_of_fds"]:
            waiting.close()
    assert counts(link)["out_of_fds"] >= 1
    if took < PAUSE_S:  # (the socket is watched again after PAUSE_S)
        assert counts(link)["out_of_fds"] == 1  # not woken again and again by the backlog
    # the connection waited in the backlog: served once descriptors are free again
    with waiting:
        waiting.sendall(b'{"cmd": "status"}\n')
        assert b'"link"' in reply(link, waiting)
    still_serves(link)
