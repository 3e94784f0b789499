"""The air's nouns (model.py is the events between them): the emulated chips' state (FIFOs,
PIDs, RX mode, counters), what goes on air (a transmission, an attempt of a payload), what the
radios see (a TX result, a received frame), and whether a listening radio can take a frame in
at all (its address, rate, CRC, payload format: ``reception``), before collisions, loss,
duplicates and its RX FIFO decide."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from enum import Enum

from longge.chip.registers import RadioRegisters


class Outcome(Enum):
    OK = "ok"
    MAX_RT = "max_rt"


@dataclass(frozen=True)
class TxResult:
    radio: int
    outcome: Outcome
    arc_count: int  # retransmissions of this payload (OBSERVE_TX.ARC_CNT)


@dataclass(frozen=True)
class RxFrame:
    radio: int
    pipe: int
    payload: bytes


Output = TxResult | RxFrame


@dataclass
class Transmission:
    sender: int
    channel: int
    bandwidth: int
    start: int
    end: int
    collided: bool = False
    #: destroyed at the radios of these nodes (a Wi-Fi interferer near them only)
    jammed_near: list[str] = field(default_factory=list)

    def jammed_at(self, radio_name: str) -> bool:
        return any(radio_name.startswith(f"{node}-") for node in self.jammed_near)


@dataclass
class Attempt:
    payload: bytes
    no_ack: bool
    pid: int
    tries: int = 0
    tx: Transmission | None = None
    acked_by: list[int] = field(default_factory=list)
    ack_tx: Transmission | None = None


class Radio:
    def __init__(self, rid: int, name: str) -> None:
        self.id = rid
        self.name = name
        self.regs = RadioRegisters()
        self.listening = False
        self.rx_since = 0  # RX mode is settled from this time on
        self.busy_until = 0  # the radio is transmitting (data or ACK) until then
        self.tx_fifo: deque[tuple[bytes, bool]] = deque()
        self.attempt: Attempt | None = None
        self.blocked = False  # MAX_RT raised, waiting for flush_tx / reuse_tx
        self.chain_at: int | None = None  # a no-ack frame just ended here: next one needs no settle
        self.tx_mode_since = 0  # TX mode entered (a settle) at this time: back-to-back frames stay
        self.over_4ms = False  # this stay in TX mode has been counted as too long
        self.next_pid = 0
        self.rx_fifo = 0
        self.last_rx: dict[int, tuple[int, bytes]] = {}
        self.counters: Counter[str] = Counter()
        self.rpd = False  # received power detector: latched in RX mode, reset on leaving it


def reception(sender: Radio, attempt: Attempt, tx: Transmission, rx: Radio) -> int | str:
    """The pipe on which ``rx`` would take the frame in, before collisions, loss,
    duplicates and its RX FIFO; else why not ("not_for_it", "late", "format")."""
    s, r = sender.regs, rx.regs
    pipe = matching_pipe(s, r)
    if pipe is None or not r.powered or not rx.listening or r.channel != s.channel:
        return "not_for_it"
    if r.rate != s.rate or r.crc_len != s.crc_len:
        return "not_for_it"
    if rx.rx_since > tx.start or rx.busy_until > tx.start:
        return "late"
    if r.dynamic_payloads != s.dynamic_payloads or (
        not r.dynamic_payloads and len(attempt.payload) != r.payload_size
    ):
        return "format"
    return pipe


def matching_pipe(s: RadioRegisters, r: RadioRegisters) -> int | None:
    """The pipe of ``r`` whose address is the one ``s`` sends to (None: none)."""
    if r.address_width != s.address_width:
        return None
    aw = s.address_width
    target = s.tx_address[:aw]
    for pipe in sorted(r.rx_pipes):
        if r.rx_pipes[pipe][:aw] == target and len(target) == aw:
            return pipe
    return None
