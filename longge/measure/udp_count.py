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

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from longge import testbed
from longge.measure.model import udp_goodput_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions

DATAGRAM = 1400
SLICE_S = 0.25
PORT = 9000

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


def bound_bps(mode: str) -> float:
    """The model's UDP goodput of 1400-byte datagrams over a secured link in ``mode`` (the
    bound the experiments' goodputs are shares of)."""
    return udp_goodput_bps(RadioOptions(mode=mode), DATAGRAM, OVERHEAD)


@dataclass
class Meter:
    """The RECEIVER's slices once the load ended: ``[time, good bytes, again, bad]``."""

    slices: list[list[float]] = field(default_factory=list)


@contextlib.contextmanager
def counted_load(mobiles: Sequence[str], rate_bps: float, seconds: float) -> Iterator[Meter]:
    """A RECEIVER in the base's namespace and a SENDER at ``rate_bps`` in each of
    ``mobiles``' (testbed names) for ``seconds`` at most; on the way out they are ended and
    the meter's slices read (a failure inside still ends them)."""
    base = ("ip", "netns", "exec", "lg-base", sys.executable, "-c", RECEIVER)
    meter = Meter()
    receiver = subprocess.Popen(
        [*base, testbed.BASE_IP, str(PORT), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    procs: list[subprocess.Popen[Any]] = [receiver]
    try:
        time.sleep(1.0)  # (listening)
        for name in mobiles:
            mobile = ("ip", "netns", "exec", f"lg-{name}", sys.executable, "-c", SENDER)
            args = [str(rate_bps), str(seconds), testbed.BASE_IP, str(PORT)]
            procs.append(subprocess.Popen([*mobile, *args], stdout=subprocess.DEVNULL))
        yield meter
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        try:
            out = receiver.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            receiver.kill()
            out = receiver.communicate()[0]
        for p in procs[1:]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        meter.slices = [json.loads(line) for line in out.splitlines() if line.startswith("[")]
