"""The measurement servers against real clients on loopback, and against malformed input."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from measureservers import measure_servers

from longge.measure import rtt
from longge.measure.iperf import TrialSpec, parse_result, run_trial
from longge.measure.servers import run_servers


def test_echo_core_replies_small_and_drops_junk() -> None:
    core = rtt.EchoCore(rate_pps=1000, burst=10)
    probe = rtt.encode_probe(7, 123456789, size=200)
    reply = core.handle(probe, ("10.0.0.2", 1), 0.0)
    assert reply is not None and len(reply) == len(probe)  # same size back, never larger
    big = core.handle(rtt.encode_probe(8, 1, size=4000), ("10.0.0.2", 1), 0.0)
    assert big is not None and len(big) == rtt.MAX_REPLY
    assert rtt.decode_reply(reply)[:2] == (7, 123456789)  # type: ignore[index]
    assert core.handle(b"LGRT", ("a", 1), 0.0) is None
    assert core.handle(b"X" * 64, ("a", 1), 0.0) is None
    bad_version = bytearray(rtt.encode_probe(1, 1))
    bad_version[4] = 9
    assert core.handle(bytes(bad_version), ("a", 1), 0.0) is None
    assert core.counters == {"echoed": 2, "short": 1, "garbage": 2}


def test_echo_core_limits_each_clients_rate() -> None:
    core = rtt.EchoCore(rate_pps=10, burst=5)
    p = rtt.encode_probe(1, 1)
    answered = sum(core.handle(p, ("flood", 1), 0.0) is not None for _ in range(100))
    assert answered == 5
    assert core.handle(p, ("other", 1), 0.0) is not None  # others are not punished
    assert core.handle(p, ("flood", 1), 1.0) is not None  # tokens come back with time
    assert core.counters["rate_limited"] == 95


@pytest.fixture
def servers() -> Iterator[tuple[int, int]]:
    with measure_servers() as ports:
        yield ports


def test_rtt_probes_over_loopback_and_garbage_does_not_stop_the_server(
    servers: tuple[int, int],
) -> None:
    _, port = servers
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for junk in [b"", b"x", b"LGRT" + bytes(40), os.urandom(1400)]:
            s.sendto(junk, ("127.0.0.1", port))
    run = rtt.probe("127.0.0.1", port, count=30, interval_s=0.01)
    assert run.sent == 30 and run.lost == 0 and run.bad_replies == 0
    assert all(0 < v < 100 for v in run.rtt_ms.values())


@pytest.mark.skipif(os.geteuid() != 0, reason="a raw socket (root) crafts a probe from port 0")
def test_a_probe_the_server_cannot_answer_does_not_stop_it(servers: tuple[int, int]) -> None:
    """A valid probe from UDP source port 0: the reply's sendto() fails (EINVAL). Once that
    ended the echo server, and the iperf3 server with it."""
    import struct

    _, port = servers
    payload = rtt.encode_probe(1, 1)
    udp = struct.pack("!HHHH", 0, port, 8 + len(payload), 0) + payload  # checksum 0: none
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP) as raw:
        raw.sendto(udp, ("127.0.0.1", 0))
    time.sleep(0.2)
    run = rtt.probe("127.0.0.1", port, count=10, interval_s=0.01)
    assert run.sent == 10 and run.lost == 0


def test_a_second_reply_or_one_held_longer_than_its_round_trip_is_no_rtt() -> None:
    """A server (or a path) that answers a probe twice, or says it held the probe longer than
    the whole round trip took (a negative RTT): counted as bad replies, never as RTTs."""
    import struct
    import threading

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as srv:
        srv.bind(("127.0.0.1", 0))
        srv.settimeout(5)
        port = srv.getsockname()[1]

        def hostile() -> None:
            for _ in range(6):
                data, peer = srv.recvfrom(2048)
                _, _, _, seq, send_ns = rtt.HEADER.unpack_from(data)
                head = rtt.HEADER.pack(rtt.MAGIC, rtt.VERSION, 1, seq, send_ns)
                held = 0 if seq % 2 == 0 else 1 << 62  # odd probes: an impossible hold
                reply = (head + struct.pack("!Q", held)).ljust(len(data), b"\0")
                srv.sendto(reply, peer)
                srv.sendto(reply, peer)  # and every reply twice

        t = threading.Thread(target=hostile, daemon=True)
        t.start()
        run = rtt.probe("127.0.0.1", port, count=6, interval_s=0.02, wait_s=3.0)
        t.join(5)
    assert sorted(run.rtt_ms) == [0, 2, 4]
    assert all(v >= 0 for v in run.rtt_ms.values())
    assert run.bad_replies == 3 + 6  # the impossible three, and the second of each pair


def test_back_to_back_iperf3_trials_all_succeed(servers: tuple[int, int]) -> None:
    port, _ = servers
    spec = TrialSpec(host="127.0.0.1", port=port, rate_bps=500_000, duration=1, length=500)
    for _ in range(4):
        r = parse_result(spec, run_trial(spec))
        assert r.error is None, r.error
        assert r.received_bps == pytest.approx(500_000, rel=0.1)


def test_reverse_and_bidir_trials_report_each_direction(servers: tuple[int, int]) -> None:
    """-R: the server sends and the figures are the client's (receiver's); --bidir: both at
    once, each direction with its own received rate and datagram counts (libiperf's
    *_bidir_reverse sums), neither copied from the other."""
    port, _ = servers
    spec = TrialSpec(
        host="127.0.0.1", port=port, rate_bps=400_000, duration=2, length=400, reverse=True
    )
    r = parse_result(spec, run_trial(spec))
    assert r.error is None, r.error
    assert r.received_bps == pytest.approx(400_000, rel=0.1) and r.reverse is None
    spec = TrialSpec(
        host="127.0.0.1", port=port, rate_bps=300_000, duration=2, length=300, bidir=True
    )
    raw = run_trial(spec)
    r = parse_result(spec, raw)
    assert r.error is None and r.reverse is not None, r.error
    for way in (r, r.reverse):
        # (each way's own figures, not a rate target: a busy machine's iperf3 sends less)
        assert 0 < way.received_bps <= 1.1 * 300_000
        assert way.packets > 0 and way.lost_packets == 0
    assert r.reverse.packets == raw["end"]["sum_bidir_reverse"]["packets"]
    assert r.packets == raw["end"]["sum"]["packets"]


def test_a_client_killed_mid_test_does_not_take_the_server_down(
    servers: tuple[int, int],
) -> None:
    port, _ = servers
    victim = subprocess.Popen(
        ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-u", "-b", "1M", "-t", "30"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.5)
    victim.kill()
    victim.wait()
    spec = TrialSpec(host="127.0.0.1", port=port, rate_bps=200_000, duration=1, length=200)
    start = time.monotonic()
    r = parse_result(spec, run_trial(spec))
    assert r.error is None, r.error
    assert time.monotonic() - start < 15


def test_a_client_trial_that_hangs_is_killed(servers: tuple[int, int]) -> None:
    """A 'server' that accepts and says nothing: the trial process is killed on time."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        spec = TrialSpec(host="127.0.0.1", port=silent.getsockname()[1], duration=1)
        start = time.monotonic()
        raw = run_trial(spec, grace_s=2, retries=1)
    assert "error" in raw
    assert time.monotonic() - start < 10


def test_iperf_client_module_reports_bad_specs() -> None:
    out = "/tmp/longge-test-badspec.json"
    subprocess.run([sys.executable, "-m", "longge.measure.iperf_client", "{}", out], timeout=30)
    with open(out) as f:
        assert "error" in f.read()
    os.unlink(out)


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_a_taken_port_is_named_before_the_servers_say_they_are_ready(kind: str) -> None:
    """A taken iperf3 port once made every iperf3 test fail at once and the next start, without
    end (a core burnt, and "ready" said all the same)."""
    from longge.measure.servers import ServersError

    said: list[str] = []
    with socket.socket(
        socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM
    ) as squatter:
        squatter.bind(("127.0.0.1", 0))
        if kind == "tcp":
            squatter.listen()
        taken = squatter.getsockname()[1]
        free = _free_port(socket.SOCK_DGRAM if kind == "tcp" else socket.SOCK_STREAM)
        ports = (taken, free) if kind == "tcp" else (free, taken)
        started = time.monotonic()
        with pytest.raises(ServersError) as err:
            run_servers(*ports, ready=said.append)
    assert f"{kind.upper()} port {taken}" in str(err.value)
    assert said == [] and time.monotonic() - started < 10
    assert not [p for p in mp.active_children() if p.name == "longge-iperf3-server"]
