"""``status --watch``: both nodes and the air, refreshed in place once a second.

Rates are counter differences between two samples of the daemons' status (control socket):
what each direction delivered (the receiving node's TUN writes), the frames and
retransmissions its sender put on air, MAX_RT, the sender's queue (bytes, oldest packet's
wait) and drops by reason, with a short history of the delivered rate. Pure text: ``frame``
turns two samples into the screen, ``watch`` samples and redraws until Ctrl-C (or ``count``
refreshes, for scripts).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

from longge.daemon.control import ControlError
from longge.daemon.status import DaemonClient

HISTORY = 30  # samples of delivered rate kept for the sparkline
SPARK = " ▁▂▃▄▅▆▇█"
#: (column title, sending node, receiving node)
DIRECTIONS = (("mobile -> base", "mobile", "base"), ("base -> mobile", "base", "mobile"))
CLEAR = "\x1b[H\x1b[2J"


def sample(paths: dict[str, str], air: str | None = None) -> dict[str, Any]:
    """One reading of every node's status (an ``error`` in place of a node that does not
    answer) and of the air's stats, with the monotonic time it was taken."""
    out: dict[str, Any] = {"t": time.monotonic(), "nodes": {}}
    for name, path in paths.items():
        try:
            out["nodes"][name] = DaemonClient(path).status().raw
        except ControlError as exc:
            out["nodes"][name] = {"error": str(exc)}
    if air:
        from longge.air.wire import query

        try:
            out["air"] = query(air)
        except (OSError, ValueError) as exc:  # (ValueError: an error or garbage for an answer)
            out["air"] = {"error": str(exc)}
        else:
            if not isinstance(out["air"], dict) or not isinstance(out["air"].get("lag", {}), dict):
                out["air"] = {
                    "error": f"the air at {air} answered in a shape this view does not read"
                }
    return out


def _role_of(s: dict[str, Any], role: str) -> dict[str, Any]:
    for st in s["nodes"].values():
        if st.get("node", {}).get("role") == role:
            return dict(st)
    return {}


def _delta(prev: dict[str, Any], cur: dict[str, Any], *keys: str) -> float:
    def get(st: dict[str, Any]) -> float:
        v: Any = st
        for k in keys:
            v = v.get(k) if isinstance(v, dict) else None
        return float(v or 0)

    return max(0.0, get(cur) - get(prev))


#: The sparkline's full scale at least (a link carrying only keepalives draws no full bars).
SPARK_FLOOR_BPS = 10_000.0


def spark(values: list[float]) -> str:
    top = max([SPARK_FLOOR_BPS, *values])
    return "".join(SPARK[min(len(SPARK) - 1, round(v / top * (len(SPARK) - 1)))] for v in values)


def _drops(*maps: Any) -> str:
    merged: dict[str, int] = {}
    for m in maps:
        for k, v in (m or {}).items():
            merged[k] = merged.get(k, 0) + int(v)
    return ", ".join(f"{k} {v}" for k, v in sorted(merged.items()) if v) or "none"


class View:
    """Turns successive samples into screens; keeps the rate history."""

    def __init__(self) -> None:
        self.history: dict[str, deque[float]] = {d[0]: deque(maxlen=HISTORY) for d in DIRECTIONS}

    def frame(self, prev: dict[str, Any], cur: dict[str, Any], interval: float) -> str:
        dt = max(1e-3, cur["t"] - prev["t"])
        lines = [
            f"LongGe live view  {time.strftime('%H:%M:%S')}  (every {interval:g} s; Ctrl-C quits)",
            "",
        ]
        for name, st in cur["nodes"].items():
            if "error" in st:
                lines.append(f"  {name}: {st['error']}")
                continue
            n, r = st.get("node", {}), st.get("radio", {})
            heard = st.get("peer_last_heard_s")
            lines.append(
                f"  {n.get('role', name):6} link {str(st.get('link', '?')).upper():4}  peer last "
                "heard "
                + ("never" if heard is None else f"{heard:.1f} s ago")
                + f"  radio {r.get('rate', '?')} ARD {r.get('ard_us', '?')} µs "
                f"ARC {r.get('arc', '?')}"
            )
        lines.append("")
        cols = []
        for title, sender, receiver in DIRECTIONS:
            tx_now, tx_then = (
                _role_of(cur, sender).get("tx", {}),
                _role_of(prev, sender).get("tx", {}),
            )
            rx_now = _role_of(cur, receiver).get("rx", {})
            rx_then = _role_of(prev, receiver).get("rx", {})
            seen = bool(_role_of(cur, receiver))  # a real node sees only its own daemon
            rate = 8 * _delta(rx_then, rx_now, "bytes_out") / dt
            self.history[title].append(rate)
            cols.append(
                [
                    f"{rate / 1e3:9.1f} kbit/s delivered" if seen else "  (receiver not here)",
                    f"{_delta(tx_then, tx_now, 'frames_sent') / dt:9.0f} frames/s sent",
                    f"{_delta(tx_then, tx_now, 'retransmissions') / dt:9.0f} retransmissions/s",
                    f"{int(tx_now.get('max_rt', 0)):9d} MAX_RT "
                    f"(+{int(_delta(tx_then, tx_now, 'max_rt'))})",
                    f"{int(tx_now.get('queue_bytes', 0)):9d} B queued, oldest "
                    f"{tx_now.get('queue_oldest_ms', 0)} ms",
                    f"drops: {_drops(tx_now.get('queue_drops'), rx_now.get('drops'))}",
                    f"history {spark(list(self.history[title]))}",
                ]
            )
        width = 44
        lines.append("  " + "".join(f"{t:<{width}}" for t, _, _ in DIRECTIONS))
        for row in zip(*cols, strict=True):
            lines.append("  " + "".join(f"{c[: width - 2]:<{width}}" for c in row))
        air = cur.get("air")
        if air is not None:
            lines.append("")
            if "error" in air:
                lines.append(f"  air: {air['error']}")
            else:
                lag = air.get("lag", {})
                lines.append(
                    f"  air ({air.get('server', 'python')}): stood still {air.get('freezes', 0)}x "
                    f"{air.get('frozen_ms', 0)} ms, waited for hosts {air.get('host_stalls', 0)}x; "
                    f"lag p99 {lag.get('p99_us', '?')} µs"
                )
        return "\n".join(lines)


def watch(
    paths: dict[str, str],
    air: str | None = None,
    interval: float = 1.0,
    count: int | None = None,
    out: TextIO = sys.stdout,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Redraw every ``interval`` s until Ctrl-C (or ``count`` screens). In a terminal the
    screen is redrawn in place; into a pipe the screens follow each other."""
    view = View()
    shown = 0
    clear = CLEAR if out.isatty() else "\n"
    try:
        prev = sample(paths, air)
        while count is None or shown < count:
            sleep(interval)
            cur = sample(paths, air)
            out.write(clear + view.frame(prev, cur, interval) + "\n")
            out.flush()
            prev = cur
            shown += 1
    except KeyboardInterrupt:
        out.write("\n")
    return 0
