"""The link-control packets that move a link's channels (protocol/channel_control.py): golden
bytes, round trips, and what a receiver refuses (a move it cannot make, a wrong length)."""

from __future__ import annotations

from longge.protocol.band import LEVELS_BYTES
from longge.protocol.channel_control import (
    BandReport,
    Here,
    Move,
    band_message,
    here_message,
    move_message,
    parse_band,
    parse_here,
    parse_move,
)


def test_golden_bytes() -> None:
    assert move_message(7, 40, 3, 0.1) == b"\x00LGmove\x07\x28\x03\x00\x64"
    assert here_message(300, 40, 3, 60) == b"\x00LGhere\x2c\x28\x03\x3c"
    levels = bytes(range(LEVELS_BYTES))
    assert band_message(70000, 5, 0.5, levels) == b"\x00LGband\xff\xff\x00\x05\x7f\0\0" + levels
    assert band_message(9, 5, 0.5, levels, 70000)[12:14] == b"\xff\xff"  # (echoed saturates)
    assert band_message(1, 0, None, levels)[11] == 0xFF


def test_each_round_trips() -> None:
    assert parse_move(move_message(1, 10, 60, 0.25)) == Move(1, 10, 60, 0.25)
    assert parse_here(here_message(2, 10, 60, 30)) == Here(2, 10, 60, 30)
    levels = b"\x55" * LEVELS_BYTES
    assert parse_band(band_message(128, 40, 1.0, levels)) == BandReport(128, 40, 1.0, levels)
    assert parse_band(band_message(8, 0, None, levels)) == BandReport(8, 0, None, levels)
    assert parse_band(band_message(8, 2, None, levels, 300)) == BandReport(8, 2, None, levels, 300)


def test_what_cannot_be_a_move_is_refused() -> None:
    assert parse_move(move_message(1, 10, 10, 0.1)) is None  # (both ways on one channel)
    assert parse_move(b"\x00LGmove\x01\x0a\x7e\x00\x64") is None  # (channel 126)
    assert parse_move(move_message(1, 10, 60, 0.1) + b"\x00") is None  # (padded)
    assert parse_here(b"\x00LGhere\x01\x0a\x3c\xff") is None  # (next: channel 255)
    assert parse_band(b"\x00LGband\x00\x01\x00\x02\x00\0\0" + bytes(LEVELS_BYTES)) is None
    assert parse_band(b"\x00LGband\x00\x02\x00\x01\x00" + bytes(LEVELS_BYTES)) is None  # (short)
    assert parse_band(band_message(1, 1, None, bytes(LEVELS_BYTES))[:-1]) is None
    for parse in (parse_move, parse_here, parse_band):
        assert parse(b"\x00LGrate\x02\x00") is None and parse(b"") is None
