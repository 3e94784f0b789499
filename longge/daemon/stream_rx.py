"""Stream mode's receiving half (``radio.mode = "stream"``, docs/design.md §4), as the RX pump
(radio_rx.py) drives it: the chips send without acknowledgements, and LongGe's ARQ
acknowledges over the reverse channel. Each frame goes to its peer's ARQ receiver, and what
that delivers in order to the peer's reassembly; the peer's ACKs (for our sender) and ours (to
go ahead of our data) go to the TX process over the pair (messages.py: ``PeerAck``,
``AckToSend``), with what a peer's packets said of the shared uplink (receiving.py) and, at a
base with several mobiles, that a mobile's frames came (``FramesCame``). A full RX FIFO tells
the receivers to ask their senders to slow down."""

from __future__ import annotations

import socket
from typing import Any, ClassVar

from longge.daemon.child import FIFO_FULL, FIFO_OCCUPIED
from longge.daemon.messages import AckToSend, FramesCame, PeerAck
from longge.daemon.peers import PREEMPT_MAX, RxCounters, arq_wake_at, deliver, peer_arqs
from longge.daemon.receiving import answer_news, to_tx, uplink_news
from longge.protocol import rate as rt
from longge.protocol.arq_frames import CHANNEL, CONTROL, RESET, arq_totals
from longge.protocol.peer import PeerReceiver, PeerTable
from longge.radio.interface import LinkRadio
from longge.tun import Tun

#: A base with several mobiles tells its TX process a mobile's frames came (``FramesCame``) at
#: most this often.
HEARD_EVERY_S = 0.005
#: ... and only while a whole authentic packet of the mobile's came within this long: a data
#: frame's sequence byte is anyone's, and frames on an absent mobile's pipe kept it "alive"
#: (full grants instead of backed-off probes: uplink_scheduler.py). A live mobile whose packet
#: waits behind a lost frame has sent one within its last grants; a stranger can so keep a
#: mobile that left alive for this long at most.
FRAMES_COUNT_S = 1.0
#: After the RX radio switched on an announcement (adapt), its ACK is sent again this often
#: until the sender's frames come at the new rate (or rate.STREAM_TRIAL_S): the sender
#: switches once it has it, and until then sends nothing the receiver can hear
ACK_REPEAT_S = 0.005


class StreamReceiving:
    """The peers' ARQ receivers, between the RX radio and the peers' reassembly."""

    ARQ: ClassVar[bool] = True
    OWN_TURN: ClassVar[bool] = True

    def __init__(
        self, tun: Tun, pair: socket.socket, table: PeerTable[PeerReceiver], c: RxCounters
    ) -> None:
        self.tun, self.pair, self.table, self.c = tun, pair, table, c
        self.arqs = peer_arqs([p.arq for p in table])
        #: after a switch on an announcement: (frames in then, until when, last repeat)
        self.repeat: tuple[int, float, float] | None = None
        # a base with several mobiles: when each one's frames were last said to have come (a
        # packet behind a lost frame completes only after its retransmission, and a mobile
        # whose frames came is not silent: uplink_scheduler.py)
        self.told = [-1.0] * len(table) if len(table) > 1 else []

    def first_pipe(self, radio: LinkRadio) -> int:
        state = radio.is_fifo(False)  # one look: empty, full or neither
        if state == FIFO_FULL:
            for arq in self.arqs:
                arq.fell_behind()
        # (not a chip that reads 0xFF: is_fifo 3; the look's STATUS names the pipe)
        waiting = state in (FIFO_OCCUPIED, FIFO_FULL)
        return (radio.get_status_flags() >> 1) & 7 if waiting else 7

    def take(self, pipe: int, frame: bytes, now: float) -> None:
        c, told = self.c, self.told
        c.frames_in += 1
        peer = self.table.by_pipe(pipe)
        if peer is None:
            c.no_peer += 1
            return
        if frame and frame[0] & CONTROL and frame[0] not in (RESET, CHANNEL):
            c.acks_in += 1
            to_tx(self.pair, PeerAck(peer.index, frame), c)
            return
        i, arq = peer.index, self.arqs[peer.index]
        if told and frame and not frame[0] & CONTROL and now - told[i] >= HEARD_EVERY_S:
            lately = peer.last_heard is not None and now - peer.last_heard < FRAMES_COUNT_S
            if lately:  # (a whole authentic packet lately: FRAMES_COUNT_S)
                told[i] = now
                to_tx(self.pair, FramesCame(i), c)
        delivered = arq.on_frame(frame, now)
        while arq.channel:  # (a MOVE or HERE outside the window: agility.py takes it)
            peer.channel_frame(arq.channel.popleft(), now)
        for inner in delivered:
            heard = peer.heard
            packet = peer.receive(inner, now)
            if peer.heard != heard:  # a whole packet (a keepalive, link control)
                if peer.grant_heard is not None or peer.release_heard is not None:
                    # our base grants us the uplink: our ACK goes in it, before the
                    # grant reaches the TX process (an ACK later meets the next
                    # holder's frames, and is lost); a mobile released its grant:
                    # acknowledged at once (an idle mobile releases its next only
                    # once all it sent is acknowledged: uplink_tx.py)
                    arq.ack_now()
                    ack = arq.control(now)
                    if ack is not None:
                        to_tx(self.pair, AckToSend(i, ack), c)
                uplink_news(self.pair, self.table, peer, c, now, packet is not None)
                if peer.rate_heard is not None:  # (its sender waits for it to pass;
                    arq.ack_now()  # the ACK goes once the radio switched: rate_switched)
            if packet is not None:
                if told and len(packet) <= PREEMPT_MAX:
                    # a mobile's interactive packet (a ping's): acknowledged at once,
                    # so that the mobile, idle then, releases its grant soon (slower,
                    # it held it more than LIGHT_USE_S and waited its turn behind
                    # the busy ones)
                    arq.ack_now()
                deliver(self.tun, packet, c)
                answer_news(self.pair, peer, packet, c, now)

    def rate_switched(self, now: float) -> None:
        """(before our ACKs: the sender switches once its announcement was acknowledged)"""
        self.repeat = (self.c.frames_in, now + max(rt.STREAM_TRIAL_S.values()), now)

    def turn(self, now: float) -> None:
        """The announcement's ACK again until the sender's frames come; then every ARQ's
        ACK that is due, to the TX process."""
        if self.repeat is not None:
            heard_since, until, last = self.repeat
            if self.c.frames_in != heard_since or now >= until:
                self.repeat = None
            elif now - last >= ACK_REPEAT_S:
                self.arqs[0].ack_now()
                self.repeat = (heard_since, until, now)
        for index, arq in enumerate(self.arqs):
            prompt = arq.prompt  # (a hole, a repeat, a ping's packet: it may end a burst)
            ack = arq.control(now)
            if ack is not None:
                # (urgent: a hole, a repeat, a mobile's interactive packet: it may end a burst
                # to another mobile, stream_tx.py ``_cut``)
                urgent = bool(prompt and self.told)
                to_tx(self.pair, AckToSend(index, ack, urgent=urgent), self.c)

    def wake_at(self, now: float) -> float | None:
        """The ARQs' timers, an ACK's next repeat."""
        at = arq_wake_at(self.arqs)
        if self.repeat is not None:
            again = self.repeat[2] + ACK_REPEAT_S
            at = again if at is None else min(at, again)
        return at

    def stats(self) -> dict[str, Any]:
        return {"arq": arq_totals([a.stats for a in self.arqs]), "mode": "stream"}
