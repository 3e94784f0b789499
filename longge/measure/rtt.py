"""UDP round-trip-time probes: an echo server (base station) and an isochronous client.

Probe (client -> server), at least ``PROBE_LEN`` bytes, big endian::

    magic "LGRT" | version 1 | kind 0=probe | 0 0 | seq u32 | client_send_ns u64 | zeros…

Reply (server -> client), as long as its probe (so that both directions cost the same frames,
as with ping and irtt): the same header with kind 1, the server's processing time (receive
to send, ns) in bytes 24..31, zeros after. A reply is never larger than its probe (no
amplification);
a probe shorter than ``PROBE_LEN``, with a wrong magic or version, or over the per-client rate
is counted and dropped. RTT is measured on the client's own clock only, so the two clocks
need not agree (docs/design.md §3: RTT, not one-way delay); like irtt's, it excludes the server's
processing time, which is recorded beside it.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MAGIC = b"LGRT"
VERSION = 1
HEADER = struct.Struct("!4sBBxxIQ")
PROBE_LEN = HEADER.size + 8  # 32 bytes
DEFAULT_PORT = 7770
IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)
MAX_REPLY = 1472  # one unfragmented datagram on a 1500-byte MTU


def encode_probe(seq: int, send_ns: int, size: int = PROBE_LEN) -> bytes:
    return HEADER.pack(MAGIC, VERSION, 0, seq & 0xFFFFFFFF, send_ns).ljust(
        max(size, PROBE_LEN), b"\0"
    )


def decode_reply(data: bytes) -> tuple[int, int, int] | None:
    """(seq, client_send_ns, server_processing_ns) of a valid reply, else None."""
    if len(data) < PROBE_LEN:
        return None
    magic, version, kind, seq, send_ns = HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION or kind != 1:
        return None
    return seq, send_ns, struct.unpack_from("!Q", data, HEADER.size)[0]


@dataclass
class _Bucket:
    tokens: float
    last: float


class EchoCore:
    """The server's decisions, sans-IO: ``handle(data, peer, now)`` -> reply or None."""

    def __init__(self, rate_pps: float = 500.0, burst: float = 100.0, max_clients: int = 1024):
        self.rate_pps = rate_pps
        self.burst = burst
        self.max_clients = max_clients
        self.counters: Counter[str] = Counter()
        self._buckets: dict[Any, _Bucket] = {}

    def handle(self, data: bytes, peer: Any, now: float) -> bytes | None:
        if len(data) < PROBE_LEN:
            self.counters["short"] += 1
            return None
        magic, version, kind, seq, send_ns = HEADER.unpack_from(data)
        if magic != MAGIC or version != VERSION or kind != 0:
            self.counters["garbage"] += 1
            return None
        if not self._allow(peer[0] if isinstance(peer, tuple) else peer, now):
            self.counters["rate_limited"] += 1
            return None
        self.counters["echoed"] += 1
        reply = HEADER.pack(MAGIC, VERSION, 1, seq, send_ns) + bytes(8)
        return reply.ljust(min(len(data), MAX_REPLY), b"\0")

    def _allow(self, client: Any, now: float) -> bool:
        b = self._buckets.get(client)
        if b is None:
            if len(self._buckets) >= self.max_clients and not self._forget_a_full_bucket(now):
                self.counters["clients_full"] += 1  # (counted apart from rate_limited too)
                return False
            b = self._buckets[client] = _Bucket(self.burst, now)
        b.tokens = min(self.burst, b.tokens + (now - b.last) * self.rate_pps)
        b.last = now
        if b.tokens < 1:
            return False
        b.tokens -= 1
        return True

    def _forget_a_full_bucket(self, now: float) -> bool:
        """Make room by forgetting a client whose bucket has refilled to the full burst: it
        would start again exactly there, so forgetting it gives it nothing. A client being
        limited is never forgotten (once the oldest was: 1024 spoofed sources reset any
        victim's limit, a reflector again). False: every client is being limited."""
        for key, b in self._buckets.items():
            if b.tokens + (now - b.last) * self.rate_pps >= self.burst:
                del self._buckets[key]
                return True
        return False


# Kernel receive timestamps (Linux SO_TIMESTAMPNS, CLOCK_REALTIME): they leave the time a busy
# machine takes to wake the process up out of the measurement, at both ends.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")


def enable_rx_timestamps(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def recv_stamped(sock: socket.socket) -> tuple[bytes, Any, int]:
    """(data, peer, receive time in ns on the realtime clock: the kernel's if it gave one)."""
    data, anc, _, peer = sock.recvmsg(2048, socket.CMSG_SPACE(_TIMESPEC.size))
    for level, kind, value in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(value)
            return data, peer, sec * 1_000_000_000 + nsec
    return data, peer, time.time_ns()


def stamp_processing(reply: bytes, received_ns: int) -> bytes:
    """Write the server's processing time into a reply, just before it is sent."""
    took = max(0, time.time_ns() - received_ns)
    return reply[: HEADER.size] + struct.pack("!Q", took) + reply[HEADER.size + 8 :]


def bind_echo(host: str = "0.0.0.0", port: int = DEFAULT_PORT) -> socket.socket:
    """The echo server's socket (OSError: the port taken, or not ours to bind). On the link's
    address it binds before that address exists (IP_FREEBIND: the TUN may come up later)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        if host != "0.0.0.0":
            sock.setsockopt(socket.IPPROTO_IP, IP_FREEBIND, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def serve(
    host: str = "0.0.0.0",
    port: int = DEFAULT_PORT,
    core: EchoCore | None = None,
    stop: Any = None,
    bound: socket.socket | None = None,
) -> EchoCore:
    """Echo until ``stop`` (an Event-like object) is set; on ``bound`` (bind_echo) if given."""
    core = core or EchoCore()
    with bound or bind_echo(host, port) as sock:
        enable_rx_timestamps(sock)
        while stop is None or not stop.is_set():
            ready, _, _ = select.select([sock], [], [], 0.5)
            if not ready:
                continue
            try:
                data, peer, received = recv_stamped(sock)
            except OSError:
                core.counters["receive_failed"] += 1
                continue
            reply = core.handle(data, peer, time.monotonic())
            if reply is not None:
                try:  # a peer it cannot send to (port 0, no route now) costs its reply only
                    sock.sendto(stamp_processing(reply, received), peer)
                except OSError:
                    core.counters["send_failed"] += 1
    return core


@dataclass
class ProbeRun:
    interval_s: float
    sent: int = 0
    rtt_ms: dict[int, float] = field(default_factory=dict)
    server_ms: dict[int, float] = field(default_factory=dict)
    #: RTT by the user-space receive time (what irtt and ping report): the kernel-stamped
    #: ``rtt_ms`` plus the time this client took to wake up and read the reply.
    app_rtt_ms: dict[int, float] = field(default_factory=dict)
    send_ns: dict[int, int] = field(default_factory=dict)
    bad_replies: int = 0

    @property
    def lost(self) -> int:
        return self.sent - len(self.rtt_ms)

    def as_dict(self) -> dict[str, Any]:
        return {
            "interval_s": self.interval_s,
            "sent": self.sent,
            "received": len(self.rtt_ms),
            "lost": self.lost,
            "bad_replies": self.bad_replies,
            "records": [
                {
                    "seq": s,
                    "send_ns": self.send_ns[s],
                    "rtt_ms": self.rtt_ms.get(s),
                    "server_ms": self.server_ms.get(s),
                    "app_rtt_ms": self.app_rtt_ms.get(s),
                }
                for s in sorted(self.send_ns)
            ],
        }


def probe(
    host: str, port: int, count: int, interval_s: float, size: int = PROBE_LEN, wait_s: float = 2.0
) -> ProbeRun:
    """Send ``count`` probes every ``interval_s`` (by deadline, so the rate is exact) and
    collect replies until ``wait_s`` after the last one."""
    run = ProbeRun(interval_s)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, port))
        enable_rx_timestamps(sock)
        start = time.monotonic_ns()
        step = int(interval_s * 1e9)
        end = start + (count - 1) * step + int(wait_s * 1e9)
        while True:
            now = time.monotonic_ns()
            if run.sent < count and now >= start + run.sent * step:
                sent_at = time.time_ns()  # realtime, the kernel's receive stamps' clock
                run.send_ns[run.sent] = sent_at
                with contextlib.suppress(OSError):  # e.g. no route yet: the probe is lost
                    sock.send(encode_probe(run.sent, sent_at, size))
                run.sent += 1
                continue
            if now >= end or (run.sent == count and len(run.rtt_ms) == count):
                break
            nxt = start + run.sent * step if run.sent < count else end
            ready, _, _ = select.select([sock], [], [], max(0.0, (nxt - now) / 1e9))
            if ready:
                try:
                    data, _, got = recv_stamped(sock)
                except OSError:
                    continue
                woke = time.time_ns()
                dec = decode_reply(data)
                if (
                    dec is None
                    or dec[0] not in run.send_ns
                    or dec[1] != run.send_ns[dec[0]]
                    or dec[0] in run.rtt_ms  # a second reply to one probe
                    or not 0 <= dec[2] <= got - dec[1]  # the server held it longer than it took
                ):
                    run.bad_replies += 1
                    continue
                run.rtt_ms[dec[0]] = (got - dec[1] - dec[2]) / 1e6
                run.server_ms[dec[0]] = dec[2] / 1e6
                run.app_rtt_ms[dec[0]] = (woke - dec[1] - dec[2]) / 1e6
    return run


def main() -> None:
    """``python -m longge.measure.rtt HOST PORT COUNT INTERVAL_S SIZE OUT_JSON`` (lTest)."""
    host, port, count, interval, size, out = sys.argv[1:7]
    run = probe(host, int(port), int(count), float(interval), int(size))
    with open(out, "w") as f:
        json.dump(run.as_dict(), f)


if __name__ == "__main__":
    main()
