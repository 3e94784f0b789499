"""One link partner's protocol state, and the table of them (docs/design.md §1, "Device and
peers").

A node runs two radio processes, so a peer has two halves: a ``PeerSender`` in the TX process
(fragmenter, sealer, stream mode's ARQ sender, the frames of the packet on its way) and a
``PeerReceiver`` in the RX process (opener, reassembler, stream mode's ARQ receiver, the
sources the peer may use, when it was last heard). Each counts what happened to it in typed
counters. Nothing here reads a clock, a radio or a file: time is an argument, and the
radio processes (``longge/daemon``) are pumps that move frames between their radio and the
peers a ``PeerTable`` finds by radio pipe (received frames) or by destination (packets to
send), as WireGuard's device finds a peer by its allowed IPs.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

from longge.protocol import channel_control, frame, rate, secure, uplink
from longge.protocol.arq import ArqSender
from longge.protocol.arq_receiver import ArqReceiver
from longge.protocol.fragmenter import Fragmenter
from longge.protocol.reassembler import Reassembler

#: How often a receiver says, at most, that its peer's sender is stale (the floor message
#: it asks for may be lost on the air: said again while stale packets keep coming).
STALE_NOTICE_S = 1.0


class Networks:
    """IP networks (``allowed_ips``), asked about an address inside a packet: its source (may
    the peer send it?) or its destination (is it this peer's?), without building an
    ``ipaddress`` object per packet."""

    def __init__(self, networks: Sequence[str]) -> None:
        nets = [ipaddress.ip_network(n) for n in networks]
        # (version, prefix length, network as an int, mask as an int), longest prefix first
        self.entries = sorted(
            ((n.version, n.prefixlen, int(n.network_address), int(n.netmask)) for n in nets),
            key=lambda e: -e[1],
        )
        self.any4 = any(v == 4 and p == 0 for v, p, _, _ in self.entries)
        self.any6 = any(v == 6 and p == 0 for v, p, _, _ in self.entries)

    def prefix_of(self, packet: bytes, source: bool) -> int:
        """The longest prefix of these networks that holds the packet's source (or
        destination) address; -1: none does, or it is no IP packet."""
        version = packet[0] >> 4 if packet else 0
        if version == 4 and len(packet) >= 20:
            if self.any4 and source:
                return 0
            at, size = (12, 4) if source else (16, 4)
        elif version == 6 and len(packet) >= 40:
            if self.any6 and source:
                return 0
            at, size = (8, 16) if source else (24, 16)
        else:
            return -1
        address = int.from_bytes(packet[at : at + size], "big")
        for v, prefix, network, mask in self.entries:
            if v == version and address & mask == network:
                return prefix
        return -1

    def allows_source(self, packet: bytes) -> bool:
        return self.prefix_of(packet, source=True) >= 0


def multicast(packet: bytes) -> bool:
    """Is the packet's destination every peer's: IPv4 multicast or the limited broadcast,
    IPv6 multicast (neighbour discovery, router advertisements)?"""
    version = packet[0] >> 4 if packet else 0
    if version == 4 and len(packet) >= 20:
        return packet[16] >= 224  # 224/4 multicast, 240/4 reserved and 255.255.255.255
    return version == 6 and len(packet) >= 40 and packet[24] == 0xFF


P = TypeVar("P", "PeerSender", "PeerReceiver")

#: Peers a table holds at most: one RX pipe each (1..5; pipe 0 takes the ACKs of what the
#: chip sends when it transmits).
MAX_PEERS = 5


class PeerTable(Generic[P]):
    """A process's peers: found by the RX pipe their frames arrive on (peer ``i`` on pipe
    ``i + 1``: pipe 0 is the chip's ACK pipe when transmitting) or by a packet's destination
    (the longest prefix among the peers' ``allowed_ips``; a multicast packet is every peer's,
    and so is every packet when there is one peer)."""

    def __init__(self, peers: Sequence[P]) -> None:
        if not 1 <= len(peers) <= MAX_PEERS:
            raise ValueError(f"1..{MAX_PEERS} peers: one RX pipe each (pipes 1..{MAX_PEERS})")
        self.peers: tuple[P, ...] = tuple(peers)
        for i, peer in enumerate(self.peers):
            peer.index = i
        self._pipes: dict[int, P] = {i + 1: p for i, p in enumerate(self.peers)}

    def __iter__(self) -> Iterator[P]:
        return iter(self.peers)

    def __len__(self) -> int:
        return len(self.peers)

    def by_pipe(self, pipe: int) -> P | None:
        return self._pipes.get(pipe)

    def route(self, packet: bytes) -> tuple[P, ...]:
        """The peers a packet from the TUN goes to: () if none holds its destination. A
        table of one peer is a point-to-point link: whatever the kernel routed to the link is
        the peer's (a route on the base to a network behind its mobile needs no entry in
        the mobile's allowed_ips, as before there was a table)."""
        if len(self.peers) == 1 or multicast(packet):
            return self.peers
        best: P | None = None
        length = -1
        for peer in self.peers:
            prefix = peer.networks.prefix_of(packet, source=False)
            if prefix > length:
                best, length = peer, prefix
        return () if best is None else (best,)


@dataclass
class SendCounters:
    """A peer's sending half: packets taken from the queue for it, those given up on (a frame
    that exhausted its retries: MAX_RT), keepalives, and what its sealer did for a peer that
    refused our epochs (skipped past them) or sent stale ones (floor messages sent)."""

    packets_sent: int = 0
    max_rt: int = 0
    packets_aborted: int = 0
    preempted: int = 0  # interactive packets sent between another packet's frames
    keepalives_sent: int = 0
    uplink_sent: int = 0  # grants (a base's) or releases (a mobile's): uplink.py
    epoch_skips: int = 0
    floors_sent: int = 0


@dataclass
class PeerSender:
    """Everything the TX process keeps for one peer. ``frames``: what is left of the packet
    being sent (ESB: loaded into the chip from here; stream mode: offered to ``arq``);
    ``urgent``: what is left of an interactive packet sent between its frames (lane 1:
    frame.py, "Lanes"), loaded first. Only while ``frames`` has something does ``urgent``
    (``preempt``), and its frames go first, so ``frames`` is empty only when both are."""

    name: str
    radio_address: bytes
    networks: Networks
    fragmenter: Fragmenter
    sealer: secure.Sealer | None
    arq: ArqSender | None = None
    frames: deque[bytes] = field(default_factory=deque)
    urgent: deque[bytes] = field(default_factory=deque)
    #: the flow (fairqueue.flow_key) of the packet in ``frames``: a packet of that flow never
    #: overtakes it
    flow: bytes = b""
    counters: SendCounters = field(default_factory=SendCounters)
    index: int = 0  # its place in its table
    last_sent: float = 0.0  # when its last packet (or keepalive) was cut into frames
    taken: int = 0  # frames taken (``next_frame``) so far
    #: the lane of the last grant or release queued (``uplink``), and ``taken`` once it has
    #: gone: the next one goes behind it while it waits in lane 0 (a grant in lane 1 overtook
    #: a revoke still queued: the mobile heard the grant, then the revoke, and held nothing
    #: while the base waited for the grant's release: 35 ms, one ping from the base in ten)
    _uplink_mark: tuple[int, int] = (1, 0)
    #: the BAND reports (``say``) not yet taken whole: ``taken`` once each has gone, and the
    #: packet; queued again when the packets on their way are given up (a MAX_RT under the
    #: Wi-Fi they are about took every report with it: docs/design.md §6)
    _saying: list[tuple[int, bytes]] = field(default_factory=list)

    def _cut(self, packet: bytes, lane: int = 0) -> list[bytes]:
        """A packet sealed (on a secured link) and cut into frames."""
        if self.sealer is not None:
            packet = self.sealer.seal(packet, self.fragmenter.number_for(lane))
        return self.fragmenter.fragment(packet, lane)

    def load(self, packet: bytes, now: float, flow: bytes = b"") -> None:
        """A packet from the queue (of ``flow``), cut into its frames."""
        self.frames.extend(self._cut(packet))
        self.flow = flow
        self.counters.packets_sent += 1
        self.last_sent = now

    def preempt(self, packet: bytes, now: float) -> None:
        """An interactive packet, sent between the frames of the one on its way (lane 1)."""
        self.urgent.extend(self._cut(packet, lane=1))
        self.counters.packets_sent += 1
        self.counters.preempted += 1
        self.last_sent = now

    def uplink(self, message: bytes, now: float, count: bool = True) -> None:
        """A grant or a release (uplink.py), ahead of the rest: between the frames of the
        packet on its way (lane 1, behind an interactive packet's), or next; never ahead of
        the one queued before it."""
        lane, mark = self._uplink_mark
        if self.frames and not (lane == 0 and self.taken < mark):
            self.urgent.extend(self._cut(message, lane=1))
            self._uplink_mark = (1, self.taken + len(self.urgent))
        else:
            self.frames.extend(self._cut(message))
            self._uplink_mark = (0, self.taken + len(self.urgent) + len(self.frames))
        self.counters.uplink_sent += count
        self.last_sent = now

    def say(self, message: bytes, now: float) -> None:
        """A link-control packet of the link's channels (MOVE, HERE, BAND:
        channel_control.py), queued as a grant is; a BAND sent again if given up before it
        went (channel_control.sent_again)."""
        self.uplink(message, now, count=False)
        self._saying = [(m, p) for m, p in self._saying if m > self.taken]
        if channel_control.sent_again(message):
            self._saying.append((self.gone_at(), message))

    def control_frames(self, message: bytes) -> list[bytes]:
        """A rate's announcement or probe (rate.py), cut on lane 1: between the frames of a
        packet on its way, which waits. Loaded by the caller, not kept here."""
        return self._cut(message, lane=1)

    def probe_length(self, frames: int = 1) -> int:
        """The probe's length that fills whole frames (rate.probe_length), at least
        ``frames`` of them."""
        sealing = 0 if self.sealer is None else secure.OVERHEAD
        data = self.fragmenter.payload_size - frame.HEADER_LEN
        least = rate.probe_length(sealing + frame.PACKET_OVERHEAD, data)
        return max(least, frames * data - sealing - frame.PACKET_OVERHEAD)

    def next_frame(self) -> bytes:
        """The next frame to send (the interactive packet's first); call only with ``frames``."""
        self.taken += 1
        return self.urgent.popleft() if self.urgent else self.frames.popleft()

    def gone_at(self) -> int:
        """``taken`` once the packet or message queued last has gone (lane 1's frames go
        first: the last of ``urgent`` if it holds any, else of ``frames``)."""
        return self.taken + (len(self.urgent) or len(self.frames))

    def give_up(self) -> None:
        """What is left of the packets on their way is not sent (counted); the link's
        channels' packets among them are queued again, whole."""
        self.counters.packets_aborted += bool(self.frames) + bool(self.urgent)
        self.frames.clear()
        self.urgent.clear()
        self._uplink_mark = (1, 0)
        again = [p for m, p in self._saying if m > self.taken]
        self._saying = []
        for packet in again:
            self.say(packet, self.last_sent)

    def max_rt(self) -> None:
        """A frame to this peer exhausted its retries (the chip's FIFO is flushed, whichever
        packets its frames were of): the rest of the packets on their way is given up."""
        self.counters.max_rt += 1
        self.give_up()

    def keepalive(self, now: float) -> list[bytes]:
        """A packet of nothing (sealed on a secured link): the peer learns we live."""
        self.counters.keepalives_sent += 1
        self.last_sent = now
        if self.sealer is None:
            return self.fragmenter.keepalive()  # (an open link: no empty packet to cut)
        return self._cut(b"")

    def link_control(self, skip_past: secure.Floor | None, floor: secure.Floor | None) -> None:
        """What the peer's receiver told us through our RX process: it refuses our epochs up
        to ``skip_past`` (seal past them from the next packet cut), or its sender is stale (a
        floor message for it: between the frames of the packet on its way, lane 1, as a grant
        goes, or next). A loaded stream-mode sender always has a packet on its way: a floor
        that waited for none was never sent, and a restarted receiver never heard its peer
        again."""
        if self.sealer is None:
            return
        if skip_past is not None and self.sealer.skip_past(skip_past):
            self.counters.epoch_skips += 1
        if floor is not None:
            message = secure.floor_message(floor)
            if self.frames:
                self.urgent.extend(self._cut(message, lane=1))
            else:
                self.frames.extend(self._cut(message))
            self.counters.floors_sent += 1

    def feed_arq(self) -> bool:
        """Stream mode: offer the packet's frames to the ARQ while its window has room; did
        any go?"""
        assert self.arq is not None
        offered = False
        while self.frames and self.arq.offer(self.urgent[0] if self.urgent else self.frames[0]):
            self.next_frame()
            offered = True
        return offered

    def stats(self) -> dict[str, Any]:
        return {
            **asdict(self.counters),
            "sealed": None if self.sealer is None else self.sealer.sealed,
            "epoch": None if self.sealer is None else self.sealer.epoch,
        }


@dataclass
class ReceiveCounters:
    """A peer's receiving half: its IP packets taken (whole, checked, from an allowed source)
    and their bytes, authentic link-control packets of no known kind, and packets from a
    source outside its ``allowed_ips`` (dropped: a mobile cannot send as another host)."""

    ip_packets: int = 0
    ip_bytes: int = 0
    control_unknown: int = 0
    #: link control this link does not take: a channel's MOVE, HERE or BAND on a link
    #: without security (anyone could send them: docs/design.md §6)
    control_refused: int = 0
    source_not_allowed: int = 0


@dataclass
class PeerReceiver:
    """Everything the RX process keeps for one peer. ``last_heard``: when its last whole,
    checked (and, on a secured link, authentic) packet came: a stranger's frames move
    nothing. ``floor_heard``: an epoch floor the peer sent us, for our TX process."""

    name: str
    radio_address: bytes
    networks: Networks
    reassembler: Reassembler
    opener: secure.Opener | None
    arq: ArqReceiver | None = None
    index: int = 0  # its place in its table: its frames come on pipe index + 1
    last_heard: float | None = None
    heard: int = 0  # whole, checked packets (keepalives and link control too)
    floor_heard: secure.Floor | None = None
    #: the uplink (uplink.py): a grant's length the peer (our base) sent us; the peer (a
    #: mobile) handed its grant back. For our TX process; taken with ``take_uplink``.
    grant_heard: uplink.Grant | None = None
    grants_heard: int = 0  # (any: the peer is a base that grants its mobiles the uplink)
    release_heard: int | None = None  # the number of the grant released
    #: the rate the peer (our direction's sender) announced, on trial? (rate.py), for our
    #: RX radio
    rate_heard: rate.RateMove | None = None
    #: the link's channels (channel_control.py): a move, where the base is (from our base),
    #: a mobile's report (from our mobile); for our RX process, each with when it came
    move_heard: tuple[channel_control.Move, float] | None = None
    here_heard: tuple[channel_control.Here, float] | None = None
    band_heard: tuple[channel_control.BandReport, float] | None = None
    counters: ReceiveCounters = field(default_factory=ReceiveCounters)
    _stale_told: int = 0
    _told_at: float = -STALE_NOTICE_S

    def receive(self, frame: bytes, now: float) -> bytes | None:
        """A frame of this peer's (stream mode: one the ARQ delivered): the IP packet it
        completes, if it completes one that passed every check and may come from this peer."""
        packet = self.reassembler.receive(frame, now)
        if packet is None:
            return None
        self.last_heard = now  # (a keepalive too: b"")
        self.heard += 1
        if not packet:
            return None
        if packet[:1] == b"\x00":  # a link-control packet (never an IP packet: version 0)
            floor = secure.parse_floor_message(packet)
            grant = uplink.parse_grant(packet)
            if floor is not None and self.opener is not None:
                self.floor_heard = floor
            elif grant is not None:
                self.grant_heard = grant
                self.grants_heard += 1
            elif (number := uplink.parse_release(packet)) is not None:
                self.release_heard = number
            elif (announced := rate.parse_rate(packet)) is not None:
                self.rate_heard = announced
            elif packet.startswith(channel_control.MAGICS):
                self._channel_control(packet, now)
            elif not rate.is_filler(packet):  # (a filler is taken and dropped)
                self.counters.control_unknown += 1
            return None
        c = self.counters
        if not self.networks.allows_source(packet):
            c.source_not_allowed += 1
            return None
        c.ip_packets += 1
        c.ip_bytes += len(packet)
        return packet

    def channel_frame(self, message: bytes, now: float) -> None:
        """A MOVE or HERE from a CHANNEL frame (stream mode: arq_frames.py): on a secured link
        its seal checked (keyed and fresh), so it is a sign of life as a packet is."""
        if self.opener is not None:
            self.last_heard = now
        self._channel_control(message, now)

    def _channel_control(self, packet: bytes, now: float) -> None:
        """A MOVE, HERE or BAND: taken only on a secured link (this packet was opened)."""
        if self.opener is None:
            self.counters.control_refused += 1
        elif (move := channel_control.parse_move(packet)) is not None:
            self.move_heard = (move, now)
        elif (here := channel_control.parse_here(packet)) is not None:
            self.here_heard = (here, now)
        elif (band := channel_control.parse_band(packet)) is not None:
            self.band_heard = (band, now)
        else:
            self.counters.control_unknown += 1

    def tick(self, now: float) -> secure.Floor | None:
        """Each loop turn: a half-built packet that waited too long is dropped; the opener's
        mark is kept; the epoch floor to tell the peer's sender, if it is stale (at most once
        every STALE_NOTICE_S while its stale packets keep coming)."""
        self.reassembler.expire(now)
        if self.opener is None:
            return None
        self.opener.tick()
        stale = self.opener.drops[secure.SecureDrop.STALE]
        if stale > self._stale_told and now - self._told_at >= STALE_NOTICE_S:
            self._stale_told, self._told_at = stale, now
            return self.opener.stale_floor
        return None

    def take_uplink(self) -> tuple[uplink.Grant | None, int | None]:
        """The grant heard and the number of the grant a release was heard of (or None),
        since the last call."""
        out = (self.grant_heard, self.release_heard)
        self.grant_heard, self.release_heard = None, None
        return out

    def take_floor(self) -> secure.Floor | None:
        floor, self.floor_heard = self.floor_heard, None
        return floor

    def stats(self, now: float) -> dict[str, Any]:
        r, o = self.reassembler, self.opener
        return {
            **asdict(self.counters),
            "keepalives": r.keepalives,
            "missing": r.missing if o is None else o.missing,
            "drops": {str(k): v for k, v in r.drops.items()},
            "peer_last_heard_s": None
            if self.last_heard is None
            else round(now - self.last_heard, 3),
            "security": None
            if o is None
            else {"opened": o.opened, "drops": {str(k): v for k, v in o.drops.items()}},
        }
