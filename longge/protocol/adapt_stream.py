"""Stream mode's sending side of ``adapt = true``, sans-IO (one peer; rate.py, docs/design.md
§5, "Stream mode"): the chips send without acknowledgements, so there are no
retries to choose, and what the rate's choice learns from is the ARQ's: of the frames whose
fate it learnt (acknowledged, or found missing and sent again), the share that failed. The
agreement rides on the ARQ, which delivers in order and at most once: the announcement goes
behind what was sent at the old rate and nothing goes behind it until the ARQ says it has
passed (the receiver switched as it took it in), then the sender switches. A trial carries
the data (the ARQ sends again what a rate that does not work lost): judged on the frames
whose fate is known within PROBE_MAX_S, kept by a KEEP announcement (the
receiver's trial lasts while it hears the sender: rate.STREAM_TRIAL_S); failed, the sender
sends nothing for that long and goes back; kept, but nothing acknowledged before the keep
passed (the receiver had left: it ignores the keep), the sender goes back too. Nothing
acknowledged for FALLBACK_S: the robust rate, as in ESB (the receiver falls back by
itself).

Its shape is a part's (part.py): each turn ``step`` takes the config's choices
(``StreamTurn``) and the peer, whose ARQ (arq.py) it reads and offers our link-control
packets to, and returns the chip settings to make, in order (actions.py); ``wake_at`` says
when it next needs a turn."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from longge.protocol import adapt as a
from longge.protocol import rate as rt
from longge.protocol.actions import Action, Power, Rate
from longge.protocol.arq import ArqSender
from longge.protocol.part import Deciding
from longge.protocol.peer import PeerSender
from longge.protocol.power_stream import SILENT_S, StreamPower

#: The ARQ begins a new session only after this long without progress (ArqSender's
#: ``restart_after_s``): both ends fall back within 2 x FALLBACK_S of losing each other.
RESTART_AFTER_S = 2 * rt.FALLBACK_S + 0.5
#: A trial is judged on this many fates (its data goes: they come fast; ESB's 16 probes
#: would judge 2 Mbit/s losing 3 frames in 4 as good one time in 20), within PROBE_MAX_S
TRIAL_FATES = 64
#: A sender with little to send (the reverse channel of a loaded direction carries its ACKs)
#: has few fates to judge its rate on, and a trial of its own would not be judged: while its
#: ARQ is idle it sends a filler of FILL_FRAMES frames every FILL_EVERY_S (rate.filler_message:
#: the receiver takes it and drops it), and a trial is filled up to TRIAL_FATES.
#: Without them a base whose downlink went to 250 kbit/s at 78 dB stayed there under Wi-Fi,
#: and its ACKs, 250 kbit/s's long frames under Wi-Fi, held a 2 Mbit/s uplink to 0.4 of what
#: a fixed 2 Mbit/s link carried.
FILL_FRAMES = 16
FILL_EVERY_S = a.WINDOW_S / 2
#: A keep not through while nothing was acknowledged for this long: the receiver had left the
#: trial (it heard no packet for rate.STREAM_TRIAL_S) and ignores the keep when it comes; the
#: sender goes back to it (else both fell back to 250 kbit/s after rate.FALLBACK_S). ACKs
#: come every few milliseconds while frames are on their way.
KEEP_LOST_S = 0.1
#: After a fallback the first trial of a faster rate comes this long after (ESB's: PROBE_S).
#: The rate left died (nothing acknowledged for a second): a trial of it soon after costs the
#: data a few tenths of a second for little chance (at 78 dB, the trial 1.5 s after the
#: fallback was the dip that held `experiment adaptive-stream`'s settling to 3.1 s).
FALLBACK_WAIT_S = 2 * rt.PROBE_S


class StreamTurn(NamedTuple):
    """What ``StreamAdaptation.step`` is told each turn: the config's choices (``adapt``: on,
    one peer, whose base grants nothing; the configured rate and PA level), ``applied``: how
    many times the radio's settings were applied (it changes: they were again), and the
    frames in a burst of the 4 ms rule at a rate (the node's radio options at that rate), and
    the peers (the first's ARQ carries our link-control packets and is judged)."""

    adapt: bool
    rate: str
    pa_level: int
    applied: int
    burst_frames: Callable[[str], int]
    peers: Sequence[PeerSender]


@dataclass
class _Announced:
    move: rt.RateMove
    back: str  # the rate it came from (a keep: the rate before the trial)
    mark: int | None = None  # offered: it has passed once the ARQ's ``passed`` is this


@dataclass
class _Trial:
    back: str
    judge_by: float


@dataclass
class _Keeping:
    back: str  # the rate before the trial (the receiver's, if it left the trial)
    mark: int  # offered: the keep has passed once the ARQ's ``passed`` is this


class StreamAdaptation(Deciding[StreamTurn, Action]):
    """Present in every stream-mode TX process; adapts while the config says ``adapt`` and
    the node has one peer."""

    def __init__(self) -> None:
        self.rates: rt.RateChooser | None = None
        self.power: StreamPower | None = None  # (with the rate)
        self._busy_since: float | None = None  # the ARQ has had frames on their way since
        self.windows: a.FailureWindows | None = None
        self._key: tuple[bool, str, int] | None = None
        self._applied = -1
        self._acked = self._lost = 0
        self._announced: _Announced | None = None
        self._trial: _Trial | None = None
        self._keeping: _Keeping | None = None
        self._back: tuple[str, float] | None = None  # go back to this rate at this time
        self._last_ack = 0.0
        self._heard = False  # anything acknowledged since the start (decisions wait for it)
        self.decisions = a.Decisions()
        self.burst: int | None = None  # the 4 ms rule's frames per burst at the rate in force
        self._in_force = ""  # the rate the TX radio runs at ("" before it was set)
        self._dead_at = 0.0  # the last window made up for a rate that carries nothing
        #: fates counted since a switch belong to it: the switch's own turn counts none
        self._fresh = False
        self._filled_at = 0.0
        self._light_until = 0.0  # fillers went lately: the direction carries little
        self.fill_frames = 0  # filler frames offered (status)
        #: after a switch without the receiver's word (back from a trial, a fallback), fates
        #: are not counted until the ARQ's ``passed`` is this (what was offered before it)
        self._unsure_mark: int | None = None
        self._out: list[Action] = []  # (this turn's, in order)
        self._turn: StreamTurn | None = None  # (this turn's)

    def keepalive_s(self, configured: float) -> float:
        """An adapting link's keepalives come often enough for the fallback's silence."""
        return configured if self.rates is None else min(configured, rt.ADAPT_KEEPALIVE_S)

    def may_load(self) -> bool:
        """May a new packet be taken for the ARQ? Not while a move is announced (nothing
        behind the announcement), nor until the receiver's failed trial ends."""
        ann = self._announced
        held = self.power is not None and self.power.holds_data()  # (a step of the power)
        return (ann is None or ann.move.keep) and self._back is None and not held

    def may_feed(self) -> bool:
        """May frames go to the ARQ? Not once a move's announcement is in it (nothing goes
        behind it at the old rate), until it has passed and the sender switched; nor until
        the receiver's failed trial ends."""
        ann = self._announced
        offered_move = ann is not None and not ann.move.keep and ann.mark is not None
        return not offered_move and self._back is None

    def may_send(self) -> bool:
        """May the ARQ's frames go on air? Not while the receiver is on a trial the sender
        left (they would be lost: the ARQ sends them once it is back)."""
        return self._back is None

    def wake_at(self, now: float) -> float | None:
        """The way back, a trial's judgement, a power step's."""
        if self.rates is None:  # (not adapting: none of them; asked every turn)
            return None
        due = []
        if self._back is not None:
            due.append(self._back[1])
        if self._trial is not None:
            due.append(self._trial.judge_by)
        if self.power is not None and (probed_by := self.power.deadline()) is not None:
            due.append(probed_by)
        return min(due) if due else None

    def step(self, turn: StreamTurn, now: float) -> list[Action]:
        """Once per loop turn with a radio, after the peer's ACKs were taken in: the chip
        settings to make, in order."""
        out = self._out = []
        self._turn = turn
        self._step(turn, turn.peers, now)
        return out

    def _step(self, turn: StreamTurn, peers: Sequence[PeerSender], now: float) -> None:
        key = (turn.adapt, turn.rate, turn.pa_level)
        peer = peers[0]
        arq = peer.arq
        assert arq is not None
        if key != self._key:  # turned on or off, or another rate configured: start over
            if self._in_force:  # (it adapted: the configured rate and power again)
                self._out += (Rate(turn.rate), Power(turn.pa_level))
            self._key = key
            self.rates = rt.RateChooser(turn.rate, now, rt.stream_goodput) if key[0] else None
            on = key[0]  # (the configured power is the ceiling)
            note, emit = self.decisions.note, self._out_append
            self.power = StreamPower(turn.pa_level, now, note, emit) if on else None
            arq.restart_after_s = RESTART_AFTER_S if key[0] else 0.0
            self.windows = a.FailureWindows(now)
            self._announced = self._trial = self._back = self._keeping = None
            self._applied = -1
            self._acked, self._lost = arq.stats.acked, arq.stats.lost
            # (before a first acknowledgement, silence counts only after STARTUP_S)
            self._last_ack = now + rt.STARTUP_S - rt.FALLBACK_S
            self.burst, self._in_force = None, ""
        rates, windows = self.rates, self.windows
        if rates is None or windows is None:
            return
        if turn.applied != self._applied:  # the config's settings were just applied
            self._applied = turn.applied
            self._set_rate(self._in_force or rates.rate)
        acked = arq.stats.acked - self._acked
        lost = arq.stats.lost - self._lost
        self._acked, self._lost = arq.stats.acked, arq.stats.lost
        if acked:
            self._last_ack, self._heard = now, True
        if self._back is not None:  # back from a failed trial: once the receiver is too
            rate, at = self._back
            if now >= at:
                self._back = None
                self._switch_alone(arq, rate, now)
            return
        ann, robust = self._announced, rt.RateMove(rt.ROBUST_RATE)
        settled = self._in_force == rt.ROBUST_RATE and (ann is None or ann.move == robust)
        moved = rates.after_silence(self._last_ack, now, settled, FALLBACK_WAIT_S)
        if moved is not None:  # (nothing acknowledged: 250 kbit/s; there, now and then, ours)
            self._fall_back(arq, peer, now, moved)
            return
        keeping = self._keeping
        if keeping is not None and arq.passed >= keeping.mark:
            self._keeping = None
        elif keeping is not None and now - self._last_ack >= KEEP_LOST_S:
            self._keeping = None
            rates.trial_failed(keeping.back, "the receiver had left the trial for its keep", now)
            self.decisions.note(now, "keep lost")
            self._switch_alone(arq, keeping.back, now)
            return
        if self._announced is not None:
            self._announcing(arq, peer, now)
            if self._announced is not None and not self._announced.move.keep:
                return
        trial = self._trial
        if trial is not None and now > trial.judge_by and self._announced is None:
            rates.trial_failed(trial.back, f"{rates.rate} on trial: not judged in time", now)
            self._go_back(trial, now)
            return
        # attempts: frames whose fate the ARQ learnt; failures: those it found lost (as it
        # found them: a loss counted when it is sent again would come after the successes
        # behind it, and a trial judged on its first fates would look clean)
        quiet = self._announced is None and self._trial is None and arq.idle and self._heard
        if quiet and now - self._filled_at >= FILL_EVERY_S:
            self._fill(arq, peer, FILL_FRAMES, now)
            self._light_until = now + 2 * a.WINDOW_S
        rates.light = now < self._light_until
        if self._fresh:
            self._fresh, acked, lost = False, 0, 0
        if self._unsure_mark is not None:
            # after a switch without the receiver's word (back from a trial, a fallback):
            # what was offered before finds its fate here, much of it lost at the other
            # rate, for as long as it takes to pass (at 250 kbit/s, several windows: each
            # failed trial of 1 Mbit/s at 78 dB then made the next window at 250 kbit/s look
            # like a channel that improved, and the next trial came at once)
            acked = lost = 0
            if arq.passed >= self._unsure_mark:
                self._unsure_mark = None
                windows.restart_window(now, a.WINDOW_ATTEMPTS, a.WINDOW_S)
        q = windows.count(acked + lost, lost, 0, now)
        if self._power(arq, peer, q is not None, now):
            return
        # At the robust rate with frames on their way and nothing acknowledged for
        # FALLBACK_S (Wi-Fi destroys 250 kbit/s's long frames): a window that failed all
        # (the ARQ's backed-off timers make too few attempts for one), so a faster rate is
        # tried
        dead = settled and not arq.idle and now - self._last_ack >= rt.FALLBACK_S
        dead = dead and now - self._dead_at >= rt.FALLBACK_S
        if dead:
            self._dead_at = now
        if (q is None and not dead) or not self._heard or self._announced is not None:
            return
        move = rates.after_window(1.0 if dead else windows.window_q or 0.0, now)
        if trial is not None and rates.trial_from is None and move is None:
            self._go_back(trial, now)  # the trial's rate failed
            return
        if move is None:
            return
        what = "keep" if move.keep else "trial" if move.trial else "announce"
        self.decisions.note(now, f"{what} {move.rate}")
        if move.keep:
            windows.restart_window(now, a.WINDOW_ATTEMPTS, a.WINDOW_S)  # (judged as any)
        self._announced = _Announced(move, trial.back if trial is not None else self._in_force)
        self._announcing(arq, peer, now)

    def _power(self, arq: ArqSender, peer: PeerSender, ended: bool, now: float) -> bool:
        """The power's turn (power_stream.py), between the rate's moves: True if the window
        that ``ended`` was the power's (the rate does not judge it). A level that went up
        leaves frames sent below it to find their fate: not counted (``_unsure_mark``)."""
        power, windows = self.power, self.windows
        moving = self._announced or self._trial or self._keeping
        if power is None or windows is None or moving or self._unsure_mark is not None:
            return False
        if not self._heard:
            return False
        if arq.idle:
            self._busy_since = None
        elif self._busy_since is None:
            self._busy_since = now
        busy = self._busy_since
        quiet = busy is not None and now - max(busy, self._last_ack) >= SILENT_S
        handled = False
        if quiet and power.silent(now):
            up = handled = True  # (this turn's window, if one ended, was the level's)
        elif ended:
            handled, up = power.window(windows, now)
        else:
            up = power.turn(arq, windows, lambda n: self._fill(arq, peer, n, now), now)
        if up:
            self._unsure_mark = arq.offered
        return handled

    def _fall_back(self, arq: ArqSender, peer: PeerSender, now: float, moved: str) -> None:
        """The chooser ``moved`` after silence (rate.RateChooser.after_silence: a fallback to
        the robust rate, or a scan of the configured one): there without a word. An
        announcement still in the ARQ would pass later (the receiver would take it and
        switch): the new rate's announcement goes behind it."""
        rates = self.rates
        assert rates is not None
        ann = self._announced
        self._trial = self._announced = self._keeping = None
        self._switch_alone(arq, rates.rate, now)
        self.decisions.note(now, f"{moved} {rates.rate}")
        if ann is not None and ann.mark is not None and arq.passed < ann.mark:
            self._announced = _Announced(rt.RateMove(rates.rate), rates.rate)
            self._announcing(arq, peer, now)

    def _announcing(self, arq: ArqSender, peer: PeerSender, now: float) -> None:
        ann = self._announced
        rates = self.rates
        assert ann is not None and rates is not None
        if ann.mark is None:
            if peer.urgent:  # (lane 1 is an interactive packet's until its frames went)
                return
            for frame in peer.control_frames(ann.move.message()):
                arq.offer(frame, force=True)
            ann.mark = arq.offered
            if ann.move.keep:  # (the receiver's trial lasts while it hears us: no deadline)
                self._announced = self._trial = None
                self._keeping = _Keeping(ann.back, ann.mark)
            return
        if arq.passed < ann.mark:
            return  # (the ARQ carries it; nothing acknowledged for FALLBACK_S: fallback)
        self._announced = None
        if ann.move.rate != self._in_force:
            self._switch(ann.move.rate, now)
        if ann.move.trial:
            self._trial = _Trial(ann.back, now + rt.PROBE_MAX_S)
            assert self.windows is not None  # judged quickly: a rate that fails costs little
            self.windows.restart_window(now, TRIAL_FATES, rt.PROBE_MAX_S)
            waiting = arq.offered - arq.passed + len(peer.frames)
            self._fill(arq, peer, TRIAL_FATES - waiting, now)

    def _fill(self, arq: ArqSender, peer: PeerSender, frames: int, now: float) -> None:
        """At least ``frames`` frames into the ARQ: fillers (the receiver takes them and does
        nothing: rate.filler_message), in packets of at most FILL_FRAMES frames."""
        self._filled_at = now
        while frames > 0:
            cut = peer.control_frames(rt.filler_message(peer.probe_length(FILL_FRAMES)))
            for frame in cut:
                arq.offer(frame, force=True)
            frames -= len(cut)
            self.fill_frames += len(cut)

    def _go_back(self, trial: _Trial, now: float) -> None:
        """Back from a trial without a word, once the receiver's trial is over: nothing is
        sent from now on, so it hears nothing for the trial rate's STREAM_TRIAL_S."""
        self._trial = None
        self._back = (trial.back, now + rt.STREAM_TRIAL_S[self._in_force] + rt.GUARD_S)

    def _switch(self, rate: str, now: float) -> None:
        """To ``rate`` (its fates are counted from the next turn on)."""
        self.decisions.note(now, f"rate {rate}")
        self._set_rate(rate)
        if self.power is not None:  # (a rate is judged at the ceiling)
            self.power.to_ceiling(f"rate {rate}", now)
        self._last_ack = now
        self._fresh = True
        assert self.windows is not None
        self.windows.restart_window(now, a.WINDOW_ATTEMPTS, a.WINDOW_S)

    def _switch_alone(self, arq: ArqSender, rate: str, now: float) -> None:
        """To ``rate`` without the receiver's word (back from a trial, a keep lost, a
        fallback): what was offered before finds its fate at the other rate, and is not
        counted (``_unsure_mark``)."""
        self._switch(rate, now)
        self._unsure_mark = arq.offered

    def _set_rate(self, rate: str) -> None:
        self._in_force = rate
        self._out.append(Rate(rate))
        if self.power is not None:
            self.power.apply()
        assert self._turn is not None
        self.burst = self._turn.burst_frames(rate)

    def _out_append(self, action: Action) -> None:
        self._out.append(action)

    def stats(self, now: float) -> dict[str, object] | None:
        if self.rates is None or self.windows is None:
            return None
        w = self.windows
        return {
            "mode": "stream",
            "q": None if w.q is None else round(w.q, 4),
            "windows": w.windows,
            "fill_frames": self.fill_frames,
            "rate": self.rates.stats(now),
            "power": None if self.power is None else self.power.chooser.stats(now),
            "recent": self.decisions.listed(now),
        }
