"""A light mobile's packet beside a busy uplink, on the downlink's channel (a base with
several mobiles: docs/design.md §1, "A light mobile's packet on the downlink's channel"): the
mobile's way, in each link mode (the base's listening between its bursts: listening.py).

A mobile that the base grants the uplink sends only in its grants, so its own ping, beside
mobiles that keep the uplink busy, waited for the running grant's end (15 to 18 ms over its
idle RTT). The base listens between its bursts on the downlink's channel, so:

- ESB (``MobileAside``): a mobile waiting for a grant with a sparse flow's small packet
  queued (a ping, a DNS query, a TCP ACK: ``PeerQueues.pop_sparse``) sends it there, each
  frame once: a frame the base did not acknowledge (it was sending: MAX_RT) sends the whole
  packet again, later or in the grant. Its frames are the uplink's own (sealed, numbered):
  only the channel differs. A base that says in its grants it is deaf (a loaded downlink)
  gets nothing there till a grant says otherwise.
- Stream mode (``StreamAside``): the same way, with one difference: stream mode's chips send
  without the chip's acknowledgements, and a frame sent there must be known heard. So, there
  only, the chip's ACK is asked for: the base's TX radio acknowledges on the mobiles' pipes
  (``RadioOwner.set_up``), and the mobile's TX radio asks for one (EN_AA on pipe 0,
  ASIDE_ARC retries) while it sends there, and sets stream mode's settings again after. The
  frames are the ARQ's (sequenced, sealed): one the base did not acknowledge goes again from
  the ARQ, there or in the mobile's next grant, and the base's ARQ acknowledges what it took
  as it does every frame of the mobile's. The mobile's own ACKs to the base go there too
  while it waits (on the uplink's channel they met the holder's frames).

Both are paced alike, and stream mode's ACKs routed, by decisions made without I/O
(protocol/aside_pacing.py: ``Pacing``, ``AckRoute``); this module loads the frames and learns
their fate. A base with one mobile and a mobile whose base grants nothing run none of
this.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

from longge.chip.datasheet import MIN_ARD_US_FOR_EMPTY_ACK
from longge.config import NodeConfig
from longge.daemon.child import FIFO_FULL
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.radio_owner import RadioOwner
from longge.protocol.actions import AutoAck, Channel, Retries
from longge.protocol.adapt_esb import EsbAdaptation
from longge.protocol.arq import ArqSender
from longge.protocol.aside_pacing import ACKS_REFUSED, STREAM_RETRY_S, AckRoute, Pacing
from longge.protocol.peer import PeerSender
from longge.radio.interface import LinkRadio

#: The largest packet a mobile sends on the downlink's channel (sealed: six 32-byte frames).
ASIDE_MAX = 160
#: A frame sent there is tried this many times more (the chip's retries, ard_step apart):
#: the base is deaf while it sends and a moment after (its ACKs to the busy mobiles), and a
#: packet's first frame met it so one time in three (ARC 0: half the packets refused).
#: (ESB's base sends little then: one try, MobileAside.)
ASIDE_ARC = 3


@dataclass
class AsideCounters:
    """A mobile's: packets and frames it sent on the downlink's channel, frames the base did
    not acknowledge there (it was sending)."""

    aside_packets: int = 0
    aside_frames: int = 0
    aside_refused: int = 0


def mobile_aside(
    cfg: NodeConfig, adapt: EsbAdaptation, owner: RadioOwner, queues: PeerQueues
) -> MobileAside | None:
    """An ESB mobile's sending there (a base's listening is ``BaseListening``)."""
    if cfg.role != "mobile":
        return None

    def retries() -> Retries:  # (the adapted ones, or the config's)
        if adapt.adapter is not None:
            return adapt.retries()
        return Retries(cfg.radio.ard_step, cfg.radio.arc)

    return MobileAside(owner, cfg.tx_channel, cfg.rx_channel, retries, queues, ard_step(cfg))


def ard_step(cfg: NodeConfig) -> int:
    """The retry delay (ARD step) a frame sent once there waits for the base's ACK: the
    datasheet's least for an empty ACK at the link's rate (500 µs at 250 kbit/s)."""
    return MIN_ARD_US_FOR_EMPTY_ACK[cfg.radio.rate] // 250 - 1


class MobileAside:
    """A mobile's: a sparse flow's small packet on the downlink's channel while it waits for a
    grant, its frames loaded as the TX FIFO has room, each sent once: a packet with a frame
    refused goes again whole (the receiver starts it over at its first frame; one it had
    whole is a repeat, refused as any)."""

    def __init__(
        self,
        owner: RadioOwner,
        own_channel: int,
        aside_channel: int,
        retries: Callable[[], Retries],
        queues: PeerQueues,
        ard: int = 0,
    ) -> None:
        self.owner = owner
        self.queues = queues  # (a packet queued: its time to try here wakes the pump)
        self.configured = own_channel, aside_channel  # (the owner's, once the link moved)
        self.retries = retries  # (the retries in force on the uplink's channel)
        self.ard = ard  # (ard_step)
        self.on = False  # the TX radio is on the downlink's channel
        #: the frames of the packet on its way here, taken so far, and how many of them are
        #: in the TX FIFO, their fate not known
        self.packet: list[bytes] = []
        self.loaded = 0
        #: the peer's frames are a packet refused here, whole: it goes here again (or in a
        #: grant, if one comes first)
        self.again = False
        self.pace = Pacing()
        self.counters = AsideCounters()

    def reset(self, peer: PeerSender) -> None:
        """The radio's settings were applied again (on its own channel, the FIFO empty): the
        packet on its way here goes again, whole (in the next grant, or here)."""
        self._again(peer)
        self.on = False

    def _again(self, peer: PeerSender) -> None:
        peer.frames.extendleft(reversed(self.packet))
        peer.taken -= len(self.packet)
        self.again = self.again or bool(self.packet)
        self.packet, self.loaded = [], 0

    def busy(self, peer: PeerSender) -> bool:
        """Is a packet on its way here (frames loaded, or more to load)?"""
        return self.on and (self.loaded > 0 or bool(self.packet))

    def _settle(self, radio: LinkRadio, peer: PeerSender) -> bool:
        """Are the loaded frames' fates known (the TX FIFO empty: each was acknowledged; a
        MAX_RT came in ``news`` first)? The packet is done once its last went."""
        if self.loaded and not radio.is_fifo(True, True):
            return False
        self.counters.aside_frames += self.loaded
        if self.loaded:
            self.pace.heard()
        self.loaded = 0
        if not peer.frames:
            self.packet = []
        return True

    def fill(self, radio: LinkRadio, peer: PeerSender, queues: PeerQueues, now: float) -> int:
        """Waiting for a grant: the packet's next frames here, a new packet's if one may go;
        how many were loaded."""
        if not self._settle(radio, peer):
            return 0
        if not self.pace.may(now):
            return 0
        if not self.on:
            if peer.frames and not (self.packet or self.again):
                return 0  # (a packet's rest from a grant waits for the next)
            if not radio.is_fifo(True, True):
                return 0  # (what went before is still on its way)
            if not peer.frames:
                packet = queues.pop_sparse(peer.index, now, ASIDE_MAX, b"")
                if packet is None:
                    return 0
                peer.load(packet, now, queues.last_key(peer.index))
                self.counters.aside_packets += 1
            # one attempt a frame: the base may be sending, and retries that met its frames
            # again and again ended them in MAX_RT (a reply lost)
            other = self.owner.others_channel(self.configured[1])
            self.owner.apply(Channel(other), Retries(self.ard, 0))
            self.on, self.again = True, False
        loaded = 0
        while peer.frames and self.pace.has_token() and radio.is_fifo(True) != FIFO_FULL:
            self.pace.sent()
            frame = peer.next_frame()
            self.packet.append(frame)
            radio.start_fast_write(frame)
            loaded += 1
        self.loaded += loaded
        return loaded

    def news(self, peer: PeerSender, max_rt: bool, now: float) -> bool:
        """A MAX_RT: True if it was a frame's sent here (not the link's: the base was
        sending); the packet goes again whole, ASIDE_RETRY_S later or in the grant. The
        caller flushes the FIFO."""
        if not (max_rt and self.loaded):
            return False
        self._again(peer)
        self.counters.aside_refused += 1
        self.pace.refused(now)
        return True

    def back(self, radio: LinkRadio, peer: PeerSender, waiting: bool, now: float) -> bool:
        """The TX radio back on the uplink's channel when nothing more goes here (or a grant
        came: ``waiting`` False), once the loaded frames' fate is known; is it there?"""
        if self.on and not self._settle(radio, peer):
            return False
        if not waiting:  # a grant came: the packet's rest goes in it
            self.packet, self.again = [], False
        if not self.on:
            return True
        if waiting and self.packet and self.pace.again_now(now):
            return False  # (its next frames go here)
        self.owner.apply(Channel(self.owner.own_channel(self.configured[0])), self.retries())
        self.on = False
        return True

    def wake_at(self, now: float) -> float | None:
        """The next try, with a packet queued or one's rest."""
        if len(self.queues) or self.packet or self.again:
            return self.pace.next_try(now)
        return None

    def stats(self) -> dict[str, int]:
        return asdict(self.counters)


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
        self.route = AckRoute()  # (our ACKs there too, or not)
        self.pace = Pacing(STREAM_RETRY_S)
        self.counters = AsideCounters()

    def _settle(self, radio: LinkRadio) -> bool:
        """Are the loaded frames' fates known (the FIFO empty: each acknowledged by the
        base's chip; a MAX_RT came in ``news`` first)?"""
        if not (self.loaded or self.acks):
            return True
        if not radio.is_fifo(True, True):
            return False
        self.counters.aside_frames += self.loaded + len(self.acks)
        self.pace.heard()
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

    def _acks_here(self, control: deque[tuple[int, bytes]], now: float) -> bool:
        return self.route.here(bool(control), self.pace, now)

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
                Channel(self.owner.others_channel(self.cfg.rx_channel)),
                AutoAck(0, True),  # (the base's chip acknowledges there)
                Retries(ard_step(self.cfg), ASIDE_ARC),
            )
            self.on = True
        loaded = 0
        while self.pace.has_token() and radio.is_fifo(True) != FIFO_FULL:
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
            self.pace.sent()
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
        if waiting and more and self.pace.again_now(now):
            return False  # (its next frames go here)
        opts = self.cfg.radio
        self.owner.apply(
            Channel(self.owner.own_channel(self.cfg.tx_channel)),
            AutoAck(0, opts.acked),
            Retries(opts.ard_step, opts.arc),
        )
        self.on = False
        return True

    def wake_at(self, now: float) -> float | None:
        """The next try, with a packet queued or one's rest."""
        return self.pace.next_try(now) if len(self.queues) or self.left > 0 else None

    def stats(self) -> dict[str, int]:
        return dict(vars(self.counters))
