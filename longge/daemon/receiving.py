"""What a node's RX process does with what it hears, in either link mode (the pump is
``radio_rx.py``): each frame to its peer's receiving half, whole packets to the kernel, what a
peer's packets said of the shared uplink to the TX process over the pair, its link control to
the supervisor, the frames the TX radio heard aside; and a link mode's receiving strategy,
the shape both modes share (``Receiving``). ESB's (``EsbReceiving``, here: the chip
acknowledged each frame, which goes straight to its peer); stream mode's (``stream_rx.py``:
each frame through the peer's ARQ receiver, whose ACKs go out through the TX process).

The uplink's news (protocol/uplink.py) goes to the TX process as messages.py's: ``GrantHeard``
(our base grants us the uplink, with when it came), ``AnswerAsked`` (we were delivered a
packet that asks for an answer), ``Released`` (a mobile ends its grant), ``Heard`` (a base
with several mobiles heard one's IP packet, or its keepalive or other link control: it
lives). A base with several mobiles gets the frames its TX radio heard on the downlink's
channel between its bursts over the pair (``HeardAside``), taken as this radio's (listening.py).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from longge.daemon.child import Child
from longge.daemon.messages import (
    AnswerAsked,
    GrantHeard,
    Heard,
    HeardAside,
    Message,
    Released,
    received,
    send,
)
from longge.daemon.peers import RxCounters, deliver, table_stats
from longge.protocol.peer import PeerReceiver, PeerTable
from longge.protocol.uplink import asks_answer
from longge.radio.interface import LinkRadio
from longge.tun import Tun


class Receiving(Protocol):
    """A link mode's receiving half, as the RX pump (radio_rx.py) drives it."""

    #: the peers' receivers have LongGe's ARQ (stream mode; sending.Sending's)
    ARQ: ClassVar[bool]
    #: it has work of its own each turn: timers (``wake_at`` may say a moment) and what goes
    #: out for the frames (``turn``: stream mode's ACKs); ESB's has none, and the RX pump
    #: does not call it for nothing (a call a turn costs a Pi's receiver a few per cent)
    OWN_TURN: ClassVar[bool]

    def __init__(
        self, tun: Tun, pair: socket.socket, table: PeerTable[PeerReceiver], c: RxCounters
    ) -> None: ...

    def first_pipe(self, radio: LinkRadio) -> int:
        """One look at the RX FIFO (after the IRQ pin's edges were taken): the pipe of its
        first payload, 7 for none."""
        ...

    def take(self, pipe: int, frame: bytes, now: float) -> None:
        """One frame and the pipe it came on (our radio's, or one heard aside)."""
        ...

    def rate_switched(self, now: float) -> None:
        """The RX radio switched to the rate the peer announced (protocol/rate_listening.py)."""
        ...

    def turn(self, now: float) -> None:
        """After the frames (the radio's and those heard aside): what goes out for them
        (stream mode: the ARQs' ACKs)."""
        ...

    def wake_at(self, now: float) -> float | None:
        """The mode's next timer (protocol/part.py)."""
        ...

    def stats(self) -> dict[str, Any]:
        """The mode's own part of the RX process's status."""
        ...


class EsbReceiving:
    """ESB: the chip acknowledged each frame; each goes straight to its peer's reassembly
    (and, on a secured link, the AEAD: a stranger's frames move nothing)."""

    ARQ: ClassVar[bool] = False
    OWN_TURN: ClassVar[bool] = False

    def __init__(
        self, tun: Tun, pair: socket.socket, table: PeerTable[PeerReceiver], c: RxCounters
    ) -> None:
        self.tun, self.pair, self.table, self.c = tun, pair, table, c

    def first_pipe(self, radio: LinkRadio) -> int:
        waiting, first = radio.available_pipe()
        return first if waiting else 7

    def take(self, pipe: int, frame: bytes, now: float) -> None:
        c = self.c
        c.frames_in += 1
        peer = self.table.by_pipe(pipe)
        if peer is None:
            c.no_peer += 1
            return
        heard = peer.heard
        packet = peer.receive(frame, now)
        if peer.heard != heard:  # a whole packet (a keepalive, link control)
            uplink_news(self.pair, self.table, peer, c, now, packet is not None)
        if packet is not None:
            deliver(self.tun, packet, c)
            answer_news(self.pair, peer, packet, c, now)

    def rate_switched(self, now: float) -> None:
        pass  # (the chip acknowledges at any rate it hears)

    def turn(self, now: float) -> None:
        pass

    def wake_at(self, now: float) -> float | None:
        return None

    def stats(self) -> dict[str, Any]:
        return {}


def tend(child: Child, table: PeerTable[PeerReceiver], now: float) -> None:
    """4. expire, and the link control each peer's packets asked for: a floor the peer sent
    (for our TX process), a stale sender of the peer's (tell it its floor): both through the
    supervisor (child.py)."""
    for peer in table:
        stale = peer.tick(now)
        if stale is not None:
            child.tell("stale", peer.index, stale)
        floor = peer.take_floor()
        if floor is not None:
            child.tell("floor", peer.index, floor)


def uplink_news(
    pair: socket.socket,
    table: PeerTable[PeerReceiver],
    peer: PeerReceiver,
    c: RxCounters,
    now: float,
    sent: bool = True,
) -> None:
    """3. uplink: a whole packet of ``peer``'s came (``sent``: an IP packet); what it said of
    the uplink, for our TX process (the pair: made by the supervisor)."""
    grant, release = peer.take_uplink()
    msg: Message
    if grant is not None:  # (with when it came: the TX process may read it later)
        msg = GrantHeard(peer.index, grant, now)
    elif release is not None:
        msg = Released(peer.index, release)
    elif len(table) > 1:  # (a keepalive, or another link-control packet: it lives)
        msg = Heard(peer.index, sent)
    else:
        return
    to_tx(pair, msg, c)


def to_tx(pair: socket.socket, msg: Message, c: RxCounters) -> None:
    if not send(pair, msg):
        c.pair_full += 1  # the TX process is behind (or gone): a grant ends by its time anyway


def answer_news(
    pair: socket.socket, peer: PeerReceiver, packet: bytes, c: RxCounters, now: float
) -> None:
    """3. uplink: a mobile whose base grants the uplink was delivered a packet that asks for
    an answer (a ping, a TCP segment): its TX process keeps a grant that finds it idle a
    while for the answer (uplink.ANSWER_S)."""
    if peer.grants_heard and asks_answer(packet):
        to_tx(pair, AnswerAsked(peer.index, now), c)


def heard_aside(
    pair: socket.socket,
    c: RxCounters,
    take: Callable[[int, bytes, float], None],
    now: float,
    other: Callable[[Message, float], None] | None = None,
) -> None:
    """aside (a base with several mobiles) the frames our TX radio heard on the downlink's
    channel between its bursts (``HeardAside``: listening.py), taken as our radio's (``take``:
    pipe, frame, now); what else the TX process said, to ``other`` (agility.py's)."""
    for msg in received(pair):
        if isinstance(msg, HeardAside):
            c.frames_aside += 1
            take(msg.pipe, msg.frame, now)
        elif other is not None:
            other(msg, now)


def rx_stats(c: RxCounters, table: PeerTable[PeerReceiver], now: float) -> dict[str, Any]:
    return table_stats(c, {p.name: p.stats(now) for p in table})


def flush(table: PeerTable[PeerReceiver]) -> None:
    """At the end: the replay marks written."""
    for peer in table:
        if peer.opener is not None:
            peer.opener.flush()
