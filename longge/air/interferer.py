"""What the air's received power detector hears besides LongGe's radios: Wi-Fi-like
interferers for the channel scan (``./run.sh scan --wifi``)."""

from __future__ import annotations

from dataclasses import dataclass

#: The RPD needs the carrier for at least this long (datasheet: 40 µs).
RPD_MIN_NS = 40_000


@dataclass
class Interferer:
    """A Wi-Fi-like transmitter for the channel scan: it occupies ``width`` MHz around
    ``centre`` (an nRF channel number) a share ``duty`` of the time, in bursts of
    ``burst_ns``. The scan's RPD sees it; it does not destroy LongGe frames (a simplification:
    real Wi-Fi would)."""

    centre: int
    width: int = 22
    duty: float = 0.3
    burst_ns: int = 1_000_000

    def covers(self, channel: int) -> bool:
        return abs(channel - self.centre) <= self.width // 2

    def active(self, start: int, end: int) -> bool:
        """Was it on at some point in [start, end]? Deterministic per burst slot."""
        first, last = start // self.burst_ns, end // self.burst_ns
        for slot in range(first, min(last, first + 64) + 1):
            h = (slot * 2654435761 + self.centre * 40503) & 0xFFFFFFFF
            if h / 2**32 < self.duty:
                return True
        return False
