"""Golden byte vectors for the frame format (longge/protocol/frame.py)."""

from __future__ import annotations

import zlib

from longge.protocol import Fragmenter
from longge.protocol.frame import Header, efficiency, frames_for


def test_header_bits_are_first_last_seq_index() -> None:
    assert Header(first=True, last=False, seq=5, index=0).encode() == 0b1010_1000
    assert Header(first=False, last=True, seq=2, index=7).encode() == 0b0101_0111
    assert Header(first=True, last=True, seq=9, index=9).encode() == 0b1100_1001  # mod 8
    for byte in range(256):
        assert Header.decode(byte).encode() == byte


def test_one_frame_packet_golden_vector() -> None:
    frames = Fragmenter(first_number=0x1234).fragment(b"hi")
    body = b"\x12\x34hi"
    crc = zlib.crc32(body).to_bytes(4, "big")
    # FIRST|LAST, seq = 0x1234 mod 8 = 4, index 0
    assert frames == [bytes([0b1110_0000]) + body + crc]


def test_three_frame_packet_golden_vector() -> None:
    packet = bytes(range(60))
    frames = Fragmenter(payload_size=32, first_number=7).fragment(packet)
    stream = b"\x00\x07" + packet
    stream += zlib.crc32(stream).to_bytes(4, "big")
    assert [f[0] for f in frames] == [0b1011_1000, 0b0011_1001, 0b0111_1010]
    assert frames[0][1:] == stream[0:31]
    assert frames[1][1:] == stream[31:62]
    assert frames[2][1:] == stream[62:]
    assert all(len(f) <= 32 for f in frames)


def test_every_frame_header_is_the_header_class_s_encoding() -> None:
    """The fragmenter writes header bytes itself (fast path): each must equal what Header
    encodes, across index and number wrap-around and both frame sizes' extremes."""
    for payload_size, first_number in ((32, 0xFFFE), (3, 5), (32, 3)):
        fragmenter = Fragmenter(payload_size=payload_size, first_number=first_number)
        for size in (1, 2, 25, 26, 27, 300, 1400):
            number = fragmenter.next_number
            frames = fragmenter.fragment(bytes(size))
            want = [
                Header(first=i == 0, last=i == len(frames) - 1, seq=number, index=i).encode()
                for i in range(len(frames))
            ]
            assert [f[0] for f in frames] == want, (payload_size, size)
            assert len(frames) == frames_for(size, payload_size)


def test_frame_count_and_efficiency() -> None:
    # 1400-byte packet: 1406-byte stream, 31 data bytes a frame -> 46 frames.
    assert frames_for(1400, 32) == 46
    assert len(Fragmenter().fragment(bytes(1400))) == 46
    assert abs(efficiency(1400, 32) - 1400 / (46 * 32)) < 1e-12
    # One header byte a frame: never more than 2 bytes of overhead per frame on average.
    assert frames_for(1500, 32) * 32 - 1500 <= 2 * frames_for(1500, 32)
