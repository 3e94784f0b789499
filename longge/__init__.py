"""LongGe: IP over nRF24L01+ radios, a datasheet-faithful air emulator, link measurement."""

__version__ = "0.1.0"
