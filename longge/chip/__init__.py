"""The nRF24L01+ as its datasheet describes it: constants and formulas (``datasheet``), the
register settings and their JSON (``registers``). The ground floor: the protocol, the radio
backends, the configuration, the air emulator and the measurements build on it; it imports
nothing of theirs."""

#: Where the air emulator listens by default: the "bus" of the ``sim`` backend's emulated chips.
AIR_SOCKET = "/run/longge/air.sock"
