"""Numbered UDP datagrams from the mobiles to the base, counted as they arrive: the load and
the meter of the experiments that watch a link's goodput change over time (``hostile``: what
a stranger's radio costs; ``agility``: a link moving off a busy channel). Each is a Python
program run in a testbed's namespace (``ip netns exec lg-NAME python -c SENDER ...``).

SENDER (argv: bit/s, seconds, host, port): 1400-byte datagrams, each its number (8 bytes)
and a pattern that depends on it, at the rate given.

RECEIVER (argv: host, port, seconds): one JSON line each SLICE_S, ``[time.monotonic(), bytes
of genuine datagrams, datagrams that came again (the same sender and number), datagrams not
as sent]``.
"""

from __future__ import annotations

DATAGRAM = 1400
SLICE_S = 0.25

#: The mobile's sender (argv: bit/s, seconds, host, port): numbered datagrams.
SENDER = """
import socket, struct, sys, time
rate, seconds, host, port = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
pattern = bytes(range(256)) * 7
gap, n = 1400 * 8 / rate, 0
t = time.monotonic()
end = t + seconds
while t < end:
    body = pattern[n % 256 : n % 256 + 1392]
    try:
        s.sendto(struct.pack(">Q", n) + body, (host, port))
    except OSError:
        pass
    n += 1
    t += gap
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
"""
#: The base's receiver (argv: host, port, seconds): one JSON line per slice with the bytes
#: of genuine datagrams, and the datagrams that came again (from the same sender) or not as
#: sent.
RECEIVER = """
import json, signal, socket, struct, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(0.05)
pattern = bytes(range(256)) * 7
seen, end = set(), time.monotonic() + float(sys.argv[3])
good = again = bad = 0
next_t = time.monotonic() + 0.25
while time.monotonic() < end:
    try:
        data, peer = s.recvfrom(4096)
    except socket.timeout:
        data = None
    if data is not None:
        n = struct.unpack(">Q", data[:8])[0] if len(data) == 1400 else -1
        if n < 0 or data[8:] != pattern[n % 256 : n % 256 + 1392]:
            bad += 1
        elif (peer, n) in seen:
            again += 1
        else:
            seen.add((peer, n))
            good += len(data)
    now = time.monotonic()
    if now >= next_t:
        print(json.dumps([now, good, again, bad]), flush=True)
        good = again = bad = 0
        next_t += 0.25
"""
