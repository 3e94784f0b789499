"""The data rate an adapting link sends at (``adapt = true``, one peer, either mode), sans-IO: the
sender of a direction chooses it (``RateChooser``), announces it in a sealed link-control
packet, and the receiver follows (``rate_follower.RateFollower``); both fall back to the
robust rate when they lose each other. The retries are ``adapt.py``'s. docs/design.md §5.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from longge.chip.datasheet import ARC_MAX, MIN_ARD_US_FOR_EMPTY_ACK, LinkTiming
from longge.protocol.adapt import EWMA

#: Link-control packet (first byte 0: never an IP packet): the sender of a direction tells its
#: receiver to listen at another rate. Sealed like every packet: an unauthentic one moves
#: nothing. Body: the magic, the rate's index in RATES, flags (TRIAL: for TRIAL_S only,
#: unless the same rate is announced again with KEEP; KEEP: the trial of this rate is kept,
#: which a receiver no longer on it ignores; FILLER: no announcement at all, a packet stream
#: mode sends to have frames judged, which the receiver takes and drops).
RATE_MAGIC = b"\x00LGrate"
TRIAL = 0x01
FILLER = 0x02
KEEP = 0x04
_FILLER = RATE_MAGIC + bytes((0, FILLER))  # (a filler's body, before its padding)
#: Slowest first: the most robust (12 dB more margin than 2 Mbit/s) is RATES[0].
RATES = ("250k", "1M", "2M")
ROBUST_RATE = RATES[0]
#: An adapting link's ends fall back to ROBUST_RATE after this long without a sign of the
#: other (the sender: no frame acknowledged; the receiver: no authentic packet heard). Its
#: keepalives come every ADAPT_KEEPALIVE_S, so a working link is never that quiet.
FALLBACK_S = 1.0
ADAPT_KEEPALIVE_S = 0.25
#: Before the other end was ever heard (both daemons starting), silence counts only after
#: this long: the other may still be coming up at the configured rate.
STARTUP_S = 3.0
#: An end at ROBUST_RATE that has heard (a receiver) or got acknowledged (a sender) nothing
#: for this long goes to its configured rate for FALLBACK_S, then back, and so on while
#: nothing comes: the other end may be at the configured rate and never leave it (a base
#: with several mobiles adapts no rate; a node restarted), and a receiver finds a sender only
#: at the sender's rate. Two ends that both fell back meet at ROBUST_RATE, where each spends
#: two thirds of the time (and where they are, once either is heard, they stay).
SCAN_S = 2.0
#: The sender switches this long after its announcement was loaded (and once its TX FIFO has
#: drained): the receiver's process has read it and switched by then. An announcement not
#: through within ANNOUNCE_S (or that met MAX_RT) is given up: the sender stays.
GUARD_S = 0.02
ANNOUNCE_S = 0.25
#: A sender whose current rate met MAX_RT sends no data until a frame is acknowledged again
#: (or it falls back): a probe (as a trial's) every DEAD_PROBE_S meanwhile. A rate that went
#: dead so costs the packet on its way, not every packet queued behind it.
DEAD_PROBE_S = 0.05
#: A neighbouring rate is tried when the model says it carries this much more than the
#: current one; a slower one is moved to at once when the current rate fails at least
#: DEAD_Q of its attempts (a trial would say nothing new, and its announcement may not get
#: through at all).
GAIN = 1.15
DEAD_Q = 0.5
#: Half-life of what a rate met (a rate left long ago may work again).
MEMORY_S = 10.0
#: The current rate's reference failures: taken after this many windows.
REF_WINDOWS = 3
#: A rate on trial is judged on PROBE_ATTEMPTS attempts within PROBE_MAX_S of the switch,
#: made by probes (the trial's announcement again, padded to whole frames: no data is risked
#: at a rate that may not work). Kept (it carries more than the rate it came from), the
#: sender announces it again (no trial); failed or not judged in time, the sender goes back
#: without a word and sends nothing until the receiver's trial (TRIAL_S from the
#: announcement) is over. The first trial comes PROBE_S after the last change; each failed
#: one doubles the wait, up to PROBE_MAX_WAIT_S, unless the channel changed (the current
#: rate's failures fell to a quarter of their reference and by CHANGED_Q at least: the
#: faster rate's memory is stale; or rose to twice it plus CHANGED_Q: the slower one's is):
#: then at once. (Without CHANGED_Q, a few failures more or less in a window of 128 at a
#: rate failing 2 % read as a changed channel: trials every 1.5 s where nothing changed.)
PROBE_S = 1.5
PROBE_MAX_WAIT_S = 12.0
PROBE_ATTEMPTS = 16
PROBE_MAX_S = 0.06
#: A direction that carries little tries a faster rate soon only while losing this share
LIGHT_Q = 0.2
TRIAL_S = 0.12
#: Stream mode's trial (adapt_stream.py) ends when the receiver heard no packet for
#: this long at the trial's rate (its data goes on trial, and its announcement and keep ride
#: the ARQ behind what was sent before: when they are taken in is not the sender's to know):
#: about twice a 1400-byte packet's time at the rate, and at least 60 ms (a hole's frame sent
#: again: a round trip and the receiver's ACK delay, more than once on a lossy rate). A failed
#: trial costs that much without sending; a receiver that left before the keep came ignores
#: it (KEEP), and its sender, hearing nothing, goes back (adapt_stream.py's KEEP_LOST_S).
STREAM_TRIAL_S = {"250k": 0.15, "1M": 0.06, "2M": 0.06}
CHANGED_Q = 0.05


@dataclass(frozen=True)
class RateMove:
    """What the sender announces: ``rate`` (on ``trial``), or ``keep`` the trial's rate."""

    rate: str
    trial: bool = False
    keep: bool = False

    def message(self) -> bytes:
        """Its RATE packet's body (sealed by the sender like every packet)."""
        return rate_message(self.rate, self.trial, self.keep)


def rate_message(rate: str, trial: bool = False, keep: bool = False) -> bytes:
    return RATE_MAGIC + bytes((RATES.index(rate), (TRIAL if trial else 0) | (KEEP if keep else 0)))


def _padded(message: bytes, length: int) -> bytes:
    """``message`` padded with zeros to ``length`` bytes (a probe's, a filler's)."""
    return message + bytes(max(0, length - len(message)))


def probe_message(rate: str, length: int) -> bytes:
    """A trial's probe: its announcement again, padded with zeros to ``length`` bytes."""
    return _padded(rate_message(rate, trial=True), length)


def filler_message(length: int) -> bytes:
    """Stream mode's filler (adapt_stream.py), padded with zeros to ``length`` bytes.
    Not a probe: a probe is the trial's announcement again, and a probe lost at the trial's
    rate is sent again by the ARQ at the rate it went back to, where the receiver took it as
    a new trial (at 71 dB, each failed trial of 2 Mbit/s had the receiver leave 1 Mbit/s for
    0.15 s up to four times: 0.5-0.8 s without a packet through)."""
    return _padded(_FILLER, length)


def is_filler(packet: bytes) -> bool:
    return packet.startswith(_FILLER) and not any(packet[len(_FILLER) :])


def probe_length(stream_overhead: int, data_per_frame: int) -> int:
    """The probe's length that fills whole frames (a probe meets what a full frame meets):
    ``stream_overhead`` the bytes a packet adds (sealing, numbering, CRC)."""
    least = len(RATE_MAGIC) + 2 + stream_overhead
    frames = -(-least // data_per_frame)
    return frames * data_per_frame - stream_overhead


def parse_rate(packet: bytes) -> RateMove | None:
    """The move a RATE packet announces, or None (not one, a filler, or unknown). A probe's
    padding (zeros) is allowed."""
    n = len(RATE_MAGIC) + 2
    if len(packet) < n or not packet.startswith(RATE_MAGIC) or any(packet[n:]):
        return None
    index, flags = packet[n - 2], packet[n - 1]
    if index >= len(RATES) or flags & ~(TRIAL | KEEP) or flags == TRIAL | KEEP:
        return None  # (a filler announces nothing)
    return RateMove(RATES[index], trial=bool(flags & TRIAL), keep=bool(flags & KEEP))


def rate_goodput(rate: str, q: float) -> float:
    """What a rate carries (frame payload bit/s, full frames, ARC 15 at the shortest ARD)
    when q of its attempts fail (datasheet.LinkTiming's expected-service model)."""
    t = LinkTiming(rate, ard_us=MIN_ARD_US_FOR_EMPTY_ACK[rate], arc=ARC_MAX)
    return t.expected_goodput_bps(min(q, 0.999))


def stream_goodput(rate: str, q: float) -> float:
    """What a rate carries in stream mode (frame payload bit/s): the 4 ms rule's bound,
    less the share q of frames the ARQ sends again (each failed attempt costs one frame's
    time; its ACKs go the other way)."""
    return LinkTiming(rate).stream_bound_bps() * (1.0 - min(q, 0.999))


class RateChooser:
    """The sender's choice of its direction's rate, from the retry adapter's windows: the
    rate that carries most by the expected-service model. A slower rate is tried when, with
    its share of failed attempts as last measured (forgotten with a half-life of MEMORY_S; a
    rate never tried counts as clean), it would carry GAIN more; it is moved to at once when
    the current rate fails DEAD_Q of its attempts or more. A faster rate is tried when it
    would carry GAIN more if clean, once the wait since the last change (doubled by each
    failed trial) has passed. A trial sends probes at the rate, then keeps it or leaves it."""

    def __init__(
        self, rate: str, now: float, goodput: Callable[[str, float], float] = rate_goodput
    ) -> None:
        self.rate = rate
        self.configured = rate  # (where SCAN_S sends a sender that hears nothing)
        self.goodput = goodput  # (rate, q) -> bit/s: the link mode's model
        self.why = "configured"
        self.at = now
        self.trial_from: str | None = None  # on trial: the rate to go back to
        #: each rate's share of failed attempts as last measured, and when
        self.memory: dict[str, tuple[float, float]] = {}
        #: the running share of failed attempts at this rate (windows counted), and its
        #: reference: after REF_WINDOWS windows here, or before the last trial from here. A
        #: channel that changed clearly since (CHANGED_Q) has the next trial come at once,
        #: whatever the wait has grown to
        self.q_here: float | None = None
        self.windows_here = 0
        self.q_ref: float | None = None
        self.wait = PROBE_S
        self.next_probe = now + PROBE_S
        self.switches = 0
        self.probes = 0
        self.failed_probes = 0
        self.fallbacks = 0
        self.scans = 0
        #: the direction carries little (stream mode: its fillers go): what it needs is its
        #: frames (the other direction's ACKs) through, not speed, and each failed trial of
        #: a faster rate costs the other direction its ACKs for a while: a faster rate is
        #: tried at once only while this one loses LIGHT_Q of its frames, else after
        #: PROBE_MAX_WAIT_S at this rate
        self.light = False

    def remembered(self, rate: str, now: float) -> float:
        """A rate's share of failed attempts as far as is known now (0: never tried)."""
        if rate not in self.memory:
            return 0.0
        q, at = self.memory[rate]
        return float(q * 0.5 ** ((now - at) / MEMORY_S))

    def after_window(self, q: float, now: float) -> RateMove | None:
        """A window at the current rate failed ``q`` of its attempts: what to announce."""
        i = RATES.index(self.rate)
        if self.trial_from is not None:
            back = self.trial_from
            self.memory[self.rate] = (q, now)
            if self.goodput(self.rate, q) < self.goodput(back, self.remembered(back, now)):
                self.trial_failed(back, f"{self.rate} failed {q:.2f} of its attempts on trial", now)
                return None
            self.trial_from = self.q_ref = None
            self.wait = PROBE_S
            self.why = f"on trial failed {q:.2f} of its attempts: kept"
            return RateMove(self.rate, keep=True)
        self.q_here = q if self.q_here is None else EWMA * q + (1 - EWMA) * self.q_here
        self.windows_here += 1
        self.memory[self.rate] = (self.q_here, now)
        here = self.goodput(self.rate, self.q_here)
        if self.windows_here == REF_WINDOWS and self.q_ref is None:
            self.q_ref = self.q_here
        ref = self.q_ref
        if ref is not None and self.windows_here > REF_WINDOWS:
            if self.q_here < ref / 4 and ref - self.q_here >= CHANGED_Q:
                self._changed(now, None)  # the channel improved: the faster rate at once
            elif self.q_here > 2 * ref + CHANGED_Q:
                # it worsened: what the slower rate met before is stale
                self._changed(now, RATES[i - 1] if i > 0 else None)
        if i > 0:
            slower = RATES[i - 1]
            q_slower = self.remembered(slower, now)
            if self.goodput(slower, q_slower) > GAIN * here:
                why = f"{self.rate} failed {self.q_here:.2f} of its attempts"
                if self.q_here >= DEAD_Q:
                    self.wait = PROBE_S
                    return self._to(slower, why, now)
                if now >= self.next_probe:
                    return self._trial(slower, f"on trial ({why})", now)
        # (what the faster rate met is not held against it: the wait, doubled by each failed
        # trial, is what keeps trials of a rate that does not work rare; its memory would keep
        # a link whose path cleared at the slower rate for tens of seconds)
        faster = RATES[i + 1] if i + 1 < len(RATES) else None
        due = self.next_probe
        if self.light and self.q_here < LIGHT_Q:
            due = max(due, self.at + PROBE_MAX_WAIT_S)  # (its speed is not what it needs)
        if faster and now >= due and self.goodput(faster, 0.0) > GAIN * here:
            return self._trial(faster, f"on trial ({self.rate} failed {self.q_here:.3f})", now)
        return None

    def _changed(self, now: float, stale: str | None) -> None:
        """The channel changed at this rate: a neighbour's memory is stale; try at once."""
        self.q_ref, self.wait, self.next_probe = self.q_here, PROBE_S, now
        if stale is not None:
            self.memory.pop(stale, None)

    def _trial(self, rate: str, why: str, now: float) -> RateMove:
        self.probes += 1
        back, q_before = self.rate, self.q_here
        self._to(rate, why, now)
        self.trial_from, self.q_ref = back, q_before
        return RateMove(rate, trial=True)

    def trial_failed(self, back: str, why: str, now: float) -> None:
        """The trial's rate failed, was not judged in time, or its keep did not get through:
        back to ``back``, and wait longer before the next."""
        self.rate, self.why, self.at = back, why, now
        self.trial_from = None
        # (the reference is measured again: the one before the trial may be the spike of a
        # window that set it off, and the channel as it was before would then read as one
        # that improved, a trial at once: two trials a spike, at 78 dB in stream mode)
        self.q_here, self.windows_here, self.q_ref = None, 0, None
        self.failed_probes += 1
        self.wait = min(PROBE_MAX_WAIT_S, 2 * self.wait)
        self.next_probe = now + self.wait

    def not_announced(self, back: str, why: str, now: float) -> None:
        """The announcement did not get through (``why``): the rate stays ``back``."""
        self.rate, self.why, self.at = back, f"announcement not through ({why}): kept", now
        self.trial_from, self.q_here, self.windows_here = None, None, 0
        self.next_probe = now + self.wait

    def _to(self, rate: str, why: str, now: float) -> RateMove:
        self.rate, self.why, self.at = rate, why, now
        self.q_here, self.windows_here, self.q_ref = None, 0, None
        self.next_probe = now + self.wait
        self.switches += 1
        return RateMove(rate)

    def fall_back(self, now: float, wait: float = PROBE_S) -> None:
        """Nothing acknowledged for FALLBACK_S: the robust rate, without an agreement; the
        next trial after ``wait`` (stream mode, whose trials cost its data a few tenths of a
        second: twice PROBE_S, the rate it left failed as a trial does)."""
        self.memory[self.rate] = (1.0, now)
        self.rate, self.at = ROBUST_RATE, now
        self.why = f"nothing acknowledged for {FALLBACK_S:g} s"
        self.trial_from = None
        self.q_here, self.windows_here, self.q_ref = None, 0, None
        self.wait = wait
        self.next_probe = now + wait
        self.fallbacks += 1

    def after_silence(
        self, last_ack: float, now: float, settled: bool, wait: float = PROBE_S
    ) -> str | None:
        """Nothing acknowledged since ``last_ack``: not ``settled`` at the robust rate for
        FALLBACK_S, "fallback" (``fall_back``, its next trial after ``wait``); settled there
        for SCAN_S, "scan" (``scan``); None: neither (the chooser did not move)."""
        if not settled:
            if now - last_ack < FALLBACK_S:
                return None
            self.fall_back(now, wait)
            return "fallback"
        if not self.scan_due(last_ack, now):
            return None
        self.scan(now)
        return "scan"

    def scan_due(self, last_ack: float, now: float) -> bool:
        """At ROBUST_RATE with nothing acknowledged for SCAN_S (since ``last_ack``, or the
        last switch): time to try the configured rate (``scan``)?"""
        quiet = now - max(last_ack, self.at) >= SCAN_S
        return quiet and self.rate == ROBUST_RATE != self.configured

    def scan(self, now: float) -> None:
        """To the configured rate without an agreement (SCAN_S): the other end may be there;
        nothing acknowledged there for FALLBACK_S falls back again (a fallback, counted)."""
        self.rate, self.at = self.configured, now
        self.why = f"nothing acknowledged at {ROBUST_RATE} for {SCAN_S:g} s: the configured rate"
        self.trial_from = None
        self.q_here, self.windows_here, self.q_ref = None, 0, None
        self.scans += 1

    def stats(self, now: float) -> dict[str, object]:
        return {
            "rate": self.rate,
            "why": self.why,
            "since_s": round(now - self.at, 3),
            "on_trial": self.trial_from is not None,
            "switches": self.switches,
            "probes": self.probes,
            "failed_probes": self.failed_probes,
            "fallbacks": self.fallbacks,
            "scans": self.scans,
        }
