"""How the emulated air fared while a measurement ran: its freezes and its lag.

On the testbed every figure is also a figure about the scheduler (docs/emulator.md): when the
machine holds the emulated world back, the air stops its clock (a *freeze*) and the link
carries nothing for that time. A trial records how often and how long the air froze while it
ran; a trial whose air sat out more than ``FROZEN_LIMIT`` of its time is not trusted (tTest
measures it again, as it does for CPU steal). Against a real link there is no air to ask, and
every figure here is empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from longge.air.wire import query

#: A trial whose air stood still for more than this share of its duration is spoilt: at 1 %
#: the received rate of a saturated trial reads 1 % low for reasons of the host alone.
FROZEN_LIMIT = 0.01


def _stats(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    try:
        return query(path, timeout=1.0)
    except (OSError, ValueError):
        return None


class AirMeter:
    """Freezes of the air at ``path`` since construction."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._start = _stats(path)

    def delta(self) -> dict[str, float]:
        """Since the start: {"freezes", "frozen_ms"}: the air stood still, for its own stalls
        and while it waited for a receiving host (host_stalls); {} without an air."""
        now = _stats(self.path)
        if self._start is None or now is None:
            return {}

        def diff(key: str) -> float:
            return float(now.get(key, 0) - self._start.get(key, 0))  # type: ignore[union-attr]

        return {
            "freezes": diff("freezes") + diff("host_stalls"),
            "frozen_ms": round(diff("frozen_ms") + diff("host_stalled_ms"), 3),
        }


def still_share(frozen_ms: float, seconds: float) -> float:
    """The share of a measurement of ``seconds`` the air stood still for ``frozen_ms`` (at most
    0.99: a figure per second the air ran divides by what is left)."""
    return min(0.99, frozen_ms / 1000 / seconds) if seconds > 0 else 0.0


def spoilt_reason(steal: float, steal_limit: float, frozen_ms: float, seconds: float) -> str | None:
    """Why a trial of ``seconds`` cannot be trusted, or None."""
    if steal > steal_limit:
        return (
            f"CPU steal {100 * steal:.0f} % (the hypervisor held this machine back): "
            "not counted, repeated"
        )
    if seconds > 0 and frozen_ms > FROZEN_LIMIT * seconds * 1000:
        return (
            f"the emulated air stood still {frozen_ms:.0f} ms of {seconds:g} s (the machine "
            "held it back): not counted, repeated"
        )
    return None


def health(
    path: str | None, measured: str, parts: Sequence[dict[str, Any]]
) -> dict[str, Any] | None:
    """The air's own account at the end of a run (freezes, frozen time, host holds, lag,
    scheduling), with what it stood still during the ``parts`` of the measurement (trials or
    levels, each with ``air_freezes`` and ``air_frozen_ms``) as ``{measured}_freezes`` and
    ``{measured}_frozen_ms``. None against a real link."""
    stats = _stats(path)
    if stats is None:
        return None
    return {
        f"{measured}_freezes": sum(p.get("air_freezes", 0) for p in parts),
        f"{measured}_frozen_ms": round(sum(p.get("air_frozen_ms", 0.0) for p in parts), 3),
        "frozen_limit": FROZEN_LIMIT,
        "freezes": stats.get("freezes"),
        "frozen_ms": stats.get("frozen_ms"),
        "host_stalls": stats.get("host_stalls"),
        "host_stalled_ms": stats.get("host_stalled_ms"),
        "host_gave_up": stats.get("host_gave_up"),
        "lazy_late": stats.get("lazy_late"),
        "lazy_late_max_ms": stats.get("lazy_late_max_ms"),
        "lag_us": stats.get("lag"),
        "keep_awake": stats.get("keep_awake"),
        "scheduling": stats.get("scheduling"),
        "server": stats.get("server", "python"),
        "uptime_s": round(float(stats.get("uptime_s", 0.0)), 1),
    }
