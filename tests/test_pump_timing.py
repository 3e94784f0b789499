"""The pumps' timing (longge/daemon/radio_tx.py, radio_rx.py) on a fake clock and a fake chip, in
both link modes. The TX pump: the sleeps its comments record as bugs, and "nothing sleeps while
something is sendable". The pump's own turn (``radio_tx.turn``) and the mode's ``wake`` run as
in the daemon; only the clock, the chip and the waiting are the test's: the chip sends one
frame every FRAME_S of fake time, and the pump's sleep ends when its descriptor would wake it
(the chip's news, the RX process's messages), when it asked to be polled, or at its timeout. A
turn takes fake time too, now and then as long as a busy machine makes it, so frames end while
the pump works and their news is taken in by its last look before it sleeps. The RX pump
(``RxPump``): frames read as they come, never left to fill the FIFO; a setting given for later
wakes either pump then."""

from __future__ import annotations

import random
import select
import socket
from collections.abc import Callable
from multiprocessing import Pipe
from pathlib import Path
from typing import Any

import pytest
from daemonlink import ip_packet
from test_multinode import base_config, in_mode, mobile_config

from longge.daemon.child import FIFO_EMPTY, FIFO_FULL, FIFO_OCCUPIED, POLL_S, Child
from longge.daemon.esb_tx import EsbSending
from longge.daemon.messages import PeerAck, encode
from longge.daemon.peers import TxCounters, make_queues, receivers, senders
from longge.daemon.radio_owner import ChipSettings, RadioOwner
from longge.daemon.radio_tx import TxPump
from longge.daemon.sending import Sending
from longge.daemon.stream_tx import StreamSending
from longge.protocol.actions import Channel
from longge.tun import MemoryTun

FRAME_S = 0.0004  # one frame's air (and its ACK, in ESB)
PACKETS = 12
#: a turn of the pump: mostly short, one in ten as long as five frames (a busy machine)
QUICK_TURN_S, SLOW_TURN_S = 0.00005, 5 * FRAME_S
LOOK_S = FRAME_S / 2  # the air a look at the chip finds gone by, within a turn


class FakeChip:
    """A TX chip on a fake clock: its FIFO sends one frame every FRAME_S, in order, each
    ending with TX_DS (ESB: acknowledged; stream mode: sent); the settings the owner writes
    are taken and forgotten. Its descriptor is a mirrored chip's (the emulated air's, a
    modem's): readable once a frame ended, until the host looks at the chip (a look reads the
    chip's messages, whatever it asks). Within a turn of the pump each look finds the air a
    little further on (``turn``): frames end while the pump works, and a look takes their
    news in."""

    fifo_depth = 3
    irq_edges = None
    link_errors = None
    channel = data_rate = pa_level = 0

    def __init__(self, descriptor: bool) -> None:
        self.descriptor = descriptor
        self.fifo: list[bytes] = []
        self.ends = 0.0  # when the frame at the FIFO's head ends
        self.t = 0.0
        self.tx_ds = False
        self.unread = False  # the descriptor is readable
        self.retransmissions = 0
        self.dropped = 0  # loaded into a full FIFO
        self.heard: Callable[[list[bytes], float], None] = lambda frames, t: None
        self.turn_end = 0.0  # the fake time the pump's turn ends at

    # -- what the daemon asks of it --
    def fileno(self) -> int:
        return 99 if self.descriptor else -1  # (never selected on here)

    def take_edges(self) -> int:
        return 0

    def is_fifo(self, about_tx: bool, check_empty: bool | None = None) -> bool | int:
        self._look()
        n = len(self.fifo)
        self.unread = False
        if check_empty is None:
            return FIFO_FULL if n >= 3 else FIFO_EMPTY if n == 0 else FIFO_OCCUPIED
        return n == 0 if check_empty else n >= 3

    def start_fast_write(self, frame: bytes, multicast: bool = False, start: bool = True) -> None:
        if len(self.fifo) >= 3:
            self.dropped += 1
            return
        if not self.fifo:
            self.ends = self.t + FRAME_S
        self.fifo.append(bytes(frame))

    def what_happened(self) -> tuple[bool, bool, bool]:
        self._look()
        news, self.tx_ds, self.unread = self.tx_ds, False, False
        return news, False, False

    def flush_tx(self) -> None:
        self.fifo.clear()

    def set_retries(self, *args: Any) -> None: ...
    def set_auto_ack(self, *args: Any) -> None: ...
    def stop_listening(self, *args: Any) -> None: ...
    def start_listening(self) -> None: ...

    # -- the test's --
    def _look(self) -> None:
        if self.t < self.turn_end:  # (a look during a turn: the air went on meanwhile)
            self.advance(min(self.turn_end, self.t + LOOK_S))

    def advance(self, t: float) -> None:
        """The air up to ``t``: the frames that ended are heard."""
        ended = []
        while self.fifo and self.ends <= t:
            ended.append(self.fifo.pop(0))
            self.tx_ds = self.unread = True
            self.ends += FRAME_S
        self.t = max(self.t, t)
        self.heard(ended, t)

    def next_end(self) -> float | None:
        return self.ends if self.fifo else None


class Peer:
    """The far end in stream mode: its ARQ receiver takes the frames sent and its ACKs come
    back over the pair, as the RX process would hand them on (ESB: nothing to do)."""

    def __init__(self, tmp: Path, pair: socket.socket) -> None:
        base = in_mode(base_config(tmp, str(tmp / "air.sock"), 1), "stream")
        self.arq = receivers(base, arq=True).peers[0].arq
        assert self.arq is not None
        self.pair = pair

    def hear(self, frames: list[bytes], t: float) -> None:
        for frame in frames:
            list(self.arq.on_frame(frame, t))
        self.answer(t)

    def answer(self, t: float) -> None:
        ack = self.arq.control(t)
        if ack is not None:
            self.pair.send(encode(PeerAck(0, ack)))

    def deadline(self) -> float | None:
        return self.arq.next_deadline()


def sending_half(tmp: Path, mode: str, chip: FakeChip) -> tuple[Child, Sending]:
    """A mobile's TX process's state in ``mode`` (its Child, its sending half), its radio
    ``chip`` behind the radio's owner."""
    cfg = in_mode(mobile_config(tmp, str(tmp / "air.sock"), 0), mode)
    conn, _ = Pipe()
    child = Child(cfg, "tx", conn, schedule=False)
    settings = ChipSettings.configured(cfg.radio, cfg.tx_channel, cfg.pa_value, b"x")
    child.owner = RadioOwner(chip, settings)  # type: ignore[arg-type]
    kind: type[Sending] = StreamSending if mode == "stream" else EsbSending
    table = senders(cfg, kind.ARQ)
    return child, kind(cfg, table, make_queues(cfg, table), TxCounters(), child.owner)


def simulate(
    tmp: Path, mode: str, descriptor: bool, seed: int
) -> tuple[float, int, Sending, FakeChip]:
    """PACKETS packets of 1000 bytes up a mobile's link from a standing start: (the fake time
    it took, the frames sent, the sending half, the chip)."""
    chip = FakeChip(descriptor)
    child, out = sending_half(tmp, mode, chip)
    table, queues = out.table, out.queues
    tun = MemoryTun()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    peer = Peer(tmp, theirs) if mode == "stream" else None
    for i in range(PACKETS):
        tun.peer.send(ip_packet(1000, i + 1))
    rng = random.Random(seed)
    t = 0.0

    def done() -> bool:
        return (
            not len(queues)
            and not any(p.frames for p in table)
            and not chip.fifo
            and (not isinstance(out, StreamSending) or out.idle())
        )

    if peer is not None:
        chip.heard = peer.hear
    pump = TxPump(out, child, tun, ours)  # (it never sleeps: it looks at everything)
    try:
        while t < 5.0:
            chip.advance(t)
            chip.turn_end = t + (SLOW_TURN_S if rng.random() < 0.1 else QUICK_TURN_S)
            pump.turn(chip, t)  # type: ignore[arg-type]
            t = chip.turn_end
            chip.advance(t)
            timeout, at_once, poll, _ = pump.sleep(chip, t)  # type: ignore[arg-type]
            if done() and t > 0.01:
                break
            if at_once:
                continue
            # the sleep: to the timeout, or until the descriptor would wake the pump
            sleep = timeout
            if descriptor:
                if chip.unread:  # (news since the last look: the descriptor is readable)
                    continue
                end = chip.next_end()
                if end is not None:
                    sleep = min(sleep, end - t)
            elif poll:
                sleep = min(sleep, POLL_S)
            if peer is not None:
                if select_ready(ours):
                    continue
                due = peer.deadline()  # (the RX process wakes for its ACK timer)
                if due is not None:
                    sleep = min(sleep, max(0.0, due - t))
            t += max(sleep, 0.0)
    finally:
        tun.close()
        ours.close()
        theirs.close()
    return t, out.c.frames_sent, out, chip


def select_ready(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


@pytest.mark.parametrize("mode", ["esb", "stream"])
@pytest.mark.parametrize("descriptor", [True, False], ids=["descriptor", "polled"])
def test_nothing_sleeps_while_something_is_sendable(
    tmp_path: Path, mode: str, descriptor: bool
) -> None:
    """Twelve packets from a standing start, the pump's turns sometimes as long as five
    frames: the link is never idle with frames to send, so they take about their air time.
    The bugs the pump's comments record slept 0.25 s in such a spot: a frame's news taken in
    by the last look before sleeping while the FIFO drained ("pings 255 ms late"), and a
    polled radio left unpolled with a packet's last frames in its FIFO."""
    for seed in range(3):
        t, frames, out, chip = simulate(tmp_path / f"{mode}{seed}", mode, descriptor, seed)
        assert frames > PACKETS * 30 and chip.dropped == 0
        air = frames * FRAME_S
        assert t < 1.3 * air + 0.01, (seed, t, air, out.stats(chip, t))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_setting_given_for_later_wakes_the_pump_and_is_applied_then(
    tmp_path: Path, mode: str
) -> None:
    """The radio's owner holds a channel given for a moment (a move off a busy channel, a
    hop): a pump with nothing to send sleeps till that moment, not its longest, and its turn
    then applies it; not before."""
    chip = FakeChip(descriptor=True)
    child, out = sending_half(tmp_path, mode, chip)
    tun = MemoryTun()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    pump = TxPump(out, child, tun, ours)
    moved = child.cfg.tx_channel + 7
    try:
        pump.turn(chip, 0.0)  # type: ignore[arg-type]
        idle, _, _, _ = pump.sleep(chip, 0.0)  # type: ignore[arg-type]
        child.owner.schedule(0.05, Channel(moved))
        timeout, _, _, _ = pump.sleep(chip, 0.0)  # type: ignore[arg-type]
        assert idle > 0.05 and timeout == pytest.approx(0.05)
        pump.turn(chip, 0.049)  # type: ignore[arg-type]
        assert chip.channel != moved
        pump.turn(chip, 0.05)  # type: ignore[arg-type]
        assert chip.channel == moved and child.owner.settings is not None
        assert child.owner.settings.channel == moved
        assert child.owner.wake_at(0.05) is None
    finally:
        tun.close()
        ours.close()
        theirs.close()


class FakeRxChip:
    """An RX chip on a fake clock: frames come at the times given, into a FIFO three deep (a
    frame that finds it full is refused, counted: ESB's sender would try it again); its
    descriptor is a mirrored chip's, readable once a frame came since the host last looked.
    Each read takes READ_S of the pump's turn, and frames keep coming meanwhile."""

    irq_edges = None
    link_errors = None
    failure_detected = False
    channel = data_rate = pa_level = 0

    def __init__(self, arrivals: list[float]) -> None:
        self.arrivals = arrivals  # (sorted)
        self.fifo: list[tuple[float, bytes]] = []
        self.t = 0.0
        self.unread = False
        self.refused = 0
        self.delays: list[float] = []  # each frame's wait in the FIFO

    def fileno(self) -> int:
        return 99

    def take_edges(self) -> int:
        return 0

    def advance(self, t: float) -> None:
        while self.arrivals and self.arrivals[0] <= t:
            at = self.arrivals.pop(0)
            if len(self.fifo) >= 3:
                self.refused += 1
            else:
                self.fifo.append((at, bytes((0x80 | len(self.fifo),)) + b"x" * 31))
            self.unread = True
        self.t = max(self.t, t)

    def next_arrival(self) -> float | None:
        return self.arrivals[0] if self.arrivals else None

    def _look(self) -> int:
        self.unread = False
        return 1 if self.fifo else 7

    def available_pipe(self) -> tuple[bool, int]:
        pipe = self._look()
        return pipe != 7, pipe

    def available(self) -> bool:
        return self._look() != 7

    def get_status_flags(self) -> int:
        return self._look() << 1

    def is_fifo(self, about_tx: bool, check_empty: bool | None = None) -> bool | int:
        self._look()
        n = len(self.fifo)
        return FIFO_FULL if n >= 3 else FIFO_EMPTY if n == 0 else FIFO_OCCUPIED

    def read(self) -> bytes:
        self.advance(self.t + READ_S)
        at, frame = self.fifo.pop(0)
        self.delays.append(self.t - at)
        return frame

    def set_retries(self, *args: Any) -> None: ...
    def set_auto_ack(self, *args: Any) -> None: ...
    def stop_listening(self, *args: Any) -> None: ...
    def start_listening(self) -> None: ...


READ_S = 0.00005  # one payload read over SPI


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_the_rx_pump_reads_each_frame_at_once_and_wakes_for_a_setting_given_for_later(
    tmp_path: Path, mode: str
) -> None:
    """The RX pump on a fake clock: bursts of frames two air-times apart, its turns now and
    then as long as two frames: none refused (the FIFO is never left full), each read within
    a couple of frames' time; between bursts it sleeps, not spins; and a channel given to the
    radio's owner for a moment wakes it then and is applied then, not before."""
    from longge.daemon.child import LONGEST_WAIT_S
    from longge.daemon.peers import RxCounters
    from longge.daemon.radio_rx import RxPump
    from longge.daemon.receiving import EsbReceiving, Receiving
    from longge.daemon.stream_rx import StreamReceiving
    from longge.protocol.rate_listening import RateListening

    arrivals = [b * 0.05 + k * 2 * FRAME_S for b in range(6) for k in range(20)]
    chip = FakeRxChip(list(arrivals))
    cfg = in_mode(mobile_config(tmp_path, str(tmp_path / "air.sock"), 0), mode)
    conn, _ = Pipe()
    child = Child(cfg, "rx", conn, schedule=False)
    settings = ChipSettings.configured(cfg.radio, cfg.rx_channel, cfg.pa_value, None)
    child.owner = RadioOwner(chip, settings)  # type: ignore[arg-type]
    kind: type[Receiving] = StreamReceiving if mode == "stream" else EsbReceiving
    table = receivers(cfg, kind.ARQ)
    tun = MemoryTun()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    c = RxCounters()
    pump = RxPump(kind(tun, ours, table, c), RateListening(kind.ARQ), child, table, c, ours, False)
    moved, move_at = cfg.rx_channel + 9, 0.123
    child.owner.schedule(move_at, Channel(moved))
    rng = random.Random(1)
    t, sleeps, applied_at = 0.0, [], None
    try:
        while t < 0.4:
            chip.advance(t)
            pump.turn(chip, t)  # type: ignore[arg-type]
            if applied_at is None and chip.channel == moved:
                applied_at = t
            t = chip.t = t + (2 * FRAME_S if rng.random() < 0.1 else QUICK_TURN_S)
            chip.advance(t)
            timeout, more, _ = pump.sleep(chip, t)  # type: ignore[arg-type]
            if more or chip.unread:
                continue
            due = chip.next_arrival()
            wake = t + timeout if due is None else min(t + timeout, max(t, due))
            sleeps.append(wake - t)
            t = wake
    finally:
        tun.close()
        ours.close()
        theirs.close()
    assert chip.refused == 0 and len(chip.delays) == len(arrivals)
    assert max(chip.delays) <= 3 * FRAME_S, max(chip.delays)
    assert c.frames_in == len(arrivals)
    assert applied_at is not None and move_at <= applied_at < move_at + QUICK_TURN_S + 1e-9
    assert max(sleeps) <= LONGEST_WAIT_S + 1e-9 and len(sleeps) < 400  # (it slept, not spun)
