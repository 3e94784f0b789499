"""The link-control packets that move a link's channels (docs/design.md §6, "A link that
moves"), sans-IO: encoded and parsed here, sealed like every packet (a receiver takes them
only from a packet that passed its authentication: peer.py), first byte 0 (never an IP
packet).

    MOVE    base -> mobile   \\x00LGmove  seq  uplink  downlink  in_ms(2, big-endian)
            "in in_ms from when you hear this, send on ``uplink`` and listen on ``downlink``"
    HERE    base -> mobile   \\x00LGhere  seq  uplink  downlink  next
            "I am on these now, and if the downlink moves it goes to ``next``" (the base's
            keepalive while its link may move: a mobile that missed a move learns the uplink's
            channel from it; one that lost the base looks for it on ``next`` first)
    BAND    mobile -> base   \\x00LGband  attempts(2)  failures(2)  near  echoed(2)  levels(21)
            the mobile's sending since its last report (its frames' attempts and failures on
            the uplink: ESB's ARC counts, stream mode's ARQ fates; each saturates at 65535),
            the share of its last second's readings of the link's neighbourhood that were busy
            (band.py's ``near``: 0..254 for 0..1, 255 for none), the base's frames it received
            again since its last report (stream mode: their ACKs were lost on the uplink's
            channel, not they on the downlink's: channel_plan.py) and its picture of the band
            (band.py's levels)

``seq`` numbers the base's moves (mod 256): a mobile applies a MOVE once however often it is
repeated. The moment is relative (``in_ms``): the two nodes share no clock.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from longge.chip.datasheet import CHANNEL_MAX
from longge.protocol.band import LEVELS_BYTES

MOVE_MAGIC = b"\x00LGmove"
HERE_MAGIC = b"\x00LGhere"
BAND_MAGIC = b"\x00LGband"
MAGICS = (MOVE_MAGIC, HERE_MAGIC, BAND_MAGIC)
_MOVE = struct.Struct(">BBBH")
_HERE = struct.Struct(">BBBB")
_BAND = struct.Struct(">HHBH")
NEAR_NONE = 255
COUNT_MAX = 0xFFFF


@dataclass(frozen=True, slots=True)
class Move:
    """A move as the mobile hears it: from ``in_s`` after hearing, these channels."""

    seq: int
    uplink: int
    downlink: int
    in_s: float


@dataclass(frozen=True, slots=True)
class Here:
    seq: int
    uplink: int
    downlink: int
    next: int


@dataclass(frozen=True, slots=True)
class BandReport:
    attempts: int
    failures: int
    near: float | None  # (None: no reading of the neighbourhood)
    levels: bytes
    echoed: int = 0


def sent_again(message: bytes) -> bool:
    """Is ``message`` sent again when its frames are given up (a MAX_RT)? A BAND: its counts
    would be lost with it. Not a MOVE or a HERE: the base says them again anyway (MOVE till its
    moment, HERE each channel_follow.here_every); sent again at once, a HERE to a mobile that
    is not there met MAX_RT after MAX_RT and kept the base's TX radio to itself."""
    return message.startswith(BAND_MAGIC)


def _channels_ok(uplink: int, downlink: int) -> bool:
    return 0 <= uplink <= CHANNEL_MAX and 0 <= downlink <= CHANNEL_MAX and uplink != downlink


def move_message(seq: int, uplink: int, downlink: int, in_s: float) -> bytes:
    in_ms = min(max(round(in_s * 1000), 0), 0xFFFF)
    return MOVE_MAGIC + _MOVE.pack(seq & 0xFF, uplink, downlink, in_ms)


def parse_move(packet: bytes) -> Move | None:
    """The move a MOVE packet says, or None (not one, or not a move that can be made)."""
    if not packet.startswith(MOVE_MAGIC) or len(packet) != len(MOVE_MAGIC) + _MOVE.size:
        return None
    seq, up, down, in_ms = _MOVE.unpack_from(packet, len(MOVE_MAGIC))
    return Move(seq, up, down, in_ms / 1000) if _channels_ok(up, down) else None


def here_message(seq: int, uplink: int, downlink: int, next_downlink: int) -> bytes:
    return HERE_MAGIC + _HERE.pack(seq & 0xFF, uplink, downlink, next_downlink)


def parse_here(packet: bytes) -> Here | None:
    if not packet.startswith(HERE_MAGIC) or len(packet) != len(HERE_MAGIC) + _HERE.size:
        return None
    seq, up, down, nxt = _HERE.unpack_from(packet, len(HERE_MAGIC))
    ok = _channels_ok(up, down) and 0 <= nxt <= CHANNEL_MAX
    return Here(seq, up, down, nxt) if ok else None


def band_message(
    attempts: int, failures: int, near: float | None, levels: bytes, echoed: int = 0
) -> bytes:
    if len(levels) != LEVELS_BYTES:
        raise ValueError(f"levels: {len(levels)} bytes, not {LEVELS_BYTES}")
    failures = min(failures, attempts)
    near_byte = NEAR_NONE if near is None else round(min(max(near, 0.0), 1.0) * 254)
    counts = _BAND.pack(
        min(attempts, COUNT_MAX), min(failures, COUNT_MAX), near_byte, min(echoed, COUNT_MAX)
    )
    return BAND_MAGIC + counts + levels


def parse_band(packet: bytes) -> BandReport | None:
    if not packet.startswith(BAND_MAGIC):
        return None
    if len(packet) != len(BAND_MAGIC) + _BAND.size + LEVELS_BYTES:
        return None
    attempts, failures, near, echoed = _BAND.unpack_from(packet, len(BAND_MAGIC))
    if failures > attempts:
        return None
    share = None if near == NEAR_NONE else near / 254
    levels = packet[len(BAND_MAGIC) + _BAND.size :]
    return BandReport(attempts, failures, share, levels, echoed)
