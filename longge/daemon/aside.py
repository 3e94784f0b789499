"""A light mobile's packet beside a busy uplink, on the downlink's channel (a base with
several mobiles: docs/design.md §1, "A light mobile's packet on the downlink's channel"): the
base's listening, in both link modes, and an ESB mobile's sending (stream mode's:
``aside_stream.py``).

A mobile that the base grants the uplink sends only in its grants, so its own ping, beside
mobiles that keep the uplink busy, waited for the running grant's end (15 to 18 ms over its
idle RTT). The base's TX radio is idle then (the mobiles send; it sends grants and answers),
on the downlink's channel, where no mobile sends. So:

- the base's TX radio listens between its bursts (``BaseListening``), with the mobiles' uplink
  addresses on the pipes its RX radio has them on; what it hears the TX process hands to the
  RX process (``x`` + pipe + frame on the pair), which takes it as a frame from its own
  radio: the same reassembly, authentication and replay window;
- a mobile waiting for a grant with a sparse flow's small packet queued (a ping, a DNS query,
  a TCP ACK: ``PeerQueues.pop_sparse``) sends it there (``MobileAside``), each frame once: a
  frame the base did not acknowledge (it was sending: MAX_RT) sends the whole packet again,
  later or in the grant. Its frames are the uplink's own (sealed, numbered): only the
  channel differs;
- a base whose TX radio has had something to send for DEAF_AFTER_S (a loaded downlink: it
  does not listen) says so in its grants (uplink.DEAF_BIT), and its mobiles send nothing
  there till a grant says otherwise (their tries met its frames, their grants among them).

A base with one mobile and a mobile whose base grants nothing run none of this.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass

from longge.chip.datasheet import MIN_ARD_US_FOR_EMPTY_ACK
from longge.config import NodeConfig
from longge.daemon.adapt_tx import Adaptation
from longge.daemon.child import FIFO_FULL, RxFifo, take_edges, waitable
from longge.daemon.messages import HeardAside, send
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.radio_owner import (
    Channel,
    Listen,
    RadioOwner,
    Retries,
    Transmit,
)
from longge.protocol.arq_frames import CONTROL
from longge.protocol.frame import LAST
from longge.protocol.peer import PeerSender
from longge.radio.interface import LinkRadio

#: The base's TX radio listens once it has had nothing to send this long (not between the
#: frames of a burst; at 1 ms a mobile's answer to a grant the base had just sent met the
#: radio not yet listening, one aside frame in three).
LISTEN_AFTER_S = 0.0003
#: Having heard a frame of a packet whose last frame has not come, the base's TX radio stays
#: listening this long for the next (they come ~0.5 ms apart: the mobile's FIFO's next, or
#: the next it loads on the news) before it sends what it has: its own frames would collide
#: with the rest, and the mobile would send the packet again.
HOLD_S = 0.0015
#: Holding is bounded: at most HOLD_MAX_S in a row (a packet's six frames take ~3 ms), then
#: none for HOLD_GAP_S. Its frames are not authenticated here (the RX process does that, at
#: the packet's end), and anyone's radio can send frames with a mobile's address: a frame
#: that never ends its packet, every 1.5 ms, would have held the base's downlink for good.
HOLD_MAX_S = 0.004
HOLD_GAP_S = 0.050
#: The base's TX radio that has had something to send this long, without a pause to listen
#: (a loaded downlink), says so in its grants (uplink.DEAF_BIT): the mobiles' tries there met
#: its frames, their grants among them (stream mode beside a loaded downlink: a ping from the
#: base p95 21-26 ms against 10-15 without the tries). Longer than its bursts between
#: listening under uplink load (its ACKs to a busy mobile: < 1 ms).
DEAF_AFTER_S = 0.010
#: The largest packet a mobile sends on the downlink's channel (sealed: six 32-byte frames).
ASIDE_MAX = 160
#: After a frame the base did not acknowledge there (it was sending), the next try; after
#: each more in a row twice as long, up to ASIDE_RETRY_MAX_S (a base that keeps sending, to
#: the other mobiles, is met once in that time, not every 2 ms).
ASIDE_RETRY_S = 0.002
ASIDE_RETRY_MAX_S = 0.064
#: Frames a mobile may send there: this many at once, refilled at ASIDE_RATE a second (a ping
#: every 20 ms is 4 frames each: 200 a second; the downlink's channel is the base's).
ASIDE_BURST = 12
ASIDE_RATE = 200.0


@dataclass
class ListenCounters:
    """A base's: times its TX radio listened, frames it heard and handed on, those the pair
    refused (the RX process was behind), holds cut at HOLD_MAX_S."""

    listens: int = 0
    frames: int = 0
    pair_full: int = 0
    holds_cut: int = 0


@dataclass
class AsideCounters:
    """A mobile's: packets and frames it sent on the downlink's channel, frames the base did
    not acknowledge there (it was sending)."""

    aside_packets: int = 0
    aside_frames: int = 0
    aside_refused: int = 0


def mobile_aside(
    cfg: NodeConfig, adapt: Adaptation, owner: RadioOwner, queues: PeerQueues
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


class BaseListening:
    """A base's TX radio, between its bursts: listening on the downlink's channel."""

    def __init__(
        self, owner: RadioOwner, after_s: float = LISTEN_AFTER_S, arq_byte: bool = False
    ) -> None:
        self.owner = owner
        self.after_s = after_s  # (LISTEN_AFTER_S; stream mode's: aside_stream.py)
        #: stream mode's frames: the ARQ's byte in front of the LongGe frame, or an ARQ
        #: control frame (an ACK: no packet's part)
        self.arq_byte = arq_byte
        self.listening = False
        self.idle_since: float | None = None
        self.hold_until = 0.0  # (a packet heard in part: HOLD_S)
        self.last_end = -1.0  # (when a packet's last frame was last heard)
        self.hold_since: float | None = None  # (holding in a row since)
        self.no_hold_until = 0.0  # (held HOLD_MAX_S in a row: HOLD_GAP_S)
        self.work_since: float | None = None  # (something to send in every turn since)
        self.unable = False  # (nothing to sleep on while listening: it never listens)
        self.fifo = RxFifo()
        self.counters = ListenCounters()

    def step(
        self,
        radio: LinkRadio,
        pair: socket.socket | None,
        work: bool,
        addressed: PeerSender,
        now: float,
    ) -> None:
        """Each loop turn, before loading: with something to send, back to TX mode (the
        address is the addressed peer's, as it was); idle for LISTEN_AFTER_S with the TX
        FIFO empty, listen; what the RX FIFO holds goes to the RX process."""
        if work:
            self.idle_since = None
            if self.work_since is None:
                self.work_since = now
            if self.listening and now >= self.hold_until:
                self.owner.apply(Transmit(addressed.radio_address))
                self.listening = False
        elif self.idle_since is None:
            self.idle_since, self.work_since = now, None
        elif not self.listening and now - self.idle_since >= self.after_s:
            self.unable = waitable(radio) is None  # (else asked every 0.2 ms: not for this)
            if not self.unable and radio.is_fifo(True, True):
                self.owner.apply(Listen())
                self.listening = True
                self.counters.listens += 1
        self.hand_on(radio, pair, now)

    def sending(self, now: float) -> bool:
        """Has it had something to send in every turn for DEAF_AFTER_S (a loaded downlink)?"""
        return self.work_since is not None and now - self.work_since >= DEAF_AFTER_S

    def deaf(self, now: float) -> bool:
        """Does the radio not listen now, nor soon: it is ``sending``, or it cannot listen
        (said in the grants: uplink.DEAF_BIT)?"""
        return self.unable or self.sending(now)

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
            self.counters.frames += 1
            more = self._more(frame)
            self._hold(more, now)
            if not more:
                self.last_end = now
            if pair is None or not send(pair, HeardAside(pipe, frame)):
                self.counters.pair_full += 1

    def _more(self, frame: bytes) -> bool:
        """Is ``frame`` a part of a packet, not its last?"""
        if self.arq_byte:
            if not frame or frame[0] & CONTROL:
                return False
            frame = frame[1:]
        return bool(frame[:1]) and not frame[0] & LAST

    def _hold(self, more: bool, now: float) -> None:
        """A frame heard: hold for the packet's next (``more``), within the bounds."""
        if not more or now < self.no_hold_until:
            self.hold_until, self.hold_since = 0.0, None
            return
        if self.hold_since is None or now >= self.hold_until:
            self.hold_since = now
        if now - self.hold_since >= HOLD_MAX_S:
            self.hold_until, self.hold_since = 0.0, None
            self.no_hold_until = now + HOLD_GAP_S
            self.counters.holds_cut += 1
            return
        self.hold_until = min(now + HOLD_S, self.hold_since + HOLD_MAX_S)

    def wake_at(self, now: float) -> float | None:
        """When it is time to listen, or to stop holding."""
        if self.listening:
            return None if now >= self.hold_until else self.hold_until
        return None if self.idle_since is None else self.idle_since + self.after_s

    def stats(self) -> dict[str, int]:
        return asdict(self.counters)


class Pacing:
    """A mobile's frames on the downlink's channel: ASIDE_BURST at once, refilled at
    ASIDE_RATE; after a refusal (the base was sending) the next try ASIDE_RETRY_S later,
    twice as long after each more in a row (up to ASIDE_RETRY_MAX_S)."""

    def __init__(self, retry_s: float = ASIDE_RETRY_S) -> None:
        self.retry_s = retry_s
        self.retry_at = float("-inf")
        self.refusals = 0  # in a row
        self.tokens = float(ASIDE_BURST)
        self.filled_at = float("-inf")

    def may(self, now: float) -> bool:
        """May a frame go there now?"""
        if self.filled_at > float("-inf"):
            self.tokens = min(ASIDE_BURST, self.tokens + (now - self.filled_at) * ASIDE_RATE)
        self.filled_at = now
        return now >= self.retry_at and self.tokens >= 1

    def refused(self, now: float) -> None:
        wait = self.retry_s * 2 ** min(self.refusals, 10)
        self.refusals += 1
        self.retry_at = now + min(wait, ASIDE_RETRY_MAX_S)  # (meanwhile on the uplink's channel)

    def next_try(self, now: float) -> float | None:
        """When a frame may next go there (None: now)."""
        at = max(self.retry_at, now + (1 - self.tokens) / ASIDE_RATE)  # (the next token)
        return None if at <= now else at


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
        self.own, self.other = own_channel, aside_channel
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
            self.pace.refusals = 0
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
            self.owner.apply(Channel(self.other), Retries(self.ard, 0))
            self.on, self.again = True, False
        loaded = 0
        while peer.frames and self.pace.tokens >= 1 and radio.is_fifo(True) != FIFO_FULL:
            self.pace.tokens -= 1
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
        if waiting and self.packet and self.pace.tokens >= 1 and now >= self.pace.retry_at:
            return False  # (its next frames go here)
        self.owner.apply(Channel(self.own), self.retries())
        self.on = False
        return True

    def wake_at(self, now: float) -> float | None:
        """The next try, with a packet queued or one's rest."""
        if len(self.queues) or self.packet or self.again:
            return self.pace.next_try(now)
        return None

    def stats(self) -> dict[str, int]:
        return asdict(self.counters)
