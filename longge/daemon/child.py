"""What both radio processes share: bringing a radio up, and talking to the supervisor.

The supervisor and each radio process are joined by a ``multiprocessing`` pipe:

    supervisor -> radio process   ("set", {radio option: value, ...})   reconfigure live
                                  ("stop", None)                        leave the loop
                                  ("tell_floor", (i, floor))  TX: send peer i a floor message
                                  ("skip_past", (i, floor))   TX: peer i refuses our epochs
    radio process -> supervisor   ("stats", {...})                      every STATS_EVERY_S
                                  ("stale", (i, floor))   RX: peer i's sender is stale
                                  ("floor", (i, floor))   RX: peer i says we are
(floor: secure.Floor, the epoch to seal past and the epoch and salt of the packet refused)
(the last four: a sender restarted with an older state directory comes back: secure.py)
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from longge import realtime
from longge.config import NodeConfig, with_live_options
from longge.daemon.radio_owner import RadioOwner
from longge.errors import ConfigError, HardwareError
from longge.protocol.secure import Floor
from longge.radio.factory import open_radio
from longge.radio.interface import LinkRadio

STATS_EVERY_S = 0.25
#: How soon a radio that did not answer (or went: the air, a modem unplugged) is tried again.
RETRY_RADIO_S = 0.25
HEALTH_CHECK_S = 1.0


def bring_up(cfg: NodeConfig, which: str, owner: RadioOwner) -> LinkRadio | None:
    """A begun radio, configured by its owner, or None if it does not answer (caller
    retries). A backend that knows what is wrong raises HardwareError with a message for
    people."""
    radio = open_radio(cfg, which)
    try:
        begun = radio.begin()
        if begun:
            owner.set_up(radio, cfg, which)
    except HardwareError:
        owner.gone()
        release(radio)
        raise
    if not begun:
        release(radio)
        return None
    return radio


def release(radio: LinkRadio | None) -> None:
    """Let a radio go: its SPI device and GPIO lines are free for the next attempt (a GPIO
    line stays taken while a descriptor holds it)."""
    if radio is not None:
        radio.close()


def waitable(radio: LinkRadio | None) -> int | None:
    """The radio's descriptor to sleep on, or None (no radio, or none to sleep on: polled)."""
    if radio is None:
        return None
    fd = radio.fileno()
    return fd if fd >= 0 else None


def on_irq(radio: LinkRadio | None) -> bool:
    """Does this radio's descriptor come from its IRQ pin (edges, not messages)? Then the
    chip's flags must be cleared for the pin to fall again."""
    return radio is not None and radio.irq_edges is not None


def take_edges(radio: LinkRadio | None) -> None:
    """At the top of a radio process's loop turn, before it looks at the chip: take the IRQ
    pin's edges that woke it. What the chip says next covers them; an edge after that look
    stays on the descriptor and wakes the process at once, so it need not look at the chip
    again before it sleeps (docs/design.md, "Waiting on the radio")."""
    if radio is not None:
        radio.take_edges()


#: pyrf24's is_fifo() for a FIFO, TX or RX, that holds something but is not full, that is
#: empty, that is full (and 3: invalid, what a chip whose MISO reads 0xFF answers).
FIFO_OCCUPIED, FIFO_EMPTY, FIFO_FULL = 0, 1, 2


class TxFifoEmpty:
    """The question a deciding part asks only when its decision needs it (a look is an SPI
    transfer on a Pi): is this turn's radio's TX FIFO empty? Its owner sets ``radio`` each
    turn and hands the object itself as the question."""

    __slots__ = ("radio",)

    def __init__(self) -> None:
        self.radio: LinkRadio | None = None

    def __call__(self) -> bool:
        assert self.radio is not None
        return bool(self.radio.is_fifo(True, True))


def next_pipe(radio: LinkRadio) -> int:
    """Right after ``read()``: the pipe of the RX FIFO's next payload, 7 if it holds none. The
    STATUS byte read()'s last SPI transaction brought says so (RX_P_NO), without another
    transaction. "More" is certain. "Empty" is not on an IRQ pin: that byte leaves the chip
    before the transaction's write clears RX_DR, and a frame arriving in between (about a
    microsecond) sets no new edge, so there one look after the clear (``available_pipe()``)
    decides."""
    pipe = (radio.get_status_flags() >> 1) & 7
    if pipe == 7 and on_irq(radio):
        waiting, pipe = radio.available_pipe()
        if not waiting:
            pipe = 7
    return pipe


#: A process without a radio descriptor to sleep on (pyrf24 without its IRQ pin) asks the
#: chip this often while it waits for news of frames on their way.
POLL_S = 0.0002
#: The longest a pump sleeps without news (both radio processes).
LONGEST_WAIT_S = 0.25


#: Frames a receiver reads in one loop turn before it sees to its other work.
RX_READ_BURST = 64


class RxFifo:
    """A receiver's walk through its radio's RX FIFO, the same in both link modes: read while
    the last look says a payload waits, taking the IRQ pin's edges before each read, and know
    whether the walk ended on a look that found the FIFO empty (``drained``)."""

    def __init__(self) -> None:
        self.drained = False

    def frames(self, radio: LinkRadio, pipe: int) -> Iterator[tuple[int, bytes]]:
        """Up to RX_READ_BURST payloads, each with the pipe it came on; ``pipe``: the first
        payload's, as the caller's first look found it (made after ``take_edges``), 7 for
        none."""
        self.drained = False
        for _ in range(RX_READ_BURST):
            if pipe == 7:
                self.drained = True
                return
            take_edges(radio)
            frame = bytes(radio.read())
            came_on, pipe = pipe, next_pipe(radio)
            yield came_on, frame

    def more_waiting(self, radio: LinkRadio) -> bool:
        """Before sleeping: is a frame already there? On an IRQ pin, after a walk that found
        the FIFO empty, no look is needed: a frame since then left an edge."""
        return not (self.drained and on_irq(radio)) and radio.available()


class Child:
    """Pipe handling and periodic stats for one radio process."""

    def __init__(
        self,
        cfg: NodeConfig,
        which: str,
        conn: Connection,
        schedule: bool = True,
        beside_air: bool = False,
    ) -> None:
        """``schedule``: make this process real-time (False for a Child built inside a test);
        ``beside_air``: on an emulated air, run on the CPUs beside the air's (a link mode's
        sender that keeps its FIFO fed alone: ``Sending.BESIDE_AIR``)."""
        priority = realtime.RADIO_RX if which == "rx" else realtime.RADIO_TX
        # FIFO deadlines: see there. A radio on the emulated air runs with the air, on its CPU.
        emulated = cfg.backend == "sim" or (cfg.backend == "rf24" and cfg.driver == "sim")
        place: realtime.Place = "world" if emulated or os.environ.get("LONGGE_WORLD_CPU") else "any"
        if beside_air and place == "world":
            place = "beside"
        self.scheduling = "default"
        if schedule:
            with contextlib.suppress(OSError):  # top, ps -o comm: which radio process is which
                Path("/proc/self/comm").write_text(f"longge-{which}")
            self.scheduling = realtime.prioritise(priority, -5, place)
        self.cfg = cfg
        self.which = which
        self.conn = conn
        self.conn_fd = conn.fileno()  # for select(): a Connection is asked for it each time
        #: the only writer of the radio's settings; it holds the radio while there is one
        self.owner = RadioOwner()
        self.running = True
        if schedule:
            # SIGTERM (systemctl stop signals the whole group; the supervisor's death, by
            # PR_SET_PDEATHSIG) ends the loop as "stop" does: the radio is let go of, powered down
            signal.signal(signal.SIGTERM, lambda *_: setattr(self, "running", False))
        self.state = "starting"
        self.radio_attempts = 0
        self._next_stats = 0.0
        self._next_radio_try = 0.0
        self._next_health_check = 0.0
        self.reinits = 0
        self.last_reinit = ""
        #: set by the supervisor (TX), by peer index: a floor message to send, an epoch to
        #: seal past
        self.floor_to_send: dict[int, Floor] = {}
        self.skip_past: dict[int, Floor] = {}

    @property
    def radio(self) -> LinkRadio | None:
        return self.owner.radio

    @property
    def applied(self) -> int:
        """Times the settings were applied to a radio (brought up, or changed live): the TX
        address is then the first peer's again."""
        return self.owner.applied

    def ensure_radio(self, now: float) -> LinkRadio | None:
        radio = self.owner.radio
        if radio is not None and not radio.failure_detected and now < self._next_health_check:
            return radio  # (most turns: nothing to look at)
        if radio is not None and radio.failure_detected and not radio.is_chip_connected:
            release(radio)
            self.owner.gone()  # lost it (air gone, chip unplugged): start over
        if self.radio is not None and now >= self._next_health_check:
            # A chip whose MISO came loose reads 0xFF: STATUS then says "sent" and "failed"
            # at once and an RX FIFO looks empty, so neither process would notice. Once a
            # second, one register read (SETUP_AW) asks whether it still answers.
            self._next_health_check = now + HEALTH_CHECK_S
            if not self.radio.is_chip_connected:
                self.reinitialise("the radio stopped answering on SPI")
        if self.radio is None and now >= self._next_radio_try:
            self.radio_attempts += 1
            self._next_radio_try = now + RETRY_RADIO_S
            before = self.state
            try:
                radio = bring_up(self.cfg, self.which, self.owner)
                self.state = "up" if radio is not None else self._not_answering()
            except HardwareError as exc:
                self.state = f"radio_error: {exc}"
            if self.state != before:
                self._next_stats = 0.0  # the status shows it now, not up to a second later
        return self.radio

    def _not_answering(self) -> str:
        """The state of a radio that did not answer, with the likely cause where one is plain:
        ``backend = "sim"`` (the example configs' value) on a node without the emulated air is
        a config left as it came, not a radio fault."""
        if self.cfg.backend == "sim" and not os.path.exists(self.cfg.air):
            return (
                f'radio_not_answering: backend = "sim" and no emulated air at {self.cfg.air} '
                '(real radios: backend = "rf24" in [radio])'
            )
        return "radio_not_answering"

    def close_radio(self) -> None:
        """At the end of the process: let the radio go."""
        release(self.radio)

    def reinitialise(self, why: str) -> None:
        """Drop the radio and bring it up again at once (the interface stays up)."""
        self.reinits += 1
        self.last_reinit = why
        release(self.radio)
        self.owner.gone()
        self._next_radio_try = 0.0

    def handle_control(self) -> None:
        while self.conn.poll():
            try:
                cmd, arg = self.conn.recv()
            except (EOFError, OSError):
                self.running = False  # the supervisor is gone
                return
            if cmd == "stop":
                self.running = False
            elif cmd == "set":
                self.reconfigure(arg)
            elif cmd == "tell_floor":
                index, floor = arg
                self.floor_to_send[int(index)] = Floor(*floor)
            elif cmd == "skip_past":
                index, floor = arg
                self.skip_past[int(index)] = Floor(*floor)

    def wait(
        self,
        radio: LinkRadio | None,
        timeout: float,
        *,
        now: bool = False,
        poll: bool = False,
        also: tuple[Any, ...] = (),
    ) -> list[Any]:
        """The pumps' one way to sleep: until the supervisor's pipe, the radio's descriptor
        or one of ``also`` has something, or ``timeout`` (s) passes; what is readable.
        ``now``: something waits already, only look; ``poll``: frames are on their way and
        the radio has no descriptor: ask it again in POLL_S."""
        fds = [self.conn_fd, *also]
        fd = waitable(radio)
        if fd is not None:
            fds.append(fd)
        if now:
            timeout = 0.0
        elif poll and fd is None and radio is not None:
            timeout = min(timeout, POLL_S)
        return select.select(fds, [], [], timeout)[0]

    def tell(self, kind: str, index: int, floor: Floor) -> None:
        """An event of peer ``index``'s for the supervisor (the list above)."""
        with contextlib.suppress(OSError):
            self.conn.send((kind, (index, floor)))

    def reconfigure(self, options: dict[str, Any]) -> None:
        try:
            self.cfg = with_live_options(self.cfg, options)
        except (ConfigError, TypeError):
            return  # the supervisor checked already; a stale request is ignored
        if self.radio is not None:
            try:
                self.owner.set_up(self.radio, self.cfg, self.which)
            except HardwareError as exc:
                self.state = f"radio_error: {exc}"
                self.reinitialise("settings did not stick")

    def fail(self, message: str) -> None:
        """Something the process cannot go on without (the TUN interface gone): the loop ends,
        and the supervisor stops the daemon with ``message``."""
        with contextlib.suppress(BrokenPipeError, OSError):
            self.conn.send(("fatal", message))
        self.running = False

    def stats_due(self, now: float) -> bool:
        """Time to send the counters (every STATS_EVERY_S)? The loops run once per frame, so
        they build the stats only when this says so."""
        if now < self._next_stats:
            return False
        self._next_stats = now + STATS_EVERY_S
        return True

    def send_stats(self, stats: dict[str, Any]) -> None:
        stats.update(
            state=self.state,
            radio_attempts=self.radio_attempts,
            reinits=self.reinits,
            last_reinit=self.last_reinit,
            pid_time=time.time(),
            scheduling=self.scheduling,
        )
        if self.radio is not None:
            stats["radio_failures"] = int(self.radio.failure_detected)  # (pyrf24: a bool)
            bad = self.radio.link_errors  # (None: no link to the chip that carries messages)
            if bad is not None:
                stats["radio_bad_messages"] = bad
            # how the process waits for its radio: the IRQ pin, the messages of its link to
            # the chip, or asking the chip every 0.2 ms (waitable() only when not on the IRQ
            # pin: there it takes the pin's edges)
            edges = self.radio.irq_edges  # None: no IRQ pin (on_irq)
            if edges is not None:
                stats["waits_on"], stats["irq_edges"] = "irq", edges
            else:
                stats["waits_on"] = "link" if waitable(self.radio) is not None else "poll"
        try:
            self.conn.send(("stats", stats))
        except (BrokenPipeError, OSError):
            self.running = False
