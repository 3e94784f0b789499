"""Stream mode's way for a light mobile's packet beside a busy uplink: the downlink's channel
(a base with several mobiles: docs/design.md §1, "A light mobile's packet on the downlink's
channel"; the ESB way and the base's listening are ``aside.py``).

The same way as ESB's, with one difference: stream mode's chips send without the chip's
acknowledgements, and a frame sent there must be known heard (the base's TX radio listens
only between its bursts). So, there only, the chip's ACK is asked for: the base's TX radio
acknowledges on the mobiles' pipes (``RadioOwner.set_up``), and the mobile's TX radio asks
for one (EN_AA on pipe 0, ASIDE_ARC retries) while it sends there, and sets stream mode's
settings again after. The frames are the ARQ's (sequenced, sealed): one the base did not
acknowledge goes again from the ARQ, there or in the mobile's next grant, and the base's ARQ
acknowledges what it took as it does every frame of the mobile's. The mobile's own ACKs to
the base go there too while it waits (on the uplink's channel they met the holder's frames).
"""

from __future__ import annotations

from collections import deque

from longge.config import NodeConfig
from longge.daemon.aside import ASIDE_MAX, AsideCounters, Pacing, ard_step
from longge.daemon.child import FIFO_FULL
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.radio_owner import AutoAck, Channel, RadioOwner, Retries
from longge.protocol.arq import ArqSender
from longge.protocol.peer import PeerSender
from longge.radio.interface import LinkRadio

#: The base's TX radio listens once its FIFO has drained: in stream mode it sends an ACK to
#: a busy mobile every ~1.5 ms, and at aside.LISTEN_AFTER_S (and the loop turn after it) it
#: was deaf a third of the time.
LISTEN_AFTER_S = 0.0
#: A frame sent there is tried this many times more (the chip's retries, ard_step apart):
#: the base is deaf while it sends and a moment after (its ACKs to the busy mobiles), and a
#: packet's first frame met it so one time in three (ARC 0: half the packets refused).
#: (ESB's base sends little then: one try, aside.py.)
ASIDE_ARC = 3
#: A mobile asked to send more than ACKS_BUSY ACKs within ACKS_BUSY_S is being sent to
#: (a loaded downlink): the base is not listening, and its ACKs tried there met the base's
#: frames (a loaded downlink lost 3 % so): they go on the uplink's channel. (A receiver
#: sends one every ACK_DELAY, 4 ms, at most: at 4 a mobile among five loaded ones was
#: seldom seen as one, and the downlink to five lost 5 %.)
ACKS_BUSY = 2
ACKS_BUSY_S = 0.020
#: After a refusal, the next try (doubling, aside.Pacing).
RETRY_S = 0.0005
#: Refusals in a row after which our ACKs go on the uplink's channel again (till a frame
#: here is acknowledged, or at the next try): a base sending all the time, or one that does
#: not listen.
ACKS_REFUSED = 3


def stream_part(cfg: NodeConfig, owner: RadioOwner, queues: PeerQueues) -> StreamAside | None:
    """A stream-mode mobile's sending there (a base's listening is ``aside.BaseListening``)."""
    return StreamAside(cfg, owner, queues) if cfg.role == "mobile" else None


class StreamAside:
    """A stream-mode mobile waiting for a grant: its ACKs to the base (sent outside its
    grants, they met the holder's frames on the uplink's channel) and a sparse flow's small
    packet (put to its ARQ while the ARQ has nothing else on its way), sent on the
    downlink's channel."""

    def __init__(self, cfg: NodeConfig, owner: RadioOwner, queues: PeerQueues) -> None:
        self.cfg = cfg
        self.owner = owner
        self.queues = queues  # (a packet queued: its time to try here wakes the pump)
        self.on = False  # the TX radio is on the downlink's channel
        #: frames in the TX FIFO, their fate not known: the ARQ's, our ACKs (as they came)
        self.loaded = 0
        self.acks: list[tuple[int, bytes]] = []
        self.left = 0  # the packet's frames still to go here
        self.acks_came: deque[float] = deque(maxlen=ACKS_BUSY + 1)  # (when ours were asked for)
        self.pace = Pacing(RETRY_S)
        self.counters = AsideCounters()

    def _settle(self, radio: LinkRadio) -> bool:
        """Are the loaded frames' fates known (the FIFO empty: each acknowledged by the
        base's chip; a MAX_RT came in ``news`` first)?"""
        if not (self.loaded or self.acks):
            return True
        if not radio.is_fifo(True, True):
            return False
        self.counters.aside_frames += self.loaded + len(self.acks)
        self.pace.refusals = 0
        self.loaded, self.acks = 0, []
        return True

    def reset(self, arq: ArqSender, control: deque[tuple[int, bytes]]) -> None:
        """The radio's settings were applied again (on its own channel, the FIFO empty): the
        loaded frames go again."""
        self._again(arq, control)
        self.on = False

    def _again(self, arq: ArqSender, control: deque[tuple[int, bytes]]) -> None:
        arq.not_sent(self.loaded)
        control.extendleft(reversed(self.acks))
        self.left, self.loaded, self.acks = self.left + self.loaded, 0, []

    def busy(self) -> bool:
        """Frames on their way here, or more to go."""
        return self.on and (self.loaded > 0 or self.left > 0 or bool(self.acks))

    def sent_to(self, now: float) -> bool:
        """Is the base sending to us (more than ACKS_BUSY ACKs asked for in ACKS_BUSY_S)? It
        hears nothing here then."""
        came = self.acks_came
        return len(came) == came.maxlen and now - came[0] < ACKS_BUSY_S

    def _acks_here(self, control: deque[tuple[int, bytes]], now: float) -> bool:
        """Do our ACKs go here? Not while the base sends to us (ACKS_BUSY), nor after
        ACKS_REFUSED refusals in a row (a base sending all the time, or not listening at all:
        on the uplink's channel, as before) but at the next try then (backed off to
        ASIDE_RETRY_MAX_S), to learn whether it listens again."""
        if not control or self.sent_to(now):
            return False
        return self.pace.refusals < ACKS_REFUSED or now >= self.pace.retry_at

    def fill(
        self,
        radio: LinkRadio,
        peer: PeerSender,
        control: deque[tuple[int, bytes]],
        queues: PeerQueues,
        now: float,
    ) -> int:
        """Waiting for a grant: our ACKs and the packet's next frames here (a new packet's,
        if one may go); how many were loaded."""
        arq = peer.arq
        assert arq is not None
        if not self._settle(radio) or not self.pace.may(now):
            return 0
        if not self.on:
            if not radio.is_fifo(True, True):
                return 0  # (what went on the uplink's channel is still on its way)
            if self.left <= 0 and arq.established and arq.idle and not peer.frames:
                # (only behind nothing: the base delivers in order)
                packet = queues.pop_sparse(peer.index, now, ASIDE_MAX, b"")
                if packet is not None:
                    offered = arq.offered
                    peer.load(packet, now, queues.last_key(peer.index))
                    peer.feed_arq()
                    self.left = arq.offered - offered
                    self.counters.aside_packets += 1
            if self.left <= 0 and not self._acks_here(control, now):
                return 0
            self.owner.apply(
                Channel(self.cfg.rx_channel),
                AutoAck(0, True),  # (the base's chip acknowledges there)
                Retries(ard_step(self.cfg), ASIDE_ARC),
            )
            self.on = True
        loaded = 0
        while self.pace.tokens >= 1 and radio.is_fifo(True) != FIFO_FULL:
            if self._acks_here(control, now):
                self.acks.append(control.popleft())
                frame = self.acks[-1][1]
            elif self.left > 0:
                got = arq.next_frame(now)
                if got is None:  # (acknowledged meanwhile: an ACK of the base's chip was lost)
                    self.left = 0
                    break
                frame = got
                self.left -= 1
                self.loaded += 1
            else:
                break
            self.pace.tokens -= 1
            radio.start_fast_write(frame)
            loaded += 1
        return loaded

    def news(
        self, arq: ArqSender, control: deque[tuple[int, bytes]], max_rt: bool, now: float
    ) -> bool:
        """A MAX_RT of a frame sent here (the base was sending): the loaded frames go again
        (the ARQ's from it, later or in the grant; our ACKs ahead of the newer). The caller
        flushes the FIFO."""
        if not (max_rt and (self.loaded or self.acks)):
            return False
        self._again(arq, control)
        self.counters.aside_refused += 1
        self.pace.refused(now)
        return True

    def back(
        self, radio: LinkRadio, control: deque[tuple[int, bytes]], waiting: bool, now: float
    ) -> bool:
        """The TX radio back on the uplink's channel with stream mode's settings when nothing
        more goes here (or a grant came: ``waiting`` False; the ARQ sends the rest in it),
        once the loaded frames' fate is known; is it there?"""
        if self.on and not self._settle(radio):
            return False
        if not waiting:
            self.left = 0
        if not self.on:
            return True
        if waiting and self.left > 0:
            if self.pace.refusals < ACKS_REFUSED:
                # (its next try here: on the uplink's channel the ARQ would send them now,
                # in what is left of a grant it released, into the next holder's)
                return False
            self.left = 0  # (the ARQ sends them in the grant)
        more = self._acks_here(control, now)
        if waiting and more and self.pace.tokens >= 1 and now >= self.pace.retry_at:
            return False  # (its next frames go here)
        opts = self.cfg.radio
        self.owner.apply(
            Channel(self.cfg.tx_channel), AutoAck(0, opts.acked), Retries(opts.ard_step, opts.arc)
        )
        self.on = False
        return True

    def wake_at(self, now: float) -> float | None:
        """The next try, with a packet queued or one's rest."""
        return self.pace.next_try(now) if len(self.queues) or self.left > 0 else None

    def stats(self) -> dict[str, int]:
        return dict(vars(self.counters))
