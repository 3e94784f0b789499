"""A mobile and a base daemon over in-memory TUNs and the emulated air (no root needed)."""

from __future__ import annotations

import contextlib
import os
import select
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from longge.config import NodeConfig, PeerConfig
from longge.daemon.supervisor import Supervisor
from longge.radio.options import RadioOptions
from longge.tun import MemoryTun


def ip_packet(size: int, tag: int) -> bytes:
    """An IPv4/UDP-looking packet of one flow (the daemon does not check validity)."""
    head = struct.pack(
        "!BBHHHBBH4s4sHH",
        0x45,
        0,
        size,
        tag,
        0,
        64,
        17,
        0,
        b"\x0a\x18\x00\x02",
        b"\x0a\x18\x00\x01",
        4000,
        5000,
    )
    return (head + tag.to_bytes(4, "big") * 400)[:size]


LINK_KEY = bytes(range(1, 33))


@dataclass
class Link:
    mobile: Supervisor
    base: Supervisor
    mtun: MemoryTun
    btun: MemoryTun
    air: str

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.mobile.step(0.01)
            self.base.step(0.01)

    def send(
        self, tun: MemoryTun, packets: list[bytes], to: MemoryTun, timeout: float = 5.0
    ) -> list[bytes]:
        for p in packets:
            tun.peer.send(p)
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < len(packets) and time.monotonic() < deadline:
            ready, _, _ = select.select([to.peer], [], [], 0.02)
            if ready:
                got.append(to.peer.recv(65536))
            self.mobile.step(0)
            self.base.step(0)
        return got

    def send_until_through(
        self, tun: MemoryTun, to: MemoryTun, size: int, tag: int, seconds: float
    ) -> list[bytes]:
        """One packet at a time (tags ``tag``+1, +2, ...) until one comes out of ``to`` or
        ``seconds`` pass: what came out (empty: nothing got through)."""
        got: list[bytes] = []
        end = time.monotonic() + seconds
        while not got and time.monotonic() < end:
            tag += 1
            got = self.send(tun, [ip_packet(size, tag)], to=to, timeout=0.5)
        return got

    def send_for(self, seconds: float, size: int) -> tuple[list[bytes], list[bytes]]:
        """Batches of 10 packets of ``size`` bytes up the link (mobile to base) for
        ``seconds``, then a second for the last to come: (sent, what came out)."""
        sent: list[bytes] = []
        got: list[bytes] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            batch = [ip_packet(size, 1 + len(sent) + i) for i in range(10)]
            got += self.send(self.mtun, batch, to=self.btun, timeout=3.0)
            sent += batch
        got += self.collect(self.btun, 1.0)  # (a batch's last may come during the next)
        return sent, got

    def collect(self, to: MemoryTun, seconds: float) -> list[bytes]:
        """Every packet that comes out of ``to`` within ``seconds`` (0: those already out),
        both daemons running."""
        got: list[bytes] = []
        deadline = time.monotonic() + seconds
        while True:
            while select.select([to.peer], [], [], 0)[0]:
                got.append(to.peer.recv(65536))
            if time.monotonic() >= deadline:
                return got
            select.select([to.peer], [], [], 0.005)
            self.mobile.step(0)
            self.base.step(0)

    def wait_link(self, sup: Supervisor, state: str, timeout: float = 8.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.1)
            if sup.status()["link"] == state:
                return True
        return False


@contextlib.contextmanager
def make_link(
    air_path: str,
    d: str,
    radio: RadioOptions | None = None,
    backend: str = "sim",
    mobile_extra: dict[str, Any] | None = None,
    base_extra: dict[str, Any] | None = None,
    up_within: float = 8.0,
) -> Iterator[Link]:
    """Two supervisors (mobile, base) over in-memory TUNs, secured with LINK_KEY. With
    ``backend="rf24"``, the rf24 backend's code drives emulated chips (``driver = "sim"``)."""
    # These tests send bursts and want every packet through: a long queue budget, and retries
    # enough (15 x 1 ms) that a radio process descheduled on a busy CI machine loses nothing.
    radio = radio or RadioOptions(ard_us=1000, arc=15)
    secured: dict[str, Any] = {"state_dir": os.path.join(d, "state")}
    if backend != "sim":
        secured.update(backend=backend, driver="sim")
    mob = NodeConfig(
        **{
            "role": "mobile",
            "air": air_path,
            "control": os.path.join(d, "m.sock"),
            "queue_ms": 5000,
            "radio": radio,
            "peers": (PeerConfig(key=LINK_KEY),),
            **secured,
            **(mobile_extra or {}),
        }
    )
    base = NodeConfig(
        role="base",
        address="10.24.0.1/24",
        peers=(
            PeerConfig(address="10.24.0.2", tx_address=b"LGb2m", rx_address=b"LGm2b", key=LINK_KEY),
        ),
        air=air_path,
        control=os.path.join(d, "b.sock"),
        tx_channel=81,
        rx_channel=76,
        queue_ms=5000,
        radio=radio,
        **secured,
        **(base_extra or {}),
    )
    mtun, btun = MemoryTun("m0"), MemoryTun("b0")
    sm, sb = Supervisor(mob, mtun, network=False), Supervisor(base, btun, network=False)
    sm.start()
    sb.start()
    lk = Link(sm, sb, mtun, btun, air_path)
    try:
        up = lk.wait_link(sm, "up", up_within) and lk.wait_link(sb, "up", up_within)
        assert up, "link did not come up"
        yield lk
    finally:
        lk.mobile.shutdown()
        lk.base.shutdown()
