"""A base with several mobiles listens on the downlink's channel between its bursts (docs/design.md
§1, "A light mobile's packet on the downlink's channel"), in both link modes: a light mobile
sends its small packets there while it waits for a grant (aside.py).

The base's TX radio is idle while the mobiles send (it sends grants and answers), on the
downlink's channel, where no mobile sends. So it listens between its bursts, with the
mobiles' uplink addresses on the pipes its RX radio has them on; what it hears the TX
process hands to the RX process (``HeardAside`` on the pair), which takes it as a frame from
its own radio: the same reassembly, authentication and replay window. When it listens and
how long it holds for a packet heard in part is decided without I/O
(protocol/listen_timing.py); this is its I/O: the chip's role set through the radio's owner,
the RX FIFO read, the frames handed on. A base whose TX radio has had something to send for
DEAF_AFTER_S (a loaded downlink: it does not listen) says so in its grants
(uplink.DEAF_BIT), and its mobiles send nothing there till a grant says otherwise.
"""

from __future__ import annotations

import socket

from longge.daemon.child import RxFifo, TxFifoEmpty, take_edges, waitable
from longge.daemon.messages import HeardAside, send
from longge.daemon.radio_owner import RadioOwner
from longge.protocol.listen_timing import LISTEN_AFTER_S, ListenTiming, ListenTurn
from longge.protocol.peer import PeerSender
from longge.radio.interface import LinkRadio


class BaseListening(ListenTiming):
    """A base's TX radio, between its bursts: listening on the downlink's channel (when:
    ``ListenTiming``)."""

    def __init__(
        self, owner: RadioOwner, after_s: float = LISTEN_AFTER_S, arq_byte: bool = False
    ) -> None:
        super().__init__(after_s, arq_byte)
        self.owner = owner
        self.fifo = RxFifo()
        self._fifo_empty = TxFifoEmpty()  # (the timing's question, of this turn's radio)

    def turn(
        self,
        radio: LinkRadio,
        pair: socket.socket | None,
        work: bool,
        addressed: PeerSender,
        now: float,
    ) -> None:
        """Each loop turn, before loading: the chip's role as ``ListenTiming.step`` decides;
        what the RX FIFO holds goes to the RX process."""
        self._fifo_empty.radio = radio
        turn = ListenTurn(work, addressed.radio_address, waitable(radio) is not None,
                          self._fifo_empty)  # fmt: skip
        for role in self.step(turn, now):
            self.owner.apply(role)
        self.hand_on(radio, pair, now)

    def hand_on(self, radio: LinkRadio, pair: socket.socket | None, now: float) -> None:
        """What the TX radio heard, to the RX process (dropped, counted, if it is behind)."""
        while True:  # (till a look finds it empty: a frame left takes a slot of three)
            take_edges(radio)
            waiting, first = radio.available_pipe()
            if not waiting:
                return
            self._walk(radio, pair, first, now)

    def _walk(self, radio: LinkRadio, pair: socket.socket | None, first: int, now: float) -> None:
        for pipe, frame in self.fifo.frames(radio, first):
            self.heard(frame, now)
            if pair is None or not send(pair, HeardAside(pipe, frame)):
                self.counters.pair_full += 1
