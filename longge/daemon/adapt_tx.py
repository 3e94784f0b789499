"""The TX process's side of ``adapt = true`` (ESB; protocol/adapt.py, protocol/rate.py):
feeds the retry adapter the radio's counts and applies its choices to the TX radio; on a
link with one peer also chooses the direction's data rate: announces a change to the peer (a sealed
link-control packet, ahead of the queue), switches once the announcement has gone and the TX
FIFO has drained, keeps a faster rate on trial only if it works (and says so), goes back
without a word when it does not and waits out the receiver's trial; falls back to the robust
rate when nothing was acknowledged for FALLBACK_S. Applied again whenever the radio's
settings are (brought up, ``radio set``)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from longge.daemon.child import Child
from longge.daemon.peers import TxCounters
from longge.protocol import adapt as a
from longge.protocol import rate as rt
from longge.protocol.peer import PeerSender, PeerTable
from longge.radio.constants import RATE_BY_NAME
from longge.radio.interface import LinkRadio
from longge.radio.options import ARD_STEP_US


@dataclass
class _Announced:
    move: rt.RateMove
    back: str  # the rate to stay at (or return to) if it does not get through
    target: int  # frames_sent once the announcement is loaded
    deadline: float
    trial_at: float | None = None  # a keep: when its trial was announced
    loaded_at: float | None = None
    max_rt: bool = False


@dataclass
class _Trial:
    back: str
    announced_at: float  # the receiver's trial ends TRIAL_S after it heard this
    judge_by: float
    probe: bytes = b""  # (made at the first probe: its length is the peer's framing's)


#: The decisions ``status`` lists (the newest last), each with how long ago it was made.
RECENT = 32


class Adaptation:
    """Present while the node's config says ``adapt`` and the link is ESB."""

    def __init__(self) -> None:
        self.adapter: a.RetryAdapter | None = None
        self.rates: rt.RateChooser | None = None
        self._key: tuple[bool, str] | None = None
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
        self.probe_frames = 0
        self.recent: deque[tuple[float, str]] = deque(maxlen=RECENT)

    def keepalive_s(self, configured: float) -> float:
        """An adapting link's keepalives come often enough for the fallback's silence."""
        return configured if self.adapter is None else min(configured, rt.ADAPT_KEEPALIVE_S)

    def may_load(self) -> bool:
        """False while a switch of rate waits for the TX FIFO to drain, while a rate is on
        trial (only its probes go), and until the receiver's trial ends."""
        ann = self._announced
        if ann is not None:  # (a trial's keep too: the rate was judged)
            return ann.loaded_at is None
        return self._back is None and self._trial is None

    def probing(self) -> bool:
        """A MAX_RT now may be a probe's: what the peer has on its way is not given up."""
        return (self._trial is not None and self._announced is None) or self._probes_out

    def wait_s(self, now: float, longest: float) -> float:
        """How long the loop may sleep: no past a step of the rate's agreement (the guard
        after an announcement, its deadline, a trial's judgement, the way back)."""
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
        return max(0.0, min([longest, *(t - now for t in due)]))

    def acknowledged(self, now: float) -> None:
        self._last_ack = now

    def step(
        self,
        child: Child,
        radio: LinkRadio,
        c: TxCounters,
        table: PeerTable[PeerSender],
        now: float,
    ) -> None:
        """Once per loop turn with a radio: follow the config, count, choose, apply."""
        opts = child.cfg.radio
        key = (opts.adapt and opts.acked, opts.rate)
        if key != self._key:  # turned on or off, or another rate configured: start over
            self._key = key
            self.adapter = a.RetryAdapter(opts.rate, now) if key[0] else None
            one_peer = len(table) == 1  # (a base's RX radio hears all mobiles at one rate)
            self.rates = rt.RateChooser(opts.rate, now) if key[0] and one_peer else None
            self._announced = self._trial = self._back = None
            self._applied = -1
            # (before a first acknowledgement, silence counts only after STARTUP_S)
            self._last_ack = now + rt.STARTUP_S - rt.FALLBACK_S
        adapter = self.adapter
        if adapter is None:
            self.max_rt = 0
            return
        if child.applied != self._applied:  # the config's settings were just applied
            self._applied = child.applied
            self._loaded, self._retrans = c.frames_sent, radio.retransmissions
            self._apply(radio)
            return
        loaded = c.frames_sent - self._loaded
        retrans = radio.retransmissions - self._retrans
        self._loaded, self._retrans = c.frames_sent, radio.retransmissions
        max_rt, self.max_rt = self.max_rt, 0
        if self._probes_out and radio.is_fifo(True, True):
            self._probes_out = False
        if adapter.observe(loaded, retrans, max_rt, now) is not None:
            self._apply_retries(radio)
            self._note(now, f"ARC {adapter.choice.arc}")
        if self.rates is not None:
            self._rate_step(radio, c, table.peers[0], max_rt, now)

    # -- the rate ---------------------------------------------------------------------------

    def _rate_step(
        self, radio: LinkRadio, c: TxCounters, peer: PeerSender, max_rt: int, now: float
    ) -> None:
        rates, adapter = self.rates, self.adapter
        assert rates is not None and adapter is not None
        if self._back is not None:  # back from a failed trial: once the receiver is too
            rate, at = self._back
            if now >= at and radio.is_fifo(True, True):
                self._back = None
                self._switch(radio, rate, now)
            return
        if self._announced is not None:
            self._announcing(radio, c, peer, max_rt, now)
            return
        trial = self._trial
        if trial is not None and now > trial.judge_by:  # not judged in time: it failed
            rates.trial_failed(trial.back, f"{rates.rate} on trial: not judged in time", now)
            self._go_back(trial)
            return
        if trial is not None:
            self._probe(radio, c, peer, trial, rates.rate)
        if rates.rate != rt.ROBUST_RATE and now - self._last_ack >= rt.FALLBACK_S:
            rates.fall_back(now)
            self._trial = None
            self._switch(radio, rt.ROBUST_RATE, now)
            self._note(now, f"fallback {rt.ROBUST_RATE}")
            return
        if adapter.windows == self._windows:
            return
        self._windows = adapter.windows
        move = rates.after_window(adapter.window_q or 0.0, now)
        if trial is not None and rates.trial_from is None and move is None:
            self._go_back(trial)  # the trial's rate failed
            return
        if move is None:
            return
        what = "keep" if move.keep else "trial" if move.trial else "announce"
        self._note(now, f"{what} {move.rate}")
        peer.uplink(rt.rate_message(move.rate, move.trial), now)
        waiting = len(peer.urgent) if peer.urgent else len(peer.frames)
        back = trial.back if move.keep and trial is not None else adapter.rate
        self._announced = _Announced(
            move,
            back,
            c.frames_sent + waiting,
            now + rt.ANNOUNCE_S,
            trial_at=trial.announced_at if move.keep and trial is not None else None,
        )

    def _announcing(
        self, radio: LinkRadio, c: TxCounters, peer: PeerSender, max_rt: int, now: float
    ) -> None:
        ann = self._announced
        rates = self.rates
        assert ann is not None and rates is not None
        ann.max_rt = ann.max_rt or bool(max_rt)
        if ann.loaded_at is None and c.frames_sent >= ann.target:
            ann.loaded_at = now
        if ann.max_rt or now > ann.deadline:  # not through (perhaps half: see each case)
            self._announced = None
            if ann.move.keep:  # the receiver ends its trial: back too, after it
                assert ann.trial_at is not None
                rates.trial_failed(ann.back, "the trial's keep did not get through: back", now)
                self._go_back(_Trial(ann.back, ann.trial_at, now))
                return
            rates.not_announced(ann.back, now)
            if ann.move.trial:  # it may have heard it: its trial ends by itself
                self._back = (ann.back, (ann.loaded_at or now) + rt.TRIAL_S + rt.GUARD_S)
            return
        if ann.loaded_at is None or not radio.is_fifo(True, True):
            return
        if now < ann.loaded_at + rt.GUARD_S:
            return
        self._announced = None
        if ann.move.keep:
            self._trial = None
            assert self.adapter is not None  # (kept: judged as any rate again)
            self.adapter.window_attempts = a.WINDOW_ATTEMPTS
            self.adapter.window_s = a.WINDOW_S
            return
        self._switch(radio, ann.move.rate, now)
        if ann.move.trial:
            self._trial = _Trial(ann.back, ann.loaded_at, now + rt.PROBE_MAX_S)
            assert self.adapter is not None  # judged quickly: a rate that fails costs little
            self.adapter.window_attempts = rt.PROBE_ATTEMPTS
            self.adapter.window_s = rt.PROBE_MAX_S
            self._probe(radio, c, peer, self._trial, ann.move.rate)  # (the first, at once)

    def _probe(
        self, radio: LinkRadio, c: TxCounters, peer: PeerSender, trial: _Trial, rate: str
    ) -> None:
        """A rate on trial: a probe's frames, whole, into the empty TX FIFO (a probe fills
        whole frames: rate.probe_length; lane 1: between a packet's frames)."""
        if not radio.is_fifo(True, True):
            return
        if not trial.probe:
            trial.probe = rt.probe_message(rate, peer.probe_length())
        for frame in peer.probe_frames(trial.probe):
            radio.start_fast_write(frame)
            c.frames_sent += 1
            self.probe_frames += 1
        self._probes_out = True

    def _go_back(self, trial: _Trial) -> None:
        """Back from a trial without a word, once the receiver's trial is over."""
        self._trial = None
        self._back = (trial.back, trial.announced_at + rt.TRIAL_S + rt.GUARD_S)

    def _note(self, now: float, what: str) -> None:
        self.recent.append((now, what))

    def _switch(self, radio: LinkRadio, rate: str, now: float) -> None:
        self._note(now, f"rate {rate}")
        radio.data_rate = int(RATE_BY_NAME[rate])
        self.adapter = a.RetryAdapter(rate, now)
        self._windows = 0
        self._last_ack = now
        self._apply_retries(radio)

    def _apply(self, radio: LinkRadio) -> None:
        """After the config's settings: the rate and retries in force again."""
        if self.rates is not None and self.adapter is not None:
            radio.data_rate = int(RATE_BY_NAME[self.adapter.rate])
        self._apply_retries(radio)

    def _apply_retries(self, radio: LinkRadio) -> None:
        assert self.adapter is not None
        choice = self.adapter.choice
        radio.set_retries(choice.ard_us // ARD_STEP_US - 1, choice.arc)

    def stats(self, now: float) -> dict[str, object] | None:
        if self.adapter is None:
            return None
        out = self.adapter.stats(now)
        if self.rates is not None:
            out["rate"] = {**self.rates.stats(now), "probe_frames": self.probe_frames}
        out["recent"] = [[round(now - t, 3), what] for t, what in self.recent]
        return out
