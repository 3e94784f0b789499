"""Backend choice is configuration only: the daemon asks for "the TX radio" and gets one."""

from __future__ import annotations

from typing import Protocol

from longge.errors import ConfigError
from longge.radio.interface import LinkRadio


class RadioPlace(Protocol):
    """Where a node's radios are and how they are reached: what ``open_radio`` reads of a
    node's config (``config.NodeConfig`` has it; the config layer sits above this one)."""

    @property
    def role(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def air(self) -> str: ...
    @property
    def air_name(self) -> str: ...
    @property
    def driver(self) -> str: ...
    @property
    def spi_speed(self) -> int: ...
    @property
    def tx_ce_pin(self) -> int: ...
    @property
    def tx_csn_pin(self) -> int: ...
    @property
    def tx_irq_pin(self) -> int: ...
    @property
    def rx_ce_pin(self) -> int: ...
    @property
    def rx_csn_pin(self) -> int: ...
    @property
    def rx_irq_pin(self) -> int: ...
    @property
    def tx_port(self) -> str: ...
    @property
    def rx_port(self) -> str: ...
    @property
    def baud(self) -> int: ...


def open_radio(cfg: RadioPlace, which: str) -> LinkRadio:
    """An un-begun radio of the configured backend for direction ``which`` ("tx" or "rx")."""
    name = f"{cfg.air_name or cfg.role}-{which}"
    if cfg.backend == "sim":
        from longge.radio.sim import SimRadio

        return SimRadio(air=cfg.air, name=name)
    if cfg.backend == "rf24":
        from longge.radio.rf24 import Rf24Radio

        ce, csn, irq = (
            (cfg.tx_ce_pin, cfg.tx_csn_pin, cfg.tx_irq_pin)
            if which == "tx"
            else (cfg.rx_ce_pin, cfg.rx_csn_pin, cfg.rx_irq_pin)
        )
        driver = None
        if cfg.driver == "sim":  # the backend's own code over emulated chips (tests, demos)
            from longge.radio.sim import SimRadio

            def driver(ce: int, csn: int, speed: int) -> SimRadio:
                return SimRadio(ce, csn, speed, air=cfg.air, name=name)

        # the emulated chips of driver = "sim" have no IRQ line: they are polled
        irq = -1 if driver is not None else irq
        return Rf24Radio(ce, csn, cfg.spi_speed, name=name, driver=driver, irq_pin=irq)
    if cfg.backend == "serial":
        from longge.radio.serial_modem import SerialRadio

        port = cfg.tx_port if which == "tx" else cfg.rx_port
        return SerialRadio(port, cfg.baud, name=name, index=0 if which == "tx" else 1)
    raise ConfigError("radio.backend", cfg.backend, "sim, rf24 or serial")
