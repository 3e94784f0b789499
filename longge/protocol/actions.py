"""The chip settings a part decides, as values (docs/design.md §1, "The radio's owner"): a part
returns them, in order, and the radio's owner (daemon/radio_owner.py) applies them to its chip.

    Channel(n[, home])    RF_CH                          (aside: the downlink's channel; a
                                                         move of the link's, home: agility)
    Rate(name)            RF_SETUP's rate bits           (adaptation's rate)
    Power(level)          RF_SETUP's PA bits             (adaptation's power)
    Retries(ard_step, n)  SETUP_RETR                     (adaptation, aside)
    AutoAck(pipe, on)     EN_AA for one pipe             (stream mode's aside)
    Transmit(address)     PRIM_RX off, TX_ADDR/RX_ADDR_P0 (a peer's packet, back from listening)
    Listen()              PRIM_RX on                     (a base listening between bursts)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Channel:
    channel: int
    #: the link's channel for this radio from now on (a move: docs/design.md §6), kept when
    #: the radio is set up again; not: a moment elsewhere (aside), the configured one stays
    home: bool = False


@dataclass(frozen=True, slots=True)
class Rate:
    rate: str  # "250k", "1M", "2M"


@dataclass(frozen=True, slots=True)
class Power:
    level: int  # rf24_pa_dbm_e


@dataclass(frozen=True, slots=True)
class Retries:
    ard_step: int  # ARD = 250 µs · (ard_step + 1)
    arc: int


@dataclass(frozen=True, slots=True)
class AutoAck:
    pipe: int
    on: bool


@dataclass(frozen=True, slots=True)
class Transmit:
    address: bytes


@dataclass(frozen=True, slots=True)
class Listen:
    pass


Action = Channel | Rate | Power | Retries | AutoAck | Transmit | Listen
