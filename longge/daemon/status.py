"""A node's status, typed: what ``{"cmd": "status"}`` on the daemon's control socket answers
(supervisor.status), read into dataclasses so that measurements use names, not string keys.
``DaemonClient`` is the one way to ask a daemon for it and to change its radio settings.

Every field is documented in docs/results.md ("status --json"); ``raw`` keeps the object as it
came, for ``status --json`` and the text views."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from longge.daemon.control import request

T = TypeVar("T")


def _take(cls: type[T], data: Any) -> T:
    """``cls`` from the keys of ``data`` it knows (a newer daemon's extra keys are ignored,
    a missing one keeps its default)."""
    data = data if isinstance(data, dict) else {}
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class NodeInfo:
    role: str = ""
    tun: str = ""
    address: str = ""
    peer: str = ""
    mtu: int = 0
    queue_ms: int = 0
    queue: str = ""


@dataclass(frozen=True)
class TxStatus:
    """The TX process's counters and its queue."""

    packets_in: int = 0
    bytes_in: int = 0
    packets_sent: int = 0
    frames_sent: int = 0
    keepalives_sent: int = 0
    max_rt: int = 0
    packets_aborted: int = 0
    dropped_no_radio: int = 0
    oversize: int = 0
    retransmissions: int | None = None  # None where the backend does not count them
    queue_packets: int = 0
    queue_bytes: int = 0
    queue_limit_bytes: int = 0
    queue_oldest_ms: float = 0.0
    queue_drops: dict[str, int] = field(default_factory=dict)
    #: bytes per sojourn bin; the bins' upper edges (ms) travel with them (one fewer: the
    #: last bin is everything above the last edge)
    queue_delay_hist: list[int] = field(default_factory=list)
    queue_delay_edges_ms: list[float] = field(default_factory=list)
    sealed: int | None = None  # None on an open link
    epoch: int | None = None
    state: str = "?"


@dataclass(frozen=True)
class RxStatus:
    """The RX process's counters."""

    frames_in: int = 0
    packets_out: int = 0
    bytes_out: int = 0
    keepalives: int = 0
    tun_refused: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    security: dict[str, Any] | None = None
    peer_last_heard_s: float | None = None
    state: str = "?"


@dataclass(frozen=True)
class NodeStatus:
    node: NodeInfo
    link: str  # "up" or "down"
    peer_last_heard_s: float | None
    radio: dict[str, Any]  # the settings both radios run with (RadioOptions' names + channels)
    tx: TxStatus
    rx: RxStatus
    raw: dict[str, Any]

    @classmethod
    def of(cls, data: dict[str, Any]) -> NodeStatus:
        return cls(
            node=_take(NodeInfo, data.get("node")),
            link=str(data.get("link", "down")),
            peer_last_heard_s=data.get("peer_last_heard_s"),
            radio=dict(data.get("radio") or {}),
            tx=_take(TxStatus, data.get("tx")),
            rx=_take(RxStatus, data.get("rx")),
            raw=data,
        )

    @property
    def secured(self) -> bool:
        return self.tx.sealed is not None


class DaemonClient:
    """One daemon's control socket. Raises ControlError (no daemon, a refused request)."""

    def __init__(self, path: str, timeout: float = 2.0) -> None:
        self.path = path
        self.timeout = timeout

    def status(self) -> NodeStatus:
        return NodeStatus.of(request(self.path, {"cmd": "status"}, timeout=self.timeout))

    def set_radio(self, options: dict[str, Any]) -> dict[str, Any]:
        """Change radio settings live; the daemon's answer (its new settings)."""
        return request(self.path, {"cmd": "set", "options": options}, timeout=self.timeout)
