"""The LongGe frame format: one header byte, then a slice of the packet stream.

A packet is carried as a *stream*::

    stream = number (2 bytes, big endian) || IP packet || CRC-32 (4 bytes, big endian)

where the CRC-32 (zlib/IEEE) covers number and packet. The stream is cut into slices of at
most ``payload_size - 1`` bytes, and each slice travels in one radio frame behind this header::

    bit  7      6      5..3           2..0
         FIRST  LAST   number mod 8   slice index mod 8

FIRST marks the slice that starts a stream, LAST the one that ends it (a one-frame packet has
both). Frames have variable length (the radio's dynamic payloads), so no padding is needed.

Lanes: a sender keeps two packets on their way at once, one per lane, numbered apart: each
lane every other number, from its own start (lane 0 from the first number, lane 1 from the
next), so a packet's lane is its number's parity and the two never share a number mod 8 (a
receiver rebuilds up to 8 packets side by side, one per number mod 8: four per lane). The
frames of a lane-1 packet (an interactive one: a ping, a keystroke, an ACK) can so go between
the frames of a lane-0 packet already on its way, and the receiver keeps order, and refuses
repeats, per lane (reassembler.py). The header byte is unchanged; a receiver of the format
before lanes took every number as one sequence, so both ends need this version.

Overhead: 1 byte per frame, 6 bytes per packet. The header lets the receiver notice a lost
or foreign frame at once; the CRC-32 catches whatever the header cannot (for instance a loss
of exactly 8 frames, or a splice of two packets), so a wrong packet is never delivered.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADER_LEN = 1
NUMBER_LEN = 2
CRC_LEN = 4
#: Bytes a packet adds to the stream besides its own.
PACKET_OVERHEAD = NUMBER_LEN + CRC_LEN

FIRST = 0x80
LAST = 0x40
SEQ_MOD = 8
INDEX_MOD = 8


@dataclass(frozen=True, slots=True)
class Header:
    first: bool
    last: bool
    seq: int  # packet number mod 8
    index: int  # slice index mod 8

    def encode(self) -> int:
        return (
            (FIRST if self.first else 0)
            | (LAST if self.last else 0)
            | ((self.seq % SEQ_MOD) << 3)
            | (self.index % INDEX_MOD)
        )

    @classmethod
    def decode(cls, byte: int) -> Header:
        return _DECODED[byte]  # once per frame received: built once, for all 256 values


_DECODED = tuple(
    Header(bool(b & FIRST), bool(b & LAST), (b >> 3) & 0x07, b & 0x07) for b in range(256)
)


def frames_for(packet_len: int, payload_size: int) -> int:
    """How many frames a packet of ``packet_len`` bytes needs."""
    data_per_frame = payload_size - HEADER_LEN
    stream = packet_len + PACKET_OVERHEAD
    return -(-stream // data_per_frame)


def efficiency(packet_len: int, payload_size: int) -> float:
    """Share of the frame payload bytes that carry the IP packet (full-size frames assumed)."""
    return packet_len / (frames_for(packet_len, payload_size) * payload_size)
