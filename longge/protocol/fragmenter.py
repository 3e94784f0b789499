"""Sender side: an IP packet becomes a list of frames (see ``frame.py`` for the format)."""

from __future__ import annotations

import secrets
import zlib

from longge.chip.datasheet import MAX_PAYLOAD
from longge.errors import ConfigError, UsageError
from longge.protocol.frame import FIRST, HEADER_LEN, INDEX_MOD, LAST, PACKET_OVERHEAD, SEQ_MOD

MIN_PAYLOAD = HEADER_LEN + 1 + 1  # header, at least one data byte, and room to make progress
DEFAULT_MTU = 1500
MAX_MTU = 65535 - PACKET_OVERHEAD


def check_payload_size(payload_size: int) -> None:
    """Refuse a frame size the format cannot use (the user's setting)."""
    if not MIN_PAYLOAD <= payload_size <= MAX_PAYLOAD:
        raise ConfigError("payload_size", payload_size, f"{MIN_PAYLOAD}..{MAX_PAYLOAD} bytes")


def check_mtu(mtu: int) -> None:
    """Refuse a packet size the format cannot carry (the user's setting)."""
    if not 1 <= mtu <= MAX_MTU:
        raise ConfigError("mtu", mtu, f"1..{MAX_MTU} bytes")


#: Lanes: a packet of lane 1 (an interactive one) may be sent between the frames of a lane-0
#: packet already on its way (frame.py, "Lanes"). A packet's lane is its number's parity.
LANES = 2


class Fragmenter:
    """Cuts packets into frames of at most ``payload_size`` bytes.

    Each lane numbers its packets apart, every other number (the two lanes, the two parities:
    frame.py "Lanes"), so a lane-1 packet's frames never land in the slot of a lane-0 packet in
    progress. Numbers start at a random value (so that a restarted sender is unlikely to reuse
    the numbers the receiver saw last) unless ``first_number`` is given (lane 0's; lane 1's is
    the next).
    """

    def __init__(
        self,
        payload_size: int = MAX_PAYLOAD,
        mtu: int = DEFAULT_MTU,
        first_number: int | None = None,
    ) -> None:
        check_payload_size(payload_size)
        check_mtu(mtu)
        self.payload_size = payload_size
        self.mtu = mtu
        first = secrets.randbelow(1 << 16) if first_number is None else first_number & 0xFFFF
        self._numbers = [first, (first + 1) & 0xFFFF]  # by lane (the two parities)
        self.packets = 0
        self.frames = 0

    @property
    def next_number(self) -> int:
        """Lane 0's next number."""
        return self._numbers[0]

    def number_for(self, lane: int = 0) -> int:
        """The number the next packet of ``lane`` will have (a sealed packet's first frame
        proves it: secure.py, "First frames")."""
        return self._numbers[lane]

    def fragment(self, packet: bytes, lane: int = 0) -> list[bytes]:
        """Frames for one packet, in the order they must be sent."""
        if not packet:
            raise UsageError("cannot send an empty packet (use keepalive())")
        if len(packet) > self.mtu:
            raise UsageError(f"packet of {len(packet)} bytes exceeds the MTU of {self.mtu}")
        return self._frames(packet, lane)

    def keepalive(self) -> list[bytes]:
        """One frame that carries no packet: the peer learns the link is alive (7 bytes)."""
        return self._frames(b"", 0)

    def _frames(self, packet: bytes, lane: int) -> list[bytes]:
        number = self._numbers[lane]
        self._numbers[lane] = (number + LANES) & 0xFFFF
        body = number.to_bytes(2, "big") + packet
        stream = body + zlib.crc32(body).to_bytes(4, "big")
        step = self.payload_size - HEADER_LEN
        count = -(-len(stream) // step)
        # Header(first, last, seq=number, index=i).encode() without building one per frame: a
        # sender in stream mode cuts ~6000 frames a second while its FIFO waits (the test
        # suite compares the two).
        seq = (number % SEQ_MOD) << 3
        last = count - 1
        frames = [
            bytes(((FIRST if i == 0 else 0) | (LAST if i == last else 0) | seq | (i % INDEX_MOD),))
            + stream[i * step : (i + 1) * step]
            for i in range(count)
        ]
        self.packets += 1
        self.frames += count
        return frames
