"""The settings half of a mirrored chip (``mirror.ChipMirror``): pyrf24's setting names over
the registers the host keeps (``RadioRegisters``); each change is pushed to the chip whole.
Out-of-range values are clamped as RF24 does."""

from __future__ import annotations

from dataclasses import replace

from longge.chip.datasheet import MAX_PAYLOAD
from longge.chip.registers import RadioRegisters
from longge.radio.constants import (
    NAME_BY_RATE,
    RATE_BY_NAME,
    rf24_crclength_e,
    rf24_datarate_e,
    rf24_pa_dbm_e,
)


class RegisterSettings:
    """pyrf24's settings (channel, rate, PA, payloads, CRC, power, retries, auto-ack)."""

    _regs: RadioRegisters

    def _push_registers(self) -> None:
        raise NotImplementedError  # the mirror sends the registers to its chip

    def _set(self, **changes: object) -> None:
        self._regs = replace(self._regs, **changes)  # type: ignore[arg-type]
        self._push_registers()

    @property
    def channel(self) -> int:
        return self._regs.channel

    @channel.setter
    def channel(self, value: int) -> None:
        self._set(channel=max(0, min(int(value), 125)))

    @property
    def data_rate(self) -> rf24_datarate_e:
        return RATE_BY_NAME[self._regs.rate]

    @data_rate.setter
    def data_rate(self, value: int) -> None:
        self._set(rate=NAME_BY_RATE[int(rf24_datarate_e(int(value)))])

    @property
    def pa_level(self) -> rf24_pa_dbm_e:
        return rf24_pa_dbm_e(self._regs.pa_level)

    @pa_level.setter
    def pa_level(self, value: int) -> None:
        self.set_pa_level(value)

    def set_pa_level(self, level: int, lna_enable: bool = True) -> None:
        self._set(pa_level=int(rf24_pa_dbm_e(int(level))))

    @property
    def payload_size(self) -> int:
        return self._regs.payload_size

    @payload_size.setter
    def payload_size(self, value: int) -> None:
        self._set(payload_size=max(1, min(int(value), MAX_PAYLOAD)))

    @property
    def dynamic_payloads(self) -> bool:
        return self._regs.dynamic_payloads

    @dynamic_payloads.setter
    def dynamic_payloads(self, enable: bool) -> None:
        self._set(dynamic_payloads=bool(enable))

    @property
    def address_width(self) -> int:
        return self._regs.address_width

    @address_width.setter
    def address_width(self, value: int) -> None:
        self._set(address_width=max(3, min(int(value), 5)))

    @property
    def crc_length(self) -> rf24_crclength_e:
        return rf24_crclength_e(self._regs.crc_len)

    @crc_length.setter
    def crc_length(self, value: int) -> None:
        crc = int(rf24_crclength_e(int(value)))
        if crc == 0 and any(self._regs.auto_ack):
            crc = self._regs.crc_len  # the chip forces CRC on while auto-ack is on
        self._set(crc_len=max(crc, 1))

    @property
    def power(self) -> bool:
        return self._regs.powered

    @power.setter
    def power(self, on: bool) -> None:
        self._set(powered=bool(on))

    def set_retries(self, delay: int, count: int) -> None:
        self._set(ard_step=max(0, min(int(delay), 15)), arc=max(0, min(int(count), 15)))

    def set_auto_ack(self, *args: int | bool) -> None:
        """``set_auto_ack(enable)`` for every pipe, or ``set_auto_ack(pipe_number, enable)``."""
        if len(args) == 1:
            self._set(auto_ack=(bool(args[0]),) * 6)
        elif len(args) == 2:
            pipe, enable = int(args[0]), bool(args[1])
            if not 0 <= pipe <= 5:
                return
            acks = list(self._regs.auto_ack)
            acks[pipe] = enable
            self._set(auto_ack=tuple(acks))
        else:
            raise TypeError("set_auto_ack(enable) or set_auto_ack(pipe_number, enable)")

    def enable_dynamic_ack(self) -> None:
        self._set(dynamic_ack=True)
