"""Wi-Fi on the emulated air: what the received power detector hears besides LongGe's radios
(``./run.sh scan --wifi``), and what destroys LongGe's frames (``--interferer wifi:CH[:DUTY]``).

An 802.11b/g/n transmitter on 2.4 GHz channel n (1–13) is centred on 2412 + 5(n − 1) MHz
(nRF channel 12 + 5(n − 1), air/wire.py's ``wifi_centre``) and occupies 22 MHz (IEEE
802.11-2020 §15.4.4.2, the DSSS transmit mask's −30 dBr points at ±11 MHz; OFDM's 20 MHz
channel fits inside it). Its traffic
is modelled in slots of 1 ms (an 802.11n A-MPDU with its preamble and block ACK lasts 0.3–5 ms;
TXOP limits of 2–6 ms in EDCA's default parameter sets): each slot is busy with probability
``duty`` (the channel's measured busy share: 10–30 % in an office, over 50 % at a busy access
point), drawn from the slot's number, so the same slots are busy in every run and in both airs.
An nRF24 frame or ACK on an overlapping channel that is on air at any time of a busy slot is
destroyed, as by a collision: Wi-Fi transmits at 15–20 dBm, far above the −82..−94 dBm an
nRF24L01+ needs (datasheet Table 13), and its bursts outlast any nRF24 frame. See docs/emulator.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from longge.errors import ConfigError

#: The RPD needs the carrier for at least this long (datasheet: 40 µs).
RPD_MIN_NS = 40_000
#: A Wi-Fi interferer's default busy share (``wifi:CH`` without a duty).
DEFAULT_DUTY = 0.3


def parse_interferer(spec: str) -> tuple[int, float]:
    """``wifi:CHANNEL[:DUTY]`` -> (Wi-Fi channel 1..13, busy share 0..1); ConfigError naming
    ``--interferer`` otherwise."""
    parts = spec.split(":") if isinstance(spec, str) else []
    why = "wifi:CHANNEL[:DUTY]: a Wi-Fi channel 1..13, a busy share 0 < DUTY <= 1 (wifi:6:0.3)"
    if len(parts) not in (2, 3) or parts[0] != "wifi":
        raise ConfigError("--interferer", spec, why)
    try:
        channel = int(parts[1])
        duty = float(parts[2]) if len(parts) == 3 else DEFAULT_DUTY
    except ValueError:
        raise ConfigError("--interferer", spec, why) from None
    if not 1 <= channel <= 13 or not 0.0 < duty <= 1.0:
        raise ConfigError("--interferer", spec, why)
    return channel, duty


@dataclass
class Interferer:
    """A Wi-Fi transmitter: it occupies ``width`` MHz around ``centre`` (an nRF channel number)
    a share ``duty`` of the time, in bursts of ``burst_ns``; the RPD hears it and it destroys
    the LongGe frames it overlaps (air/model.py's ``_transmit``)."""

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
