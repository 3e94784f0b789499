"""The chip's register settings that matter on air, and their JSON form (the air's ``C``
message, the modem's config record is built from them too)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from longge.chip.datasheet import (
    ADDRESS_WIDTHS,
    ARC_MAX,
    ARD_STEPS,
    CHANNEL_MAX,
    CHANNEL_MIN,
    CRC_LENGTHS,
    MAX_PAYLOAD,
    RATE_BPS,
)
from longge.errors import ConfigError


@dataclass
class RadioRegisters:
    """The chip settings that matter on air (defaults are RF24's ``begin()`` values)."""

    channel: int = 76
    rate: str = "1M"
    address_width: int = 5
    crc_len: int = 2
    auto_ack: tuple[bool, ...] = (True,) * 6
    dynamic_payloads: bool = False
    dynamic_ack: bool = False
    payload_size: int = MAX_PAYLOAD
    ard_step: int = 5
    arc: int = 15
    pa_level: int = 3
    powered: bool = True
    tx_address: bytes = b""
    rx_pipes: dict[int, bytes] = field(default_factory=dict)

    def validate(self) -> None:
        """Refuse values the chip cannot hold (they would be a bug in the radio client)."""
        checks = [
            ("channel", CHANNEL_MIN <= self.channel <= CHANNEL_MAX, "0..125"),
            ("rate", self.rate in RATE_BPS, "one of 250k, 1M, 2M"),
            ("address_width", self.address_width in ADDRESS_WIDTHS, "3..5"),
            ("crc_len", self.crc_len in CRC_LENGTHS, "1 or 2"),
            ("auto_ack", len(self.auto_ack) == 6, "6 pipes"),
            ("payload_size", 1 <= self.payload_size <= MAX_PAYLOAD, "1..32"),
            ("ard_step", 0 <= self.ard_step < ARD_STEPS, "0..15"),
            ("arc", 0 <= self.arc <= ARC_MAX, "0..15"),
            ("pa_level", 0 <= self.pa_level <= 3, "0..3"),
            ("rx_pipes", all(0 <= p <= 5 for p in self.rx_pipes), "pipes 0..5"),
        ]
        for key, ok, allowed in checks:
            if not ok:
                raise ConfigError(key, getattr(self, key), allowed)

    def bandwidth(self) -> int:
        """Channels occupied: 2 MHz at 2 Mbit/s, 1 MHz otherwise (p. 23)."""
        return 2 if self.rate == "2M" else 1


_REGISTER_FIELDS = {f.name for f in fields(RadioRegisters)}


def registers_from_json(data: dict[str, Any]) -> RadioRegisters:
    unknown = set(data) - _REGISTER_FIELDS
    if unknown:
        raise ConfigError("registers", sorted(unknown), f"known fields: {sorted(_REGISTER_FIELDS)}")
    data = dict(data)
    if "auto_ack" in data:
        data["auto_ack"] = tuple(bool(x) for x in data["auto_ack"])
    if "tx_address" in data:
        data["tx_address"] = bytes.fromhex(data["tx_address"])
    if "rx_pipes" in data:
        data["rx_pipes"] = {int(k): bytes.fromhex(v) for k, v in data["rx_pipes"].items()}
    return RadioRegisters(**data)


def registers_to_json(regs: RadioRegisters) -> dict[str, Any]:
    out: dict[str, Any] = {f: getattr(regs, f) for f in _REGISTER_FIELDS}
    out["auto_ack"] = list(regs.auto_ack)
    out["tx_address"] = regs.tx_address.hex()
    out["rx_pipes"] = {str(k): v.hex() for k, v in regs.rx_pipes.items()}
    return out
