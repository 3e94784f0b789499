"""The air, sans-IO: a discrete-event model of nRF24L01+ radios sharing 2.4 GHz channels.

Nothing here reads a clock or touches a socket. Callers pass the time in (integer ns) and get
back what each radio would see: a TX result, a received frame. ``server.py`` runs this model
against the wall clock for radios in other processes; tests run it on a virtual clock, where
every figure is exact.

What one data frame does (times from ``datasheet.py``)::

    1. the TX FIFO head starts an attempt: 130 µs settling unless it follows a no-ack frame
       back to back, then the packet is on air for TOA(data);
    2. at the end of the data, each radio listening on that channel and address (same rate,
       address width, CRC, payload mode) receives it unless the link's loss process or an
       overlapping transmission on an interfering channel destroys it;
    3. the receiver drops a repeat (same PID and CRC as the last frame on that pipe), stores a
       new frame if its RX FIFO (3) has room, and sends an ACK 130 µs later unless the frame
       is NO_ACK, or its FIFO was full;
    4. the transmitter, if it expects an ACK, succeeds when the ACK survives; else it
       retransmits ARD after the end of the data, up to ARC times, then raises MAX_RT and
       stops with the payload still in its FIFO until flushed or reused.
"""

from __future__ import annotations

import heapq
from collections import Counter

from longge.air.interferer import RPD_MIN_NS, Interferer
from longge.air.loss import LossModel
from longge.air.radios import (
    Attempt,
    Outcome,
    Output,
    Radio,
    RxFrame,
    Transmission,
    TxResult,
    reception,
)
from longge.chip.datasheet import (
    MAX_PAYLOAD,
    MIN_ARD_US_FOR_EMPTY_ACK,
    RX_FIFO_DEPTH,
    T_SETTLE_NS,
    TX_FIFO_DEPTH,
    TX_MODE_MAX_NS,
    ard_ns,
    bits_on_air,
    time_on_air_ns,
)
from longge.chip.registers import RadioRegisters

__all__ = ["Air", "Outcome", "Output", "RadioRegisters", "RxFrame", "TxResult"]


class Air:
    """Radios, channels and the events between them."""

    def __init__(self, loss: LossModel | None = None) -> None:
        self.loss = loss or LossModel()
        self.radios: dict[int, Radio] = {}
        self.channels: dict[int, Counter[str]] = {}
        self._events: list[tuple[int, int, str, int, Attempt | None]] = []
        self._seq = 0
        self._now = 0
        self._next_id = 1
        self._on_air: list[Transmission] = []
        self._out: list[Output] = []
        self.retired: list[Radio] = []  # detached radios, kept for their counters
        self.interferers: list[Interferer] = []
        #: Hold for slow hosts (the compiled server turns it on; off, the chip's behaviour, by
        #: default): ``advance`` stops just before a frame that would land in the full RX FIFO
        #: of a listening radio not in ``not_held`` (``blocking``) instead of dropping it as
        #: the chip would, until that radio's host reads. A full FIFO that no frame is about
        #: to reach stops nothing. docs/emulator.md, "Real time on a shared machine".
        self.holds = False
        #: receivers whose hosts are taken for ones that do not read: their frames overflow
        self.not_held: set[int] = set()
        #: The host message being applied was sent while the air held its clock for a host: it
        #: is applied at the held instant but after every event of that instant, so a payload
        #: it loads cannot chain onto a frame that ended then (the host wrote it after hearing
        #: of that end; the chip had gone to standby: a settle, a new stay in TX mode).
        self.applying_held = False

    # -- radios ------------------------------------------------------------------------------

    def attach(self, name: str) -> int:
        rid = self._next_id
        self._next_id += 1
        self.radios[rid] = Radio(rid, name)
        return rid

    def detach(self, rid: int) -> None:
        radio = self.radios.pop(rid, None)
        if radio is not None:
            radio.attempt = None
            self.retired.append(radio)
            del self.retired[:-32]

    def configure(self, rid: int, regs: RadioRegisters, now: int) -> None:
        regs.validate()
        self._clock(now)
        radio = self.radios[rid]
        radio.regs = regs
        if not regs.powered:
            radio.listening = False

    def set_listening(self, rid: int, on: bool, now: int) -> None:
        self._clock(now)
        radio = self.radios[rid]
        if on and not radio.listening:
            radio.rx_since = max(now, radio.busy_until) + T_SETTLE_NS
            radio.chain_at = None
            radio.rpd = False
        radio.listening = on
        if not on:
            radio.rpd = False
        if not on:
            self._kick(radio)

    def submit(self, rid: int, payload: bytes, no_ack: bool, now: int) -> bool:
        """Load a payload into the TX FIFO. False (and counted) when the FIFO is full."""
        self._clock(now)
        radio = self.radios[rid]
        if len(radio.tx_fifo) >= TX_FIFO_DEPTH:
            radio.counters["tx_fifo_overflow"] += 1
            return False
        radio.tx_fifo.append((bytes(payload[:MAX_PAYLOAD]), no_ack and radio.regs.dynamic_ack))
        radio.counters["frames_submitted"] += 1
        self._kick(radio)
        return True

    def flush_tx(self, rid: int, now: int) -> None:
        """Empty the TX FIFO. A frame already on air still occupies the channel until its end,
        but its outcome is forgotten (RF24 flushes only after MAX_RT or when idle anyway)."""
        self._clock(now)
        radio = self.radios[rid]
        radio.counters["frames_flushed"] += len(radio.tx_fifo)
        radio.tx_fifo.clear()
        radio.attempt = None
        radio.blocked = False

    def reuse_tx(self, rid: int, now: int) -> None:
        """Clear MAX_RT and send the FIFO head again (REUSE_TX_PL + CE pulse)."""
        self._clock(now)
        radio = self.radios[rid]
        if radio.blocked:
            radio.blocked = False
            radio.attempt = None
            self._kick(radio)

    def consumed(self, rid: int, count: int) -> None:
        """The host read ``count`` frames out of the RX FIFO."""
        radio = self.radios[rid]
        radio.rx_fifo = max(0, radio.rx_fifo - count)

    def flush_rx(self, rid: int) -> None:
        self.radios[rid].rx_fifo = 0

    def tx_pending(self, rid: int) -> int:
        return len(self.radios[rid].tx_fifo)

    # -- time ----------------------------------------------------------------------------------

    @property
    def now(self) -> int:
        return self._now

    def next_event(self) -> int | None:
        return self._events[0][0] if self._events else None

    def advance(self, now: int) -> list[Output]:
        """Run every event due at or before ``now`` (with ``holds``, up to a ``blocking``
        one); return what the radios see."""
        while self._events and self._events[0][0] <= now:
            held = self.blocking()
            if held is not None:
                self._clock(held - 1)
                out, self._out = self._out, []
                return out
            t, _, kind, rid, attempt = heapq.heappop(self._events)
            self._now = max(self._now, t)
            radio = self.radios.get(rid)
            if radio is None or attempt is None or radio.attempt is not attempt:
                continue  # detached, flushed or reused meanwhile
            if kind == "data_end":
                self._data_end(radio, attempt, t)
            elif kind == "ack_end":
                self._ack_end(radio, attempt, t)
            elif kind == "retry":
                self._start_attempt(radio, attempt, t)
        self._clock(now)
        out, self._out = self._out, []
        return out

    def run_until_idle(self, limit_ns: int = 10**12) -> list[Output]:
        """Virtual-clock helper: run every event, however far ahead (with ``holds``, up to a
        ``blocking`` one: only a host's read moves on from there)."""
        out: list[Output] = []
        while self._events and self._events[0][0] <= limit_ns and self.blocking() is None:
            out += self.advance(self._events[0][0])
        return out

    def blocking(self) -> int | None:
        """With ``holds``: the time of the next event, if it is a frame's end that would land
        in the full RX FIFO of a held receiver (``advance`` stops just before it)."""
        blocked = self._blocked()
        return None if blocked is None else blocked[0]

    def blocked_for(self) -> list[int]:
        """The held receivers the ``blocking`` frame would land in."""
        blocked = self._blocked()
        return [] if blocked is None else blocked[1]

    def _blocked(self) -> tuple[int, list[int]] | None:
        if not self.holds or not self._events:
            return None
        t, _, kind, rid, attempt = self._events[0]
        sender = self.radios.get(rid)
        if kind != "data_end" or sender is None or attempt is None or sender.attempt is not attempt:
            return None
        tx = attempt.tx
        if tx is None or tx.collided:
            return None
        # whether the frame would be lost is drawn only when it lands: hold either way
        rids = [
            r.id
            for r in self.radios.values()
            if r.rx_fifo >= RX_FIFO_DEPTH
            and r.id != rid
            and r.id not in self.not_held
            and isinstance(pipe := reception(sender, attempt, tx, r), int)
            and r.last_rx.get(pipe) != (attempt.pid, attempt.payload)
        ]
        return (t, rids) if rids else None

    def _clock(self, now: int) -> None:
        self._now = max(self._now, now)
        # Every new transmission starts at or after now, so one that ended before now can
        # collide with nothing more (its own `collided` flag is already set).
        if self._on_air and self._on_air[0].end < self._now:
            self._on_air = [t for t in self._on_air if t.end >= self._now]

    def _schedule(self, t: int, kind: str, radio: Radio, attempt: Attempt) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, kind, radio.id, attempt))

    # -- transmitting --------------------------------------------------------------------------

    def _kick(self, radio: Radio) -> None:
        """Start the next attempt if the radio is free to transmit."""
        if (
            radio.attempt is not None
            or radio.blocked
            or radio.listening
            or not radio.regs.powered
            or not radio.tx_fifo
        ):
            return
        payload, no_ack = radio.tx_fifo[0]
        attempt = Attempt(payload, no_ack, radio.next_pid)
        radio.next_pid = (radio.next_pid + 1) % 4
        radio.attempt = attempt
        chain = radio.chain_at
        # loaded before the last frame ended (or at that instant, but not in reply to it)
        if chain is not None and (
            chain > self._now or (chain == self._now and not self.applying_held)
        ):
            start = chain
        else:
            start = max(self._now, radio.busy_until) + T_SETTLE_NS
            radio.counters["settles"] += 1
            radio.tx_mode_since, radio.over_4ms = start, False
        radio.chain_at = None
        self._start_attempt(radio, attempt, start)

    def _start_attempt(self, radio: Radio, attempt: Attempt, start: int) -> None:
        regs = radio.regs
        toa = time_on_air_ns(len(attempt.payload), regs.rate, regs.address_width, regs.crc_len)
        tx = Transmission(radio.id, regs.channel, regs.bandwidth(), start, start + toa)
        self._transmit(tx)
        attempt.tx = tx
        attempt.tries += 1
        attempt.acked_by = []
        radio.busy_until = tx.end
        radio.counters["attempts"] += 1
        if attempt.tries > 1:
            radio.counters["retransmissions"] += 1
        radio.counters["airtime_ns"] += toa
        self._schedule(tx.end, "data_end", radio, attempt)

    def rpd(self, rid: int, now: int) -> bool:
        """The radio's received power detector (RPD, datasheet §6.4): set when a carrier
        stronger than −64 dBm was on its channel for 40 µs or more while it was in RX mode;
        kept until it leaves RX mode. Every emulated transmitter counts as that strong."""
        self._clock(now)
        radio = self.radios[rid]
        if not radio.listening or now < radio.rx_since + RPD_MIN_NS:
            return False
        if not radio.rpd:
            for t in self._on_air:  # still on air now, started before or during RX mode
                if self._heard(radio, t.sender, t.channel, t.bandwidth, t.start, t.end, now):
                    radio.rpd = True
            for w in self.interferers:
                if (
                    w.covers(radio.regs.channel)
                    and w.heard_by(radio.name)
                    and w.active(radio.rx_since, now)
                ):
                    radio.rpd = True
        return radio.rpd

    @staticmethod
    def _heard(
        radio: Radio, sender: int, channel: int, bandwidth: int, start: int, end: int, now: int
    ) -> bool:
        lo = max(start, radio.rx_since)
        hi = min(end, now)
        return (
            sender != radio.id
            and abs(channel - radio.regs.channel) < max(bandwidth, radio.regs.bandwidth())
            and hi - lo >= RPD_MIN_NS
        )

    def _transmit(self, tx: Transmission) -> None:
        for r in self.radios.values():  # latch RPD of listeners that will hear it
            if r.listening and not r.rpd:
                end = tx.end if tx.end else tx.start + RPD_MIN_NS
                if self._heard(r, tx.sender, tx.channel, tx.bandwidth, tx.start, end, end):
                    r.rpd = True
        for other in self._on_air:
            if (
                other.start < tx.end
                and tx.start < other.end
                and abs(other.channel - tx.channel) < max(other.bandwidth, tx.bandwidth)
            ):
                other.collided = True
                tx.collided = True
        ch = self.channels.setdefault(tx.channel, Counter())
        # a Wi-Fi interferer on the air while it is: destroyed as by a collision
        # (air/interferer.py), everywhere or at one node's radios
        if tx.end:
            jammed = False
            for w in self.interferers:
                if w.covers(tx.channel) and w.active(tx.start, tx.end):
                    if w.near is None:
                        jammed = True
                    else:
                        tx.jammed_near.append(w.near)
            if jammed:
                tx.collided = True
                ch["jammed"] += 1
            if tx.jammed_near:
                ch["jammed_near"] += 1
        self._on_air.append(tx)
        ch["transmissions"] += 1
        ch["airtime_ns"] += tx.end - tx.start

    def _expects_ack(self, radio: Radio, attempt: Attempt) -> bool:
        return radio.regs.auto_ack[0] and not attempt.no_ack

    def _data_end(self, radio: Radio, attempt: Attempt, t: int) -> None:
        tx = attempt.tx
        assert tx is not None
        if tx.collided:
            self.channels[tx.channel]["collisions"] += 1
            radio.counters["collisions"] += 1
        ack_end = None
        for rx in self.radios.values():
            if rx is radio:
                continue
            if self._receive(radio, attempt, tx, rx):
                ack_end = self._send_ack(attempt, rx, t)
        if not self._expects_ack(radio, attempt):
            if t - radio.tx_mode_since > TX_MODE_MAX_NS and not radio.over_4ms:
                radio.over_4ms = True  # the host kept the FIFO full past the 4 ms rule
                radio.counters["tx_mode_over_4ms"] += 1
            self._complete(radio, attempt, t, chain=True)
            return
        if not self._ack_in_time(radio):
            ack_end = None
        if ack_end is None:
            self._fail_attempt(radio, attempt, t)
        else:
            self._schedule(ack_end, "ack_end", radio, attempt)

    def _ack_in_time(self, radio: Radio) -> bool:
        ard_us = ard_ns(radio.regs.ard_step) // 1000
        if ard_us < MIN_ARD_US_FOR_EMPTY_ACK[radio.regs.rate]:
            radio.counters["ack_timeouts"] += 1
            return False
        return True

    def _receive(self, sender: Radio, attempt: Attempt, tx: Transmission, rx: Radio) -> bool:
        """Does ``rx`` take the frame in, and answer it with an ACK?"""
        s, r = sender.regs, rx.regs
        pipe = reception(sender, attempt, tx, rx)
        if pipe == "not_for_it":
            return False
        if pipe == "late":
            rx.counters["missed_not_listening"] += 1
            return False
        if pipe == "format":
            rx.counters["format_mismatch"] += 1
            return False
        assert isinstance(pipe, int)
        if tx.collided or (tx.jammed_near and tx.jammed_at(rx.name)):
            rx.counters["lost_collision"] += 1
            return False
        bits = bits_on_air(len(attempt.payload), s.address_width, s.crc_len)
        if self.loss.data_lost(sender.name, rx.name, bits, s.rate, s.pa_level):
            sender.counters["lost_data"] += 1
            rx.counters["lost_data"] += 1
            return False
        fingerprint = (attempt.pid, attempt.payload)
        ack_wanted = r.auto_ack[pipe] and not attempt.no_ack
        if rx.last_rx.get(pipe) == fingerprint:
            rx.counters["duplicates_dropped"] += 1
            return ack_wanted
        if rx.rx_fifo >= RX_FIFO_DEPTH:
            rx.counters["rx_fifo_full"] += 1
            return False
        rx.last_rx[pipe] = fingerprint
        rx.rx_fifo += 1
        rx.counters["frames_received"] += 1
        self._out.append(RxFrame(rx.id, pipe, attempt.payload))
        return ack_wanted

    def _send_ack(self, attempt: Attempt, rx: Radio, t: int) -> int:
        regs = rx.regs
        toa = time_on_air_ns(0, regs.rate, regs.address_width, regs.crc_len)
        ack = Transmission(rx.id, regs.channel, regs.bandwidth(), t + T_SETTLE_NS, 0)
        ack.end = ack.start + toa
        self._transmit(ack)
        # Deaf while it sends the ACK. Back in RX right after: otherwise a retransmission at
        # ARD 250 µs (2 Mbit/s) could never be heard, which real links contradict.
        rx.busy_until = ack.end
        rx.counters["acks_sent"] += 1
        attempt.acked_by.append(rx.id)
        attempt.ack_tx = ack
        return ack.end

    def _ack_end(self, radio: Radio, attempt: Attempt, t: int) -> None:
        ack, tx = attempt.ack_tx, attempt.tx
        assert ack is not None and tx is not None
        acker = self.radios.get(attempt.acked_by[-1])
        if ack.collided or (ack.jammed_near and ack.jammed_at(radio.name)):
            # two receivers answered, or something else was on air (here)
            radio.counters["ack_collisions"] += 1
            self._fail_attempt(radio, attempt, tx.end)
        elif acker is None or self._ack_lost(radio, acker):
            radio.counters["lost_ack"] += 1
            self._fail_attempt(radio, attempt, tx.end)
        else:
            self._complete(radio, attempt, t, chain=False)

    def _ack_lost(self, radio: Radio, acker: Radio) -> bool:
        a = acker.regs  # an empty ACK, sent at the acker's power
        bits = bits_on_air(0, a.address_width, a.crc_len)
        return self.loss.ack_lost(radio.name, acker.name, bits, a.rate, a.pa_level)

    def _fail_attempt(self, radio: Radio, attempt: Attempt, data_end: int) -> None:
        if attempt.tries <= radio.regs.arc:
            retry_at = data_end + ard_ns(radio.regs.ard_step)
            self._schedule(max(retry_at, self._now), "retry", radio, attempt)
            return
        radio.blocked = True
        radio.counters["max_rt"] += 1
        self._out.append(TxResult(radio.id, Outcome.MAX_RT, attempt.tries - 1))

    def _complete(self, radio: Radio, attempt: Attempt, t: int, chain: bool) -> None:
        radio.attempt = None
        if radio.tx_fifo:
            radio.tx_fifo.popleft()
        radio.counters["frames_ok"] += 1
        self._out.append(TxResult(radio.id, Outcome.OK, attempt.tries - 1))
        radio.busy_until = max(radio.busy_until, t)
        radio.chain_at = t if chain else None
        self._kick(radio)

    # -- ground truth ----------------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        return {
            "now_ns": self._now,
            "radios": {
                r.name: {
                    "id": r.id,
                    "attached": r.id in self.radios,
                    "channel": r.regs.channel,
                    "rate": r.regs.rate,
                    "ard_us": ard_ns(r.regs.ard_step) // 1000,
                    "arc": r.regs.arc,
                    **dict(r.counters),
                }
                for r in [*self.retired, *self.radios.values()]
            },
            "channels": {str(ch): dict(c) for ch, c in sorted(self.channels.items())},
        }
