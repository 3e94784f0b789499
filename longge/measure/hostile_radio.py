"""A stranger's radio beside a link (experiment ``hostile``): it hears everything on the air,
has no key, and sends what an attacker would.

``Forger`` is what the attacker knows and makes, without I/O: fed the frames it hears on the
uplink (mobile -> base) and the downlink (base -> mobile), it makes the frames of each attack:

- ``reset``: a stream-mode RESET to the base's receiver, in another epoch than the one heard
  (3 bytes: ``0x81``, epoch, CRC-8);
- ``resync``: a stream-mode RESYNC to the mobile's sender (2 constant bytes);
- ``ack``: a stream-mode ACK to the mobile's sender in the epoch heard, acknowledging 32
  frames ahead of the last ACK heard with every bit of the bitmap set and the BEHIND bit;
- ``first``: after each genuine first frame of a packet, a copy of its header and number with
  other bytes behind (in stream mode behind the next ARQ sequence number), one try;
- ``replay``: a whole packet heard earlier, sent again (in stream mode behind the sequence
  numbers that follow the last one heard);
- ``random``: frames of random bytes and lengths, on both channels;
- ``absent`` (a stream-mode cell of three mobiles, the third gone): data frames (a plausible
  ARQ byte, random bytes behind) on the gone mobile's uplink pipe, as if it still sent;
- ``jam`` (ESB): ``first``'s frames, tried again until acknowledged in step with the link's
  own retries (the same ARD). A frame sent while a packet is on its way meets one of its
  frames (ESB sends them back to back), and each try meets the genuine frame's retry again,
  so the link's sender gives the packet up at its retry limit: a reactive jammer, whatever
  the frame says (random bytes cost the same), out of scope, reported and not judged
  (``OUT_OF_SCOPE``). Until 2026-12-07 ``first`` was sent so, and its 0.00 was this, not the
  reassembly. The ``replay`` mouth tries again one ARD step later than the link's radios.

``Attacker`` runs them from two emulated radios that listen without acknowledging (an ear on
each channel) and two that send (a mouth on each), as an attacker would with four more
nRF24L01+ modules. The link's radios and addresses are what a channel scan and a sniffer
reveal. Jamming and forging the chip's own ESB acknowledgements are out of scope: no software
on these radios can authenticate those (docs/design.md, "Hostile radios").
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from longge.protocol.arq_frames import ACK, BEHIND, CONTROL, RESET, RESYNC, control_frame
from longge.protocol.frame import FIRST, LAST
from longge.radio.options import RadioOptions, configure, downlink_channel
from longge.radio.sim import SimRadio
from longge.testbed_spec import base_listens, mobile_listens

#: Frames a second of the ``random`` attack on each channel: about 1 % of each channel's air
#: at 2 Mbit/s (a 32-byte frame is 164 µs on the air), 2 % of the two.
RANDOM_FPS = 60


@dataclass
class Forger:
    """What the attacker heard, and the frames it makes of it (no I/O, no clock)."""

    stream: bool
    seed: int = 1
    epoch: int | None = None  # the ARQ epoch in the ACKs heard (stream)
    cum: int = 0  # the last ACK's cumulative number (stream)
    up_seq: int = 0  # the last data frame's ARQ sequence number heard on the uplink (stream)
    packets: list[list[bytes]] = field(default_factory=list)  # whole packets heard (uplink)
    _current: list[bytes] = field(default_factory=list)
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    @property
    def _h(self) -> int:
        """Where the LongGe header is in a frame (behind the ARQ byte in stream mode)."""
        return 1 if self.stream else 0

    def heard_down(self, frame: bytes) -> None:
        """A frame heard on the downlink (base -> mobile): ACKs tell the epoch and cum."""
        if self.stream and len(frame) >= 4 and frame[0] & CONTROL and frame[0] & ~BEHIND == ACK:
            self.epoch, self.cum = frame[1], frame[2]

    def heard_up(self, frame: bytes, keep: int = 20) -> list[bytes] | None:
        """A frame heard on the uplink (mobile -> base); the frame to send at once after it
        in the ``first`` attack (None when it is no packet's first)."""
        h = self._h
        if len(frame) <= h or (self.stream and frame[0] & CONTROL):
            return None
        if self.stream:
            self.up_seq = frame[0]
        if frame[h] & FIRST:
            self._current = []
        self._current.append(frame)
        if frame[h] & LAST and self._current[0][h] & FIRST:
            self.packets = [*self.packets[-(keep - 1) :], self._current]
            self._current = []
        if not frame[h] & FIRST or frame[h] & LAST or len(frame) < h + 3:
            return None
        # the same header (number, index 0) and stream number, other bytes behind
        forged = frame[: h + 3] + self.rng.randbytes(len(frame) - h - 3)
        return self._sequenced([forged[h:]])

    def _sequenced(self, frames: list[bytes]) -> list[bytes]:
        """Stream mode: behind the sequence numbers after the last one heard."""
        if not self.stream:
            return frames
        start = self.up_seq + 1
        return [bytes(((start + i) % 128,)) + f for i, f in enumerate(frames)]

    def reset(self) -> bytes:
        epoch = self.rng.randrange(1, 256)
        while epoch == self.epoch:
            epoch = self.rng.randrange(1, 256)
        return control_frame(bytes((RESET, epoch)))

    @staticmethod
    def resync() -> bytes:
        return control_frame(bytes((RESYNC,)))

    def ack(self) -> bytes:
        epoch = self.rng.randrange(1, 256) if self.epoch is None else self.epoch
        return control_frame(bytes((ACK | BEHIND, epoch, (self.cum + 32) % 128)) + b"\xff" * 8)

    def replay(self, recorded: list[list[bytes]]) -> list[bytes]:
        """One whole packet of ``recorded`` (heard earlier), as it was or, in stream mode,
        behind the sequence numbers that follow the last one heard."""
        if not recorded:
            return []
        packet = self.rng.choice(recorded)
        return self._sequenced([f[self._h :] for f in packet])

    def random_frame(self) -> bytes:
        return self.rng.randbytes(self.rng.randint(1, 32))

    def data_frame(self) -> bytes:
        """A stream-mode data frame of nobody's: the next ARQ sequence number, random bytes."""
        self.up_seq = (self.up_seq + 1) % 128
        return bytes((self.up_seq,)) + self.rng.randbytes(31)


#: The attacks: what each sends, and how often (a second; None: after each genuine first
#: frame). ``replay``'s packet is recorded before the experiment restarts the mobile's daemon,
#: so that it is of an old epoch when it comes again.
ATTACKS: dict[str, tuple[str, float | None]] = {
    "reset1": ("reset", 1.0),
    "reset20": ("reset", 20.0),
    "resync1": ("resync", 1.0),
    "resync20": ("resync", 20.0),
    "ack1": ("ack", 1.0),
    "ack20": ("ack", 20.0),
    "first": ("first", None),
    "replay": ("replay", 1.0),
    "random": ("random", float(RANDOM_FPS)),
    "jam": ("jam", None),
    "absent": ("absent", float(RANDOM_FPS)),
}
#: The attacks on the stream ARQ's control frames exist in stream mode only.
STREAM_ONLY = frozenset({"reset1", "reset20", "resync1", "resync20", "ack1", "ack20"})
#: Retries in step with the link's exist in ESB mode only (stream mode's chip does not retry).
ESB_ONLY = frozenset({"jam"})
#: Measured in a stream-mode cell of three mobiles, one gone (the uplink's grants): not on a
#: link of one mobile.
CELL_ONLY = frozenset({"absent"})
#: Measured and reported, not judged: what no protocol on these radios can prevent.
OUT_OF_SCOPE = frozenset({"jam"})


def attacks_for(mode: str) -> list[str]:
    """The attacks run on ``mode``'s testbed (``cell``: the stream-mode cell's)."""
    if mode == "cell":
        return sorted(CELL_ONLY)
    skip = ESB_ONLY if mode == "stream" else STREAM_ONLY
    return [a for a in ATTACKS if a not in skip | CELL_ONLY]


class Attacker(threading.Thread):
    """Emulated radios on the link's two channels, one attack at a time (``attack``; None:
    only listening). Counts what it sent by attack. Its ears are read by a thread of their own
    all the time: an ear whose host stops reading would hold the emulated air (the air waits
    for a slow host, docs/emulator.md) and the attack would look stronger than it is."""

    def __init__(self, air: str, opts: RadioOptions, mobile: int = 0) -> None:
        super().__init__(daemon=True)
        self.air, self.opts = air, opts
        self.up_address, self.down_address = base_listens(mobile), mobile_listens(mobile)
        self.forger = Forger(stream=opts.mode == "stream")
        self.attack: str | None = None
        self.recorded: list[list[bytes]] = []  # the packets ``replay`` sends (``keep``)
        self.sent: Counter[str] = Counter()
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()  # (the forger: fed by the ears, used by the mouths)
        self._answers: queue.SimpleQueue[list[bytes]] = queue.SimpleQueue()
        self._own: deque[bytes] = deque(maxlen=256)  # what it sent: its ears hear that too

    def keep(self) -> int:
        """Record the packets heard so far for ``replay``; how many."""
        with self._lock:
            self.recorded = list(self.forger.packets)
        return len(self.recorded)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def _radio(self, name: str, channel: int, retries: int = 0, in_step: bool = False) -> SimRadio:
        r = SimRadio(air=self.air, name=name)
        if not r.begin():
            raise OSError(f"the attacker's radio {name} found no air at {self.air}")
        configure(r, self.opts, channel=channel)
        # a mouth that tries again does so one step (250 µs) later than the link's radios: in
        # step with them, each of its frames meets the same genuine frame at every try, and one
        # frame per packet stops an ESB link at ARC 2 by collisions alone (a reactive jammer:
        # out of scope, measured apart as ``jam``)
        later = 0 if in_step else 1
        r.set_retries(min(15, self.opts.ard_step + later) if retries else 0, retries)
        return r

    def run(self) -> None:
        ears = threading.Thread(target=self._guarded, args=(self._listen,), daemon=True)
        ears.start()
        self._guarded(self._speak)
        self._halt.set()
        ears.join(timeout=5)

    def _guarded(self, part: Callable[[], None]) -> None:
        try:
            part()
        except BaseException as exc:  # (said by the experiment)
            self.error = exc
            self._halt.set()

    def _listen(self) -> None:
        """The ears: every frame heard feeds the forger; in the ``first`` attack the frame to
        send after a genuine first frame goes to the mouths at once."""
        up, down = self.opts.channel, downlink_channel(self.opts.channel)
        ears = {"up": self._radio("eve-up-ear", up), "down": self._radio("eve-down-ear", down)}
        for ear, address in zip(ears.values(), (self.up_address, self.down_address), strict=True):
            ear.set_auto_ack(False)  # listen without answering: invisible
            ear.open_rx_pipe(1, address)
            ear.start_listening()
        try:
            while not self._halt.is_set():
                ears["up"].wait(0.002)
                for name, ear in ears.items():
                    while ear.available():
                        frame = bytes(ear.read())
                        if frame in self._own:
                            continue
                        with self._lock:
                            if name == "down":
                                self.forger.heard_down(frame)
                                continue
                            after = self.forger.heard_up(frame)
                        if after and self.attack in ("first", "jam"):
                            self._answers.put(after)
        finally:
            for r in ears.values():
                r.close()

    def _speak(self) -> None:
        """The mouths: ``replay``'s and the stream-mode control frames try again until
        acknowledged (a frame met by the link's own is lost, as theirs are), one ARD step later
        than the link's; ``jam``'s in step with the link's; the noise (``random``) and
        ``first``: one try, the air it takes."""
        up, down = self.opts.channel, downlink_channel(self.opts.channel)
        mouths = {
            "up": self._radio("eve-up-mouth", up, retries=15),
            "up-in-step": self._radio("eve-up-jam", up, retries=15, in_step=True),
            "down": self._radio("eve-down-mouth", down, retries=15),
            "up-noise": self._radio("eve-up-noise", up),
            "down-noise": self._radio("eve-down-noise", down),
        }
        mouths["up"].stop_listening(self.up_address)
        mouths["up-noise"].stop_listening(self.up_address)
        mouths["up-in-step"].stop_listening(self.up_address)
        mouths["down"].stop_listening(self.down_address)
        mouths["down-noise"].stop_listening(self.down_address)
        f = self.forger
        due = time.monotonic()
        try:
            while not self._halt.is_set():
                attack = self.attack
                kind, rate = ATTACKS[attack] if attack else ("", None)
                if rate is None:
                    try:
                        answer = self._answers.get(timeout=0.01)
                    except queue.Empty:
                        continue
                    self._send(
                        mouths["up-noise" if kind == "first" else "up-in-step"], answer, attack
                    )
                    continue
                now = time.monotonic()
                if now < due:
                    time.sleep(min(0.01, due - now))
                    continue
                due = max(due + 1.0 / rate, now - 1.0)
                with self._lock:
                    if kind == "reset":
                        what = [("up", [f.reset()])]
                    elif kind == "resync":
                        what = [("down", [f.resync()])]
                    elif kind == "ack":
                        what = [("down", [f.ack()])]
                    elif kind == "replay":
                        what = [("up", f.replay(self.recorded))]
                    elif kind == "absent":
                        what = [("up-noise", [f.data_frame()])]
                    else:  # random, on both channels
                        what = [
                            ("down-noise", [f.random_frame()]),
                            ("up-noise", [f.random_frame()]),
                        ]
                for mouth, frames in what:
                    self._send(mouths[mouth], frames, attack)
        finally:
            for r in mouths.values():
                r.close()

    def _send(self, mouth: SimRadio, frames: list[bytes], attack: str | None) -> None:
        for g in frames:
            self._own.append(g)
            mouth.write(g)
        self.sent[attack or ""] += len(frames)
