"""What the radio processes (the pumps) hold beside their radio: the table of this node's
peers, built from its config with their keys and state files, the pumps' own typed
counters, and the steps every pump takes the same way (the TUN in, the TUN out, the queue's
counters, the peers' counters summed for the status)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from longge.config import NodeConfig
from longge.daemon.child import Child
from longge.daemon.fairqueue import FairQueue
from longge.daemon.keystate import control_seal, make_opener, make_sealer
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.status import CANNOT_SEAL
from longge.protocol import Fragmenter, Reassembler, secure
from longge.protocol.arq import ArqSender
from longge.protocol.arq_frames import MAX_INNER, MAX_WINDOW
from longge.protocol.arq_receiver import ArqReceiver
from longge.protocol.peer import Networks, PeerReceiver, PeerSender, PeerTable
from longge.protocol.secure import SecurityError
from longge.tun import Tun

#: Packets a sender reads from the TUN in one loop turn before it sees to the radio.
TUN_READ_BURST = 64
#: Stream mode: frames the ARQ sender holds beyond its window: enough for the next FIFO
#: refills, no more. The fair queue decides what goes next; frames already handed to the
#: sender wait in order, and a backlog of a few hundred (the sender's default) kept a ping
#: ~50 ms behind a UDP stream at saturation.
SENDER_BACKLOG = 8
#: Stream mode: the ARQ delivers a packet's frames late rather than never (its timers back
#: off under heavy loss): a packet in progress waits longer than with ESB before it is given up.
STREAM_REASSEMBLY_S = 5.0
ESB_REASSEMBLY_S = 1.0
#: The largest packet that may go between another packet's frames: a ping, a keystroke, a DNS
#: query, an ACK (sealed, ten 32-byte frames); a bigger one waits its turn.
PREEMPT_MAX = 256
#: A flow below its fair share (FairQueue, "interactive": a call's or a game's packets every
#: 20 ms) goes between frames at any size: its rate, under its share, bounds what it takes
#: from the packet it overtakes.
INTERACTIVE_MAX = 65535
#: How often a TX process whose epoch cannot be recorded tries again (senders_once_recorded).
EPOCH_RETRY_S = 1.0


A = TypeVar("A", ArqSender, ArqReceiver)


def peer_arqs(arqs: Sequence[A | None]) -> list[A]:
    """The peers' ARQs (senders or receivers), in the table's order: every peer has one in
    stream mode."""
    got = [a for a in arqs if a is not None]
    if len(got) != len(arqs):
        raise ValueError("stream mode: a peer without its ARQ")
    return got


def arq_wake_at(arqs: Sequence[ArqSender | ArqReceiver]) -> float | None:
    """A stream-mode process's ARQs' next timer (None: none runs)."""
    deadlines = [d for a in arqs if (d := a.next_deadline()) is not None]
    return min(deadlines) if deadlines else None


def senders(cfg: NodeConfig, arq: bool) -> PeerTable[PeerSender]:
    """The TX process's peers: each with its sealer (its epoch recorded before first use);
    ``arq``: with LongGe's ARQ (the link mode's: sending.Sending.ARQ)."""
    out = []
    for p in cfg.peers:
        sealer = make_sealer(cfg, p)
        overhead = secure.OVERHEAD if sealer is not None else 0
        payload = MAX_INNER if arq else cfg.radio.payload
        out.append(
            PeerSender(
                name=p.name,
                radio_address=p.tx_address,
                networks=Networks(p.allowed_ips),
                fragmenter=Fragmenter(payload, cfg.mtu + overhead),
                sealer=sealer,
                arq=ArqSender(backlog=SENDER_BACKLOG, seal=control_seal(cfg, p, "tx"))
                if arq
                else None,
            )
        )
    return PeerTable(out)


def senders_once_recorded(cfg: NodeConfig, child: Child, arq: bool) -> PeerTable[PeerSender] | None:
    """``senders(cfg, arq)`` once each peer's first epoch is recorded. Until it can be (the state
    folder read-only or full) the process sends nothing, since sealing under an epoch it could
    not record might repeat a nonce after a restart: its state names the file and why (status,
    and once in the log) and it tries again every EPOCH_RETRY_S. None: told to stop meanwhile."""
    said = ""
    while child.running:
        try:
            return senders(cfg, arq)
        except SecurityError as exc:
            child.state = f"{CANNOT_SEAL}: {exc}"
            if str(exc) != said:
                said = str(exc)
                print(f"longge-tx: {exc}; sending nothing, trying again every "
                      f"{EPOCH_RETRY_S:g} s", file=sys.stderr, flush=True)  # fmt: skip
            child.send_stats({})
            if child.wait(None, EPOCH_RETRY_S):
                child.handle_control()
    return None


def receivers(cfg: NodeConfig, arq: bool) -> PeerTable[PeerReceiver]:
    """The RX process's peers: each with its opener (its replay mark loaded); ``arq``: with
    LongGe's ARQ (the link mode's: receiving.Receiving.ARQ)."""
    out = []
    for p in cfg.peers:
        opener = make_opener(cfg, p)
        timeout = STREAM_REASSEMBLY_S if arq else ESB_REASSEMBLY_S
        if opener is None:
            reassembler = Reassembler(cfg.mtu, timeout=timeout, late_guard=MAX_WINDOW if arq else 0)
        else:  # (the opener checks order and duplicates)
            reassembler = Reassembler(cfg.mtu + secure.OVERHEAD, timeout=timeout, secured=opener)
        out.append(
            PeerReceiver(
                name=p.name,
                radio_address=p.rx_address,
                networks=Networks(p.allowed_ips),
                reassembler=reassembler,
                opener=opener,
                arq=ArqReceiver(seal=control_seal(cfg, p, "rx")) if arq else None,
            )
        )
    return PeerTable(out)


@dataclass
class TxCounters:
    """The TX process's own counters (its peers count theirs): packets the kernel gave it,
    frames loaded into the radio, packets it could not take (no radio yet, larger than the
    MTU, a destination no peer holds); stream mode's ACK/RESYNC frames sent for this node's
    receiver, stays in TX mode (and those shorter than the 4 ms rule allows), and times the
    ARQ's window held frames back."""

    packets_in: int = 0
    bytes_in: int = 0
    frames_sent: int = 0
    dropped_no_radio: int = 0
    oversize: int = 0
    no_route: int = 0
    #: interactive packets for another peer than the one whose packet was on its way, sent
    #: before its rest (a base with several mobiles: radio_tx.EsbSending.cut_in)
    cut_in: int = 0
    control_sent: int = 0
    bursts: int = 0
    bursts_short: int = 0
    window_full: int = 0


@dataclass
class RxCounters:
    """The RX process's own counters: frames read, packets handed to the kernel (and those it
    refused), frames on a pipe no peer has; stream mode's peer ACKs handed to the TX process,
    and those dropped because it was behind."""

    frames_in: int = 0
    packets_out: int = 0
    bytes_out: int = 0
    tun_refused: int = 0
    no_peer: int = 0
    acks_in: int = 0
    pair_full: int = 0
    #: frames the TX radio heard on the downlink's channel (a base with several mobiles:
    #: aside.py), counted in ``frames_in`` too
    frames_aside: int = 0


def read_tun(
    tun: Tun,
    mtu: int,
    ready: bool,
    table: PeerTable[PeerSender],
    queues: PeerQueues,
    c: TxCounters,
    now: float,
) -> None:
    """Every packet the kernel has for the link into its peer's queue (dropped, and counted,
    while the radio is down: ``ready`` False; or when no peer holds its destination)."""
    for _ in range(TUN_READ_BURST):
        packet = tun.read()
        if not packet:
            break
        c.packets_in += 1
        c.bytes_in += len(packet)
        if len(packet) > mtu:
            c.oversize += 1
        elif not ready:
            c.dropped_no_radio += 1
        else:
            peers = table.route(packet)
            if not peers:
                c.no_route += 1
            for peer in peers:  # (a multicast packet: a copy for each)
                queues.push(peer.index, packet, now)


def deliver(tun: Tun, packet: bytes, c: RxCounters) -> None:
    """A whole, checked packet to the kernel."""
    if tun.write(packet) == len(packet):
        c.packets_out += 1
        c.bytes_out += len(packet)
    else:
        c.tun_refused += 1


def next_packet(queues: PeerQueues, table: PeerTable[PeerSender], now: float) -> PeerSender | None:
    """The next packet from the queues loaded into its peer (the peer returned), or None: the
    queues are empty."""
    while (index := queues.next_peer(now)) is not None:
        packet = queues.pop(index, now)
        if packet is not None:
            peer = table.peers[index]
            peer.load(packet, now, queues.last_key(index))
            return peer
    return None


def preempt(queues: PeerQueues, peer: PeerSender, now: float) -> None:
    """While a packet of ``peer``'s is on its way: an interactive one of its queue (a sparse
    flow's, at most PREEMPT_MAX bytes, or one below its fair share, any size; not of the same
    flow: PeerQueues.pop_sparse) goes between its frames (lane 1, frame.py "Lanes"), one at a
    time."""
    if peer.frames and not peer.urgent:
        packet = queues.pop_sparse(peer.index, now, PREEMPT_MAX, peer.flow, INTERACTIVE_MAX)
        if packet is not None:
            peer.preempt(packet, now)


@dataclass
class GoFirst:
    """The peers whose frames go before the queues' order (ESB's TX process): a grant's or a
    revoke's (uplink_tx.py), an interactive packet cut in (esb_tx.py), each only till the
    frames it was given for have gone (``PeerSender.gone_at``), the newest first. Before
    (one peer, kept till it had no frames): a grant that came after a ping's answer was cut
    in took its place, and the answer went behind another mobile's 1400-byte rest; a grant to
    a mobile with a packet on its way kept the first place for that packet's rest too, and
    no answer was cut in meanwhile (an answer 7-10 ms late, one ping in six)."""

    marks: list[tuple[PeerSender, int]] = field(default_factory=list)

    def add(self, peer: PeerSender) -> None:
        """``peer``'s frames queued last go first (call once they are queued)."""
        self.marks.insert(0, (peer, peer.gone_at()))

    def peer(self) -> PeerSender | None:
        """Whose frames go first now (None: the queues' order)."""
        self.marks = [(p, m) for p, m in self.marks if p.frames and p.taken < m]
        return self.marks[0][0] if self.marks else None


def keepalives(
    table: PeerTable[PeerSender], queues: PeerQueues, keepalive_s: float, now: float
) -> None:
    """A keepalive for each peer sent nothing for ``keepalive_s`` and with nothing to send
    (its frames wait with the peer, as a packet's)."""
    for peer in table:
        idle = not peer.frames and not len(queues.queues[peer.index])
        if idle and now - peer.last_sent >= keepalive_s:
            peer.frames.extend(peer.keepalive(now))


def queue_limit_bytes(cfg: NodeConfig) -> int:
    """The byte budget: what the air carries in ``queue_ms`` (at least three packets)."""
    rate = cfg.radio.air_bound_bps()
    return max(3 * (cfg.mtu + 14), int(rate / 8 * cfg.queue_ms / 1000))


#: Packets each flow with packets queued has room for, whatever ``queue_ms`` allows
#: (fairqueue.py: TCP flows need a few segments each to recover from a loss without a timeout).
ROOM_PACKETS = 2


def make_queues(cfg: NodeConfig, table: PeerTable[PeerSender]) -> PeerQueues:
    """A flow-fair queue per peer, each with the whole budget (peerqueues.py)."""
    room = ROOM_PACKETS * (cfg.mtu + 14) if cfg.queue == "fair" else 0
    return PeerQueues(
        [
            FairQueue(
                queue_limit_bytes(cfg),
                cfg.queue_ms / 1000,
                fair=cfg.queue == "fair",
                room_per_flow=room,
            )
            for _ in table
        ]
    )


def summed(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The peers' counters as one node's: counts added up (inside nested counters too), the
    epoch the highest, "last heard" the most recent; None where every peer says None."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            have = out.get(key)
            if key not in out or have is None:
                out[key] = value if not isinstance(value, dict) else summed([value])
            elif value is None:
                continue
            elif isinstance(value, dict):
                out[key] = summed([have, value])
            elif key == "epoch":
                out[key] = max(have, value)
            elif key == "peer_last_heard_s":
                out[key] = min(have, value)
            else:
                out[key] = have + value
    return out


def queue_parts(table: PeerTable[PeerSender], queues: PeerQueues) -> dict[str, dict[str, Any]]:
    """Each peer's queue, by name: its packets (with the one being loaded), bytes, drops,
    backoffs."""
    return {
        p.name: {
            "queue_packets": len(queues.queues[p.index]) + (1 if p.frames else 0),
            "queue_bytes": queues.queues[p.index].bytes,
            "queue_drops": dict(queues.queues[p.index].drops),
            "backoffs": queues.backoffs[p.index],
        }
        for p in table
    }


def table_stats(
    counters: TxCounters | RxCounters,
    per_peer: dict[str, dict[str, Any]],
    extra: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A process's counters: its own, its peers' (``per_peer``, by name) summed, and each
    peer's under ``peers`` with its ``extra`` (a TX process's queues)."""
    more = extra or {}
    return {
        **asdict(counters),
        **summed(list(per_peer.values())),
        "peers": {name: {**s, **more.get(name, {})} for name, s in per_peer.items()},
    }
