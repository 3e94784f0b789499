"""A sender and a receiver joined by a scripted air: the protocol's test bench."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from longge.protocol import Fragmenter, Reassembler

Air = Callable[[list[bytes]], Iterable[bytes]]


def clean(frames: list[bytes]) -> list[bytes]:
    return frames


@dataclass
class Pair:
    payload_size: int = 32
    mtu: int = 1500
    first_number: int = 0
    late_guard: int = 0  # Reassembler's (stream mode: the ARQ's window)
    tx: Fragmenter = field(init=False)
    rx: Reassembler = field(init=False)
    delivered: list[bytes] = field(default_factory=list)
    now: float = 0.0

    def __post_init__(self) -> None:
        self.tx = Fragmenter(self.payload_size, self.mtu, first_number=self.first_number)
        self.rx = Reassembler(self.mtu, late_guard=self.late_guard)

    def frames(self, *packets: bytes) -> list[bytes]:
        out: list[bytes] = []
        for p in packets:
            out += self.tx.fragment(p)
        return out

    def feed(self, frames: Iterable[bytes], dt: float = 0.001) -> list[bytes]:
        got = []
        for f in frames:
            self.now += dt
            packet = self.rx.receive(f, self.now)
            if packet is not None:
                got.append(packet)
        self.delivered += got
        return got

    def send(self, *packets: bytes, air: Air = clean) -> list[bytes]:
        return self.feed(air(self.frames(*packets)))
