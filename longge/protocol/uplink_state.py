"""The base's record of each mobile on the shared uplink, and its counters: the state that
UplinkScheduler (protocol/uplink_scheduler.py) and its held grants (protocol/uplink_hold.py)
keep and read."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class MobileState:
    sent: bool = False  # a packet of its (not the release) since its grant began
    alive: bool = False  # a frame of its since its grant began (stream mode: ``frames``)
    released: bool = False
    busy: bool = False  # it sent till the end of its last grant
    poked: bool = False  # the base sent it a packet since its last grant: an answer may wait
    poked_at: float = -math.inf  # when it was last poked
    #: poked by a base that will not hear the answer between its bursts (``poke``): a busy
    #: grant may be ended for it
    revoke_for: bool = False
    silent: int = 0  # grants in a row it answered nothing to
    idle: int = 0  # grants in a row it handed back having sent nothing
    retry_at: float = -math.inf  # not granted before this (silent or idle)
    last_sent: float = -math.inf  # when a grant of its in which it sent ended
    heard_at: float = -math.inf  # when its last packet came (``heard``)
    used: float = 0.0  # how long it held its last grant
    credit: float = 0.0  # what was left of its grants ended early (< OWED_MIN_S each)


@dataclass
class UplinkCounters:
    grants: int = 0
    releases: int = 0  # grants the mobile ended (time up, or nothing more to send)
    silent: int = 0  # grants the mobile answered nothing to
    stale_releases: int = 0  # releases of an earlier grant than the running one (late)
    revoked: int = 0  # grants ended early: for a poked mobile, or a held one for a due turn
    renewed: int = 0  # held grants renewed before their end (counted in ``grants`` too)
    deaf: int = 0  # grants that said the base's TX radio does not listen (uplink.DEAF_BIT)
