"""ESB's sending side of ``adapt = true``, sans-IO (adapt.py, rate.py, power.py; docs/design.md
§5): fed the TX radio's counts, it chooses the retries; on a link with one peer also the
direction's data rate and the TX power: announces a change to the peer (a sealed link-control
packet, alone in the TX FIFO), switches once it has gone and the FIFO has drained, judges a
rate on trial by probes while the data waits, keeps it only if it works (and says so), goes
back without a word when it does not and waits out the receiver's trial; holds the data after
a MAX_RT until a probe is acknowledged; falls back to the robust rate when nothing was
acknowledged for FALLBACK_S. Chosen again whenever the radio's settings are applied (brought
up, ``radio set``).

Its shape is a part's (part.py): each turn ``step`` takes what the chip and the TX process
say (``EsbTurn``: the config's choices, the frames loaded and retransmissions so far, and how
to ask whether the TX FIFO is empty: asked only when a decision needs it, a look costs an SPI
transfer on a Pi) and returns what to do, in order: chip settings (actions.py) and our
link-control packets to load (``Load``); ``wake_at`` says when it next needs a turn. Its
decisions are tested on a fake clock (tests/test_adapt_esb.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from longge.chip.datasheet import ARC_MAX, ARD_STEP_NS
from longge.protocol import adapt as a
from longge.protocol import power as pw
from longge.protocol import rate as rt
from longge.protocol.actions import Power, Rate, Retries
from longge.protocol.part import Deciding
from longge.protocol.peer import PeerSender

ARD_STEP_US = ARD_STEP_NS // 1000


class EsbTurn(NamedTuple):
    """What ``EsbAdaptation.step`` is told each turn: the config's choices (``adapt``: on and
    the chips acknowledge; the configured rate and PA level; ``one_peer``: a link with one
    peer whose base grants nothing, where the rate and power adapt too), ``applied``: how
    many times the radio's settings were applied (it changes: they were again), the frames
    loaded and the chip's retransmissions so far, the TX FIFO's depth, and whether the TX
    FIFO is empty now (asked when needed); the peer (our link-control packets are its)."""

    adapt: bool
    rate: str
    pa_level: int
    one_peer: bool
    applied: int
    frames_sent: int
    retransmissions: int
    fifo_depth: int
    fifo_empty: Callable[[], bool]
    peer: PeerSender


@dataclass(frozen=True, slots=True)
class Load:
    """Our link-control packet's frames (an announcement, a probe), whole, into the TX FIFO
    in lane 1 (between the frames of a packet on its way), after the actions before it."""

    frames: list[bytes]


EsbAction = Power | Rate | Retries | Load


@dataclass
class _Announced:
    move: rt.RateMove
    back: str  # the rate to stay at (or return to) if it does not get through
    deadline: float
    trial_at: float | None = None  # a keep: when its trial was announced
    loaded_at: float | None = None
    max_rt: bool = False


@dataclass
class _Trial:
    back: str
    announced_at: float  # the receiver's trial ends TRIAL_S after it heard this
    judge_by: float


class EsbAdaptation(Deciding[EsbTurn, "EsbAction"]):
    """ESB's TX process has one; it adapts while the config says ``adapt``."""

    def __init__(self) -> None:
        self.adapter: a.RetryAdapter | None = None
        self.rates: rt.RateChooser | None = None
        self.power: pw.PowerChooser | None = None  # (with the rate: one peer)
        self._key: tuple[bool, str, int, bool] | None = None
        self._applied = -1
        self._loaded = 0
        self._retrans = 0
        self.max_rt = 0  # MAX_RT since the last look (the loop counts them)
        self._windows = 0
        self._announced: _Announced | None = None
        self._trial: _Trial | None = None
        self._back: tuple[str, float] | None = None  # go back to this rate at this time
        self._last_ack = 0.0
        self._probes_out = False  # probe frames may be in the TX FIFO
        self._probes_end = 0  # frames loaded when the last probe was (EsbTurn.frames_sent)
        self.probe_frames = 0
        #: a MAX_RT at the current rate: no data until a frame is acknowledged again (or the
        #: rate falls back); a probe may go at this time
        self._dead: float | None = None
        self._all_retries = False  # ARC 15 for our link-control frames (_load)
        self._heard = False  # anything acknowledged since the start (decisions wait for it)
        self.decisions = a.Decisions()
        self._out: list[EsbAction] = []  # (this turn's, in order)
        self._turn: EsbTurn | None = None  # (this turn's)
        self._sent = 0  # frames loaded, ours of this turn counted

    def keepalive_s(self, configured: float) -> float:
        """An adapting link's keepalives come often enough for the fallback's silence."""
        return configured if self.adapter is None else min(configured, rt.ADAPT_KEEPALIVE_S)

    def may_load(self) -> bool:
        """False while a switch of rate waits for the TX FIFO to drain, while a rate is on
        trial (only its probes go), until the receiver's trial ends, and while the current
        rate has met MAX_RT and nothing was acknowledged since (its probes go)."""
        quiet = self._announced is None and self._back is None and self._trial is None
        return quiet and self._dead is None and not self._power_probing()

    def probing(self) -> bool:
        """A MAX_RT now may be an announcement's or a probe's (they go alone in the TX FIFO):
        what the peer has on its way is not given up."""
        ours = self._announced is not None or self._trial is not None or self._probes_out
        return ours or self._dead is not None or self._power_probing()

    def _power_probing(self) -> bool:
        return self.power is not None and self.power.probe_deadline() is not None

    def wake_at(self, now: float) -> float | None:
        """A step of the rate's agreement (the guard after an announcement, its deadline, a
        trial's judgement, the way back), a probe's time, a power step's judgement."""
        if self.adapter is None:  # (not adapting: none of them; asked every turn)
            return None
        due = []
        ann = self._announced
        if ann is not None:
            due.append(ann.deadline)
            if ann.loaded_at is not None:
                due.append(ann.loaded_at + rt.GUARD_S)
        if self._back is not None:
            due.append(self._back[1])
        if self._trial is not None:
            due.append(self._trial.judge_by)
        if self._dead is not None:
            due.append(self._dead)
        if self.power is not None and (probed_by := self.power.probe_deadline()) is not None:
            due.append(probed_by)
        return min(due) if due else None

    def acknowledged(self, now: float) -> None:
        self._last_ack = now
        self._heard = True
        self._dead = None

    def step(self, turn: EsbTurn, now: float) -> list[EsbAction]:
        """Once per loop turn with a radio: follow the config, count, choose; what to do, in
        order."""
        self._out, self._turn, self._sent = [], turn, turn.frames_sent
        peer = turn.peer
        key = (turn.adapt, turn.rate, turn.pa_level, turn.one_peer)
        if key != self._key:  # turned on or off, or another rate configured: start over
            self._key = key
            self.adapter = a.RetryAdapter(turn.rate, now) if turn.adapt else None
            self.rates = rt.RateChooser(turn.rate, now) if turn.adapt and turn.one_peer else None
            on = self.rates is not None  # (the configured power is the ceiling)
            self.power = pw.PowerChooser(turn.pa_level, now) if on else None
            self._announced = self._trial = self._back = None
            # (a rate that met MAX_RT holds the data till a probe is acknowledged: turned
            # off then, nothing would be loaded again, nor acknowledged)
            self._dead, self._probes_out = None, False
            self._applied = -1
            # (before a first acknowledgement, silence counts only after STARTUP_S)
            self._last_ack = now + rt.STARTUP_S - rt.FALLBACK_S
        adapter = self.adapter
        if adapter is None:
            self.max_rt = 0
            return self._out
        if turn.applied != self._applied:  # the config's settings were just applied
            self._applied = turn.applied
            self._loaded, self._retrans = turn.frames_sent, turn.retransmissions
            self._apply(turn)
            return self._out
        loaded = turn.frames_sent - self._loaded
        retrans = turn.retransmissions - self._retrans
        self._loaded, self._retrans = turn.frames_sent, turn.retransmissions
        max_rt, self.max_rt = self.max_rt, 0
        raised = False
        if max_rt and self.rates is not None and not self.probing():
            self._dead = now  # (a data frame's: the packet was given up; the rest waits)
            if self.power is not None:
                level = self.power.max_rt(now)
                self._set_power(level, now)
                raised = level is not None
        # (gone once the FIFO drained, or once it took a FIFO's depth of frames behind them:
        # under load it never drains, and a data frame's MAX_RT read as a probe's gave up
        # nothing: the packet went on with a frame missing)
        behind = turn.frames_sent - self._probes_end >= turn.fifo_depth
        if self._probes_out and (behind or self._empty()):
            self._probes_out = False
        if self._all_retries and self.may_load() and self._empty():
            self._apply_retries()  # (the data's count again)
        if adapter.observe(loaded, retrans, max_rt, now) is not None:
            self.decisions.note(now, f"ARC {adapter.choice.arc}")
            if not self._all_retries:  # (else once our link-control frames have gone)
                self._apply_retries()
        if raised:  # (the attempts so far were at the level that failed: not the rate's to
            # judge, nor a window that ended with them: judged, a window lost at -18 dBm on a
            # path grown to 66 dB sent the rate to 1M where -12 dBm carries 2M)
            adapter.restart_window(now, a.WINDOW_ATTEMPTS, a.WINDOW_S)
            self._windows = adapter.windows
        if self.rates is not None:
            self._rate_step(peer, max_rt, now)
        return self._out

    def _empty(self) -> bool:
        """Is the TX FIFO empty (not once ours were loaded this turn)?"""
        assert self._turn is not None
        return self._sent == self._turn.frames_sent and self._turn.fifo_empty()

    # -- the rate ---------------------------------------------------------------------------

    def _rate_step(self, peer: PeerSender, max_rt: int, now: float) -> None:
        rates, adapter = self.rates, self.adapter
        assert rates is not None and adapter is not None
        if self._back is not None:  # back from a failed trial: once the receiver is too
            rate, at = self._back
            if now >= at and self._empty():
                self._back = None
                self._switch(rate, now, unsure=True)
            return
        if self._announced is not None:
            self._announcing(peer, max_rt, now)
            return
        trial = self._trial
        if trial is not None and now > trial.judge_by:  # not judged in time: it failed
            rates.trial_failed(trial.back, f"{rates.rate} on trial: not judged in time", now)
            self._go_back(trial)
            return
        if trial is not None:
            self._probe(peer, rates.rate)
        # (nothing acknowledged: the robust rate; at it, now and then the configured one)
        moved = rates.after_silence(self._last_ack, now, rates.rate == rt.ROBUST_RATE)
        if moved is not None:
            self._trial = None
            self._switch(rates.rate, now, unsure=True)
            self.decisions.note(now, f"{moved} {rates.rate}")
            return
        if self._dead is not None:  # a probe now and then, until one is acknowledged
            if now >= self._dead and self._probe(peer, rates.rate):
                self._dead = now + rt.DEAD_PROBE_S
            return
        if not self._heard:  # (the other end may not be up yet: its silence says nothing)
            self._windows = adapter.windows
            return
        if adapter.windows == self._windows:
            self._power_turn(peer, now)
            return
        self._windows = adapter.windows
        if self._power_window(now):
            return
        move = rates.after_window(adapter.window_q or 0.0, now)
        if trial is not None and rates.trial_from is None and move is None:
            self._go_back(trial)  # the trial's rate failed
            return
        if move is None:
            return
        what = "keep" if move.keep else "trial" if move.trial else "announce"
        self.decisions.note(now, f"{what} {move.rate}")
        back = trial.back if move.keep and trial is not None else adapter.rate
        self._announced = _Announced(
            move,
            back,
            now + rt.ANNOUNCE_S,
            trial_at=trial.announced_at if move.keep and trial is not None else None,
        )
        self._announcing(peer, 0, now)

    # -- the power (protocol/power.py: between the rate's moves, never during one) --------------

    def _power_turn(self, peer: PeerSender, now: float) -> None:
        """A step down when its time has come (the TX FIFO empty: what follows is at the new
        level), its probes while they are judged."""
        power, adapter, rates = self.power, self.adapter, self.rates
        if power is None or self._trial is not None:
            return
        assert adapter is not None and rates is not None
        probed_by = power.probe_deadline()
        if probed_by is not None:
            if now > probed_by:  # not judged in time: it failed
                self._set_power(power.window(0, 0, 0, now), now)
            else:
                self._probe(peer, rates.rate)
        elif power.may_step(now) and self._empty():
            self._set_power(power.step_down(now), now)
            adapter.restart_window(now, rt.PROBE_ATTEMPTS, rt.PROBE_MAX_S)
            self._probe(peer, rates.rate)

    def _power_window(self, now: float) -> bool:
        """A window ended: the power's first. True if it was the power's (a step's probes or
        data, or a window that put the ceiling back): the rate does not judge it."""
        power, adapter = self.power, self.adapter
        if power is None or self._trial is not None:
            return False
        assert adapter is not None
        stage = power.stage
        level = power.window(*adapter.last_window, now)
        self._set_power(level, now)
        if stage == "probe" and power.stage == "judge":  # (the data's windows again)
            adapter.restart_window(now, a.WINDOW_ATTEMPTS, a.WINDOW_S)
        if stage != power.stage and not self._all_retries:
            self._apply_retries()  # (ARC 15 while a step's data is judged)
        return stage is not None or level is not None

    def _set_power(self, level: int | None, now: float) -> None:
        if level is None or self.power is None:
            return
        self._out.append(Power(level))
        trial = " (trial)" if self.power.stage else ""
        self.decisions.note(now, f"power {pw.dbm(level)} dBm{trial}")

    def _announcing(self, peer: PeerSender, max_rt: int, now: float) -> None:
        ann = self._announced
        rates = self.rates
        assert ann is not None and rates is not None
        if ann.loaded_at is None and now <= ann.deadline:
            # alone in the TX FIFO (nothing behind it goes at the old rate to a receiver that
            # may have switched: it would meet MAX_RT); lane 1, between a packet's frames
            if self._empty():
                self._load(peer, ann.move.message())
                ann.loaded_at = now
            return
        ann.max_rt = ann.max_rt or bool(max_rt)
        # A trial's announcement that met MAX_RT may have been heard all the same (its last
        # ACK lost, or the receiver switched before it went: an emulated host may, when the
        # air held its clock for another): the trial goes on, its probes tell.
        heard_maybe = ann.max_rt and ann.move.trial and now <= ann.deadline
        if (ann.max_rt and not heard_maybe) or now > ann.deadline:  # not through
            self._announced = None
            if ann.move.keep:  # the receiver ends its trial: back too, after it
                assert ann.trial_at is not None
                why = "MAX_RT" if ann.max_rt else "late"
                rates.trial_failed(ann.back, f"the trial's keep did not get through ({why})", now)
                self._go_back(_Trial(ann.back, ann.trial_at, now))
                return
            why = "MAX_RT" if ann.max_rt else f"not acknowledged in {rt.ANNOUNCE_S:g} s"
            rates.not_announced(ann.back, why, now)
            if ann.move.trial:  # it may have heard it: its trial ends by itself
                self._back = (ann.back, (ann.loaded_at or now) + rt.TRIAL_S + rt.GUARD_S)
            return
        assert ann.loaded_at is not None  # (not loaded by its deadline: not through, above)
        if not heard_maybe and (not self._empty() or now < ann.loaded_at + rt.GUARD_S):
            return
        self._announced = None
        if ann.move.keep:
            self._trial = None
            assert self.adapter is not None  # (kept: judged as any rate again)
            self.adapter.window_attempts = a.WINDOW_ATTEMPTS
            self.adapter.window_s = a.WINDOW_S
            return
        self._switch(ann.move.rate, now)
        if ann.move.trial:
            self._trial = _Trial(ann.back, ann.loaded_at, now + rt.PROBE_MAX_S)
            assert self.adapter is not None  # judged quickly: a rate that fails costs little
            self.adapter.window_attempts = rt.PROBE_ATTEMPTS
            self.adapter.window_s = rt.PROBE_MAX_S
            self._probe(peer, ann.move.rate)  # (the first, at once)

    def _probe(self, peer: PeerSender, rate: str) -> bool:
        """A probe at ``rate`` (on trial, or gone quiet) into the TX FIFO if it is empty (it
        fills whole frames: rate.probe_length); does it go?"""
        if not self._empty():
            return False
        frames = self._load(peer, rt.probe_message(rate, peer.probe_length()))
        self.probe_frames += frames
        self._probes_out = True
        self._probes_end = self._sent
        return True

    def _load(self, peer: PeerSender, message: bytes) -> int:
        """A link-control packet of ours, whole, into the TX FIFO (lane 1: between the
        frames of a packet on its way), at ARC 15 whatever the data's count (a lost
        announcement costs a trial or the other end; a receiver whose RX FIFO is still full
        of the data before it, on a busy machine, refused one for 4 attempts); its frames."""
        assert self.adapter is not None
        if self.adapter.choice.arc < ARC_MAX and not self._all_retries:
            self._out.append(self._retries(ARC_MAX))
            self._all_retries = True
        frames = peer.control_frames(message)
        self._out.append(Load(frames))
        self._sent += len(frames)
        return len(frames)

    def _go_back(self, trial: _Trial) -> None:
        """Back from a trial without a word, once the receiver's trial is over."""
        self._trial = None
        self._back = (trial.back, trial.announced_at + rt.TRIAL_S + rt.GUARD_S)

    def _switch(self, rate: str, now: float, unsure: bool = False) -> None:
        """To ``rate``; ``unsure``: without the receiver's word (back from a trial, fallen
        back), so a probe goes first and the data only once one was acknowledged (the
        receiver may still be at the other rate for a moment: a data frame would meet MAX_RT
        and its packet be lost)."""
        self.decisions.note(now, f"rate {rate}")
        self._dead = now if unsure else None
        self._out.append(Rate(rate))
        self.adapter = a.RetryAdapter(rate, now)
        self._windows = 0
        self._last_ack = now
        if self.power is not None:  # (a rate is judged at the ceiling)
            self._set_power(self.power.to_ceiling(f"rate {rate}", now), now)
        self._apply_retries()

    def _apply(self, turn: EsbTurn) -> None:
        """After the config's settings, or a start over: the rate, power and retries in
        force again (the configured rate and power where they are not adapted: a mobile that
        learnt that its base serves several may have fallen back before)."""
        adapter = self.adapter  # (its rate: the one in force, not one being announced)
        rate = adapter.rate if adapter is not None and self.rates else turn.rate
        level = turn.pa_level if self.power is None else self.power.level
        self._out += (Rate(rate), Power(level))
        self._apply_retries()

    def retries(self) -> Retries:
        """The retries for the data: the chosen ARD and count (ARC 15 while a power step's
        data is judged)."""
        assert self.adapter is not None
        judged = self.power is not None and self.power.stage == "judge"
        return self._retries(ARC_MAX if judged else self.adapter.choice.arc)

    def _apply_retries(self) -> None:
        self._all_retries = False
        self._out.append(self.retries())

    def _retries(self, arc: int) -> Retries:
        """The chosen ARD with ``arc`` (the data's count, or ARC 15 for ours)."""
        assert self.adapter is not None
        return Retries(self.adapter.choice.ard_us // ARD_STEP_US - 1, arc)

    def stats(self, now: float) -> dict[str, object] | None:
        if self.adapter is None:
            return None
        out = self.adapter.stats(now)
        if self.rates is not None:
            out["rate"] = {**self.rates.stats(now), "probe_frames": self.probe_frames}
        if self.power is not None:
            out["power"] = self.power.stats(now)
        out["recent"] = self.decisions.listed(now)
        return out
