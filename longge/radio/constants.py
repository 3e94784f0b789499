"""pyrf24's enumerations, with pyrf24's names and values, for backends that do not import it.

``tests/test_radio_conformance.py`` checks every value against the installed pyrf24.
"""

from __future__ import annotations

from enum import IntEnum


class rf24_datarate_e(IntEnum):
    RF24_1MBPS = 0
    RF24_2MBPS = 1
    RF24_250KBPS = 2


class rf24_pa_dbm_e(IntEnum):
    RF24_PA_MIN = 0
    RF24_PA_LOW = 1
    RF24_PA_HIGH = 2
    RF24_PA_MAX = 3


class rf24_crclength_e(IntEnum):
    RF24_CRC_DISABLED = 0
    RF24_CRC_8 = 1
    RF24_CRC_16 = 2


RF24_1MBPS = rf24_datarate_e.RF24_1MBPS
RF24_2MBPS = rf24_datarate_e.RF24_2MBPS
RF24_250KBPS = rf24_datarate_e.RF24_250KBPS
RF24_PA_MIN = rf24_pa_dbm_e.RF24_PA_MIN
RF24_PA_LOW = rf24_pa_dbm_e.RF24_PA_LOW
RF24_PA_HIGH = rf24_pa_dbm_e.RF24_PA_HIGH
RF24_PA_MAX = rf24_pa_dbm_e.RF24_PA_MAX
RF24_CRC_DISABLED = rf24_crclength_e.RF24_CRC_DISABLED
RF24_CRC_8 = rf24_crclength_e.RF24_CRC_8
RF24_CRC_16 = rf24_crclength_e.RF24_CRC_16

#: Our rate names (``--rate``) <-> pyrf24's enumeration.
RATE_BY_NAME = {"250k": RF24_250KBPS, "1M": RF24_1MBPS, "2M": RF24_2MBPS}
NAME_BY_RATE = {int(v): k for k, v in RATE_BY_NAME.items()}
