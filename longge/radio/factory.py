"""Backend choice is configuration only: the daemon asks for "the TX radio" and gets one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from longge.errors import ConfigError
from longge.radio.interface import Radio

if TYPE_CHECKING:
    from longge.config import NodeConfig


def open_radio(cfg: NodeConfig, which: str) -> Radio:
    """An un-begun radio of the configured backend for direction ``which`` ("tx" or "rx")."""
    if cfg.backend == "sim":
        from longge.radio.sim import SimRadio

        return SimRadio(air=cfg.air, name=f"{cfg.role}-{which}")
    raise ConfigError(
        "radio.backend", cfg.backend, "sim (the rf24 and serial backends are not built yet)"
    )
