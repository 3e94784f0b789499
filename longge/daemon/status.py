"""A node's status, typed: what ``{"cmd": "status"}`` on the daemon's control socket answers
(supervisor.status), read into dataclasses so that measurements use names, not string keys.
``DaemonClient`` is the one way to ask a daemon for it and to change its radio settings.

Every field is documented in docs/results.md ("status --json"); ``raw`` keeps the object as it
came, for ``status --json`` and the text views."""

from __future__ import annotations

import types
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from longge.daemon.control import ControlError, request

T = TypeVar("T")


def _fits(value: Any, hint: Any) -> bool:
    """Is ``value`` (parsed JSON) of the annotated type ``hint``?"""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in get_args(hint))
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint in (int, float):  # (JSON's true is no count; a whole number is a float's value)
        wanted = int if hint is int else (int, float)
        return isinstance(value, wanted) and not isinstance(value, bool)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(v, get_args(hint)[1]) for v in value.values())
    if origin is list:
        return isinstance(value, list) and all(_fits(v, get_args(hint)[0]) for v in value)
    return isinstance(value, hint)


def _take(cls: type[T], data: Any, part: str) -> T:
    """``cls`` from the keys of ``data`` it knows (a newer daemon's extra keys are ignored,
    a missing one keeps its default); ControlError naming ``part.key`` for a value of another
    type (a daemon of another version, or something else on the socket), before a view trips
    on it."""
    if not isinstance(data, dict):  # (null too: a view would read it as an object)
        raise ControlError(f"the status's {part} is not an object: {data!r:.60}")
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    for k in known & data.keys():
        if not _fits(data[k], hints[k]):
            raise ControlError(
                f"the status's {part}.{k} = {data[k]!r:.60} is not of the type this LongGe "
                "reads: a daemon of another version?"
            )
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


#: The start of a TX process's state while it seals nothing (a new nonce epoch could not be
#: recorded): "cannot_seal: <why>".
CANNOT_SEAL = "cannot_seal"


@dataclass(frozen=True)
class ProcessStatus:
    """What each radio process says of itself (daemon/child.py ``send_stats``)."""

    state: str = "?"
    scheduling: str = ""
    pid_time: float = 0.0  # when the counters were sent (Unix s)
    reinits: int = 0
    last_reinit: str = ""
    radio_attempts: int = 0
    radio_failures: int = 0
    radio_bad_messages: int | None = None  # None: no link to the chip that carries messages
    waits_on: str = "?"  # irq, link or poll
    irq_edges: int | None = None  # None: no IRQ pin
    mode: str = "esb"  # (said in stream mode)
    #: stream mode: the ARQ's counters (protocol/arq.py ArqStats, non-zero ones)
    arq: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TxStatus(ProcessStatus):
    """The TX process's counters and its queue."""

    packets_in: int = 0
    bytes_in: int = 0
    packets_sent: int = 0
    frames_sent: int = 0
    keepalives_sent: int = 0
    max_rt: int = 0
    packets_aborted: int = 0
    #: interactive packets sent between another packet's frames (frame.py, "Lanes")
    preempted: int = 0
    #: the shared uplink (protocol/uplink.py): a base's grants, releases and silent grants;
    #: a mobile's grants heard and whether it is granted now (1) or sends freely (0)
    uplink: dict[str, int] = field(default_factory=dict)
    uplink_sent: int = 0  # grants (a base) or releases (a mobile) sent
    #: the downlink's channel as a light mobile's way (daemon/listening.py, daemon/aside.py):
    #: a base's listening TX radio's counters, a mobile's packets sent there; empty: neither
    aside: dict[str, int] = field(default_factory=dict)
    #: with adapt (ESB): the retries in force, why, since when (protocol/adapt.py); else None
    adapt: dict[str, Any] | None = None
    dropped_no_radio: int = 0
    oversize: int = 0
    no_route: int = 0  # packets whose destination no peer's allowed_ips holds (dropped)
    cut_in: int = 0  # interactive packets for another peer, before the rest of one on its way
    retransmissions: int | None = None  # None where the backend does not count them
    queue_packets: int = 0
    queue_bytes: int = 0
    queue_limit_bytes: int = 0
    queue_oldest_ms: float = 0.0
    queue_drops: dict[str, int] = field(default_factory=dict)
    queue_shared: int = 0  # packets of flows beyond the queue's 1024, queued together
    queue_interactive: int = 0  # packets pushed while their flow was below its fair share
    #: bytes per sojourn bin; the bins' upper edges (ms) travel with them (one fewer: the
    #: last bin is everything above the last edge)
    queue_delay_hist: list[int] = field(default_factory=list)
    queue_delay_edges_ms: list[float] = field(default_factory=list)
    sealed: int | None = None  # None on an open link
    epoch: int | None = None
    #: epochs skipped because the peer refused ours (a restored state_dir), floor messages
    #: sent to a peer whose sender was stale (keys: secure.py)
    epoch_skips: int = 0
    floors_sent: int = 0
    # stream mode: ACK/RESYNC frames sent for this node's receiver, stays in TX mode (and
    # those shorter than the 4 ms rule allows), times the ARQ's window held frames back
    control_sent: int = 0
    bursts: int = 0
    bursts_short: int = 0
    window_full: int = 0
    #: keyed by peer name: its counters, its queue (queue_packets, queue_bytes), backoffs
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class RxStatus(ProcessStatus):
    """The RX process's counters."""

    frames_in: int = 0
    packets_out: int = 0
    bytes_out: int = 0
    keepalives: int = 0
    missing: int = 0  # packets whose numbers a later one skipped (lost on the way)
    tun_refused: int = 0
    no_peer: int = 0  # frames on an RX pipe no peer listens on
    #: frames the TX radio heard between its bursts (listening.py), in frames_in
    frames_aside: int = 0
    control_unknown: int = 0  # authentic link-control packets of no known kind
    control_refused: int = 0  # a channel's link control on a link without security
    source_not_allowed: int = 0  # packets from a source outside the peer's allowed_ips
    ip_packets: int = 0  # the peers' IP packets taken (whole, checked, allowed), and bytes
    ip_bytes: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    security: dict[str, Any] | None = None
    peer_last_heard_s: float | None = None
    acks_in: int = 0  # stream mode: the peer's ACKs handed to the TX process
    pair_full: int = 0  # ... and those dropped because it was behind
    #: keyed by peer name: its counters (keepalives, drops, security, peer_last_heard_s, ...)
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: with adapt on an ESB link with one peer: the rate the RX radio listens at, why
    adapt: dict[str, Any] | None = None
    #: agile: the link's channels (a base's plan, a mobile's following), the band, the dwells
    channels: dict[str, Any] | None = None


@dataclass(frozen=True)
class PeerStatus:
    """One peer of the node ([[peer]]): its link state and what each radio process counted
    for it (``sent``: the TX process's, with its queue; ``received``: the RX process's)."""

    name: str = ""
    address: str = ""
    link: str = "down"
    peer_last_heard_s: float | None = None
    sent: dict[str, Any] = field(default_factory=dict)
    received: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Top:
    """The status's own scalar fields, as NodeStatus reads them."""

    link: str = "down"
    peer_last_heard_s: float | None = None
    radio: dict[str, Any] = field(default_factory=dict)
    clock_offset_s: float | None = None


@dataclass(frozen=True)
class NodeStatus:
    node: NodeInfo
    link: str  # "up" or "down"
    peer_last_heard_s: float | None
    radio: dict[str, Any]  # the settings both radios run with (RadioOptions' names + channels)
    tx: TxStatus
    rx: RxStatus
    raw: dict[str, Any]
    peers: tuple[PeerStatus, ...] = ()
    #: the wall clock less the monotonic one when the daemon answered (None: an older daemon)
    clock_offset_s: float | None = None

    @classmethod
    def of(cls, data: Any) -> NodeStatus:
        """ControlError for an answer of another shape (see _take)."""
        if not isinstance(data, dict):
            raise ControlError(f"the status is not an object: {data!r:.60}")
        top = _take(_Top, data, "status")
        return cls(
            node=_take(NodeInfo, data.get("node", {}), "node"),
            link=top.link,
            peer_last_heard_s=top.peer_last_heard_s,
            radio=top.radio,
            tx=_take(TxStatus, data.get("tx", {}), "tx"),
            rx=_take(RxStatus, data.get("rx", {}), "rx"),
            raw=data,
            peers=tuple(_take(PeerStatus, p, "peers[]") for p in _list(data.get("peers", []))),
            clock_offset_s=top.clock_offset_s,
        )

    @property
    def secured(self) -> bool:
        return self.tx.sealed is not None


def _list(data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise ControlError(f"the status's peers is not a list: {data!r:.60}")
    return data


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
