"""Wi-Fi on the emulated air: what the received power detector hears besides LongGe's radios
(``./run.sh scan --wifi``), and what destroys LongGe's frames (``--interferer
wifi:CH[:DUTY[:MODEL]]``; ``air set --interferer … [--node NAME]`` live, near one node only).

An 802.11b/g/n transmitter on 2.4 GHz channel n (1–13) is centred on 2412 + 5(n − 1) MHz
(nRF channel 12 + 5(n − 1), air/wire.py's ``wifi_centre``) and occupies 22 MHz (IEEE
802.11-2020 §15.4.4.2, the DSSS transmit mask's −30 dBr points at ±11 MHz; OFDM's 20 MHz
channel fits inside it). Its traffic is modelled (``slots``, the default) in slots of 1 ms
(an 802.11n A-MPDU with its preamble and block ACK lasts 0.3–5 ms; TXOP limits of 2–6 ms in
EDCA's default parameter sets): each slot is busy with probability ``duty`` (the channel's
measured busy share: 10–30 % in an office, over 50 % at a busy access point), drawn from the
slot's number, so the same slots are busy in every run and in both airs. The ``traffic``
model is a network as it sends: bursts of frames of 0.1–4 ms and gaps between them, its load
changing every 0.25 s around ``duty`` (below); drawn from integers alone (splitmix64), so
that the compiled air computes the same bursts. An nRF24 frame or ACK on an overlapping
channel that is on air at any time of a busy slot or burst is destroyed, as by a collision:
Wi-Fi transmits at 15–20 dBm, far above the −82..−94 dBm an nRF24L01+ needs (datasheet
Table 13), and its bursts outlast any nRF24 frame; an interferer ``near`` one node destroys
frames at that node's radios only. See docs/emulator.md.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from longge.errors import ConfigError

#: The RPD needs the carrier for at least this long (datasheet: 40 µs).
RPD_MIN_NS = 40_000
#: A Wi-Fi interferer's default busy share (``wifi:CH`` without a duty).
DEFAULT_DUTY = 0.3
#: How its traffic is made: ``slots`` (busy 1-ms slots, each with probability DUTY: the
#: meaning ``wifi:CH:DUTY`` has always had, and the default) or ``traffic`` (a network as it
#: sends: bursts of frames and gaps between them, its load changing, below).
MODELS = ("slots", "traffic")
#: ``traffic``: the busy share changes every EPOCH_NS, drawn from DUTY × [0.5, 1.5] (at
#: most 1; its mean DUTY); within an epoch, bursts of TXOP_MIN_NS..TXOP_MIN_NS + TXOP_SPAN_NS
#: (an 802.11n A-MPDU with its preamble and block ACK: 0.1–4 ms; EDCA's TXOP limits are 2–6
#: ms) separated by gaps drawn from 0..2·G, G chosen so that bursts fill the epoch's share.
EPOCH_NS = 250_000_000
TXOP_MIN_NS = 100_000
TXOP_SPAN_NS = 3_900_000
_TXOP_MEAN_NS = TXOP_MIN_NS + TXOP_SPAN_NS // 2
_PPM = 1_000_000
_M64 = (1 << 64) - 1


@dataclass(frozen=True)
class WifiSpec:
    """``wifi:CHANNEL[:DUTY[:MODEL]]`` as given."""

    channel: int
    duty: float = DEFAULT_DUTY
    model: str = "slots"


def parse_interferer(spec: str) -> WifiSpec:
    """``wifi:CHANNEL[:DUTY[:MODEL]]`` -> the Wi-Fi channel 1..13, its busy share 0 < DUTY
    <= 1 and how its traffic is made (MODELS); ConfigError naming ``--interferer`` otherwise."""
    parts = spec.split(":") if isinstance(spec, str) else []
    why = (
        "wifi:CHANNEL[:DUTY[:MODEL]]: a Wi-Fi channel 1..13, a busy share 0 < DUTY <= 1, "
        "MODEL slots or traffic (wifi:6:0.3, wifi:13:0.5:traffic)"
    )
    if len(parts) not in (2, 3, 4) or parts[0] != "wifi":
        raise ConfigError("--interferer", spec, why)
    try:
        channel = int(parts[1])
        duty = float(parts[2]) if len(parts) >= 3 else DEFAULT_DUTY
    except ValueError:
        raise ConfigError("--interferer", spec, why) from None
    model = parts[3] if len(parts) == 4 else "slots"
    if not 1 <= channel <= 13 or not 0.0 < duty <= 1.0 or model not in MODELS:
        raise ConfigError("--interferer", spec, why)
    return WifiSpec(channel, duty, model)


def _mix(x: int) -> int:
    """splitmix64's finaliser: the traffic's numbers, the same in the compiled air."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def epoch_duty_ppm(centre: int, duty: float, epoch: int) -> int:
    """``traffic``: the busy share of an epoch, in millionths."""
    nominal = max(int(duty * _PPM + 0.5), 1)
    u = _mix((centre << 48) ^ (epoch << 16) ^ 0xFFFF)
    return min(nominal * (500 + u % 1001) // 1000, _PPM)


def epoch_bursts(centre: int, duty: float, epoch: int) -> list[tuple[int, int]]:
    """``traffic``: an epoch's bursts, [start, end) in ns, in order (cut at the epoch's end)."""
    d = epoch_duty_ppm(centre, duty, epoch)
    mean_gap = _TXOP_MEAN_NS * (_PPM - d) // d
    t, end, i = epoch * EPOCH_NS, (epoch + 1) * EPOCH_NS, 0
    out: list[tuple[int, int]] = []
    while True:
        u = _mix((centre << 48) ^ (epoch << 16) ^ i)
        start = t + (u >> 32) % (2 * mean_gap + 1)
        if start >= end:
            return out
        t = min(start + TXOP_MIN_NS + (u & 0xFFFFFFFF) % (TXOP_SPAN_NS + 1), end)
        out.append((start, t))
        i += 1


@dataclass
class Interferer:
    """A Wi-Fi transmitter: it occupies ``width`` MHz around ``centre`` (an nRF channel number)
    a share ``duty`` of the time (``model``: in 1-ms slots, or as a network's traffic); the
    RPD hears it and it destroys the LongGe frames it overlaps (air/model.py's
    ``_transmit``) — everywhere, or (``near``: a node's name) only at that node's radios
    (NAME-tx, NAME-rx): a network beside one end of the link."""

    centre: int
    width: int = 22
    duty: float = 0.3
    burst_ns: int = 1_000_000
    model: str = "slots"
    near: str | None = None
    _cached: tuple[int, list[tuple[int, int]], list[int]] | None = field(
        default=None, repr=False, compare=False
    )

    def covers(self, channel: int) -> bool:
        return abs(channel - self.centre) <= self.width // 2

    def heard_by(self, radio_name: str) -> bool:
        return self.near is None or radio_name.startswith(f"{self.near}-")

    def active(self, start: int, end: int) -> bool:
        """Was it on at some point in [start, end]? Deterministic (the same in every run and
        in both airs)."""
        if self.model == "traffic":
            return self._traffic_active(start, end)
        first, last = start // self.burst_ns, end // self.burst_ns
        for slot in range(first, min(last, first + 64) + 1):
            h = (slot * 2654435761 + self.centre * 40503) & 0xFFFFFFFF
            if h / 2**32 < self.duty:
                return True
        return False

    def _bursts(self, epoch: int) -> tuple[list[tuple[int, int]], list[int]]:
        c = self._cached
        if c is None or c[0] != epoch:
            bursts = epoch_bursts(self.centre, self.duty, epoch)
            c = self._cached = (epoch, bursts, [b[0] for b in bursts])
        return c[1], c[2]

    def _traffic_active(self, start: int, end: int) -> bool:
        first, last = start // EPOCH_NS, end // EPOCH_NS
        for epoch in range(first, min(last, first + 4) + 1):
            bursts, starts = self._bursts(epoch)
            i = bisect.bisect_right(starts, end)  # bursts that start at or before end
            if i and bursts[i - 1][1] > start:
                return True
            # (an earlier burst ends before the last one that starts by ``end``)
        return False
