"""Raw radio benchmark: stream frames between two emulated radios, compare with the datasheet.

Two processes: the air server, and a host that drives both radios in one loop of
non-blocking calls. The transmitter's TX FIFO is kept full (flushed after MAX_RT, as a link
would); the receiver reads everything. Throughput is measured at the receiver, over the
wall-clock span from its first to its last frame. Attempts, retransmissions and losses are
the air's ground truth.
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from longge.air import native
from longge.air.loss import NO_LOSS, AirLoss
from longge.air.wire import query
from longge.chip.datasheet import per_attempt_failure
from longge.errors import ConfigError
from longge.measure.model import link_error_rates
from longge.radio.options import RadioOptions, configure
from longge.radio.sim import SimRadio

ADDRESS = b"LGbnc"
FIFO_FULL = 2
_SPIN_NS = 2_000_000


def start_air(path: str, loss: AirLoss = NO_LOSS) -> subprocess.Popen[bytes]:
    """Start an air server with these losses (also used by tests); stop it with native.stop."""
    return native.start(path, loss)


@dataclass(frozen=True)
class BenchPlan:
    """What radio-bench streams: the link's settings, the air's losses, for how long."""

    options: RadioOptions = field(default_factory=RadioOptions)
    loss: AirLoss = NO_LOSS
    seconds: float = 5.0
    #: "sim": both radios in this process on the emulator's own host side; "rf24": each
    #: through the real pyrf24 on an emulated chip, in a process of its own (radiobench_rf24)
    backend: str = "sim"

    def __post_init__(self) -> None:
        if not isinstance(self.seconds, int | float) or not 0 < self.seconds <= 3600:
            raise ConfigError("seconds", self.seconds, "a duration of 0..3600 s")  # (not inf)
        if self.backend not in ("sim", "rf24"):
            raise ConfigError("backend", self.backend, "sim or rf24")

    @property
    def mode(self) -> str:
        """esb: each frame as the options say (auto-ack or the per-frame NO_ACK bit); stream:
        auto-ack off on both chips and the 4 ms rule kept: the host lets the TX FIFO drain (the
        chip returns to standby) after each burst of LinkTiming.stream_burst_frames frames."""
        return self.options.mode


@dataclass
class BenchResult:
    plan: BenchPlan
    frames_sent: int
    frames_received: int
    max_rt: int
    throughput_bps: float
    bound_bps: float
    model_bps: float
    attempts: int
    retransmissions: int
    lost: int
    q_configured: float
    q_measured: float
    lag: dict[str, float]
    tx_mode_over_4ms: int = 0
    rx_fifo_full: int = 0

    @property
    def ratio(self) -> float:
        return self.throughput_bps / self.model_bps if self.model_bps else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "options": self.plan.options.as_dict(),
            "loss": self.plan.loss.as_dict(),
            "seconds": self.plan.seconds,
            "backend": self.plan.backend,
            "tx_mode_over_4ms": self.tx_mode_over_4ms,
            "rx_fifo_full": self.rx_fifo_full,
            "throughput_bps": round(self.throughput_bps, 1),
            "bound_bps": round(self.bound_bps, 1),
            "model_bps": round(self.model_bps, 1),
            "ratio_to_model": round(self.ratio, 4),
            "frames_sent": self.frames_sent,
            "frames_received": self.frames_received,
            "max_rt": self.max_rt,
            "attempts": self.attempts,
            "retransmissions": self.retransmissions,
            "lost": self.lost,
            "q_configured": round(self.q_configured, 4),
            "q_measured": round(self.q_measured, 4),
            "emulator_lag_us": self.lag,
        }


def run_bench(plan: BenchPlan, progress: Callable[[float], None] | None = None) -> BenchResult:
    with tempfile.TemporaryDirectory(prefix="longge-bench-") as tmp:
        path = os.path.join(tmp, "air.sock")
        air = start_air(path, plan.loss)
        try:
            if plan.backend == "rf24":
                counts = run_sides(path, plan.options, plan.seconds, plan.loss.seed or 0)
            else:
                counts = _stream(path, plan, progress)
            stats = query(path)
        finally:
            native.stop(air)
    return _result(plan, counts, stats)


@dataclass
class Counts:
    """What a stream did: the sender's frames and MAX_RT, the receiver's frames, its first
    and last frame's time and the bytes after the first (the throughput's span)."""

    sent: int = 0
    max_rt: int = 0
    received: int = 0
    first_ns: int = 0
    last_ns: int = 0
    bytes_after_first: int = 0

    def take(self, payload: bytes | bytearray) -> None:
        now = time.monotonic_ns()
        if self.received == 0:
            self.first_ns = now
        else:
            self.bytes_after_first += len(payload)
        self.received += 1
        self.last_ns = now


def run_sides(path: str, options: RadioOptions, seconds: float, seed: int) -> Counts:
    """Both sides, on the air at ``path``: what the sender and the receiver counted."""
    from longge import testbed

    testbed.build_preload()
    env = {
        **os.environ,
        "LD_PRELOAD": str(testbed.PRELOAD),
        "LONGGE_AIR": path,
    }
    args = [json.dumps(options.as_dict()), str(seconds), str(seed)]

    def side(role: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "longge.radiobench_rf24", role, *args],
            env={**env, "LONGGE_CHIP_NAME": role},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    rx = side("rx")
    tx = None
    try:
        assert rx.stdout is not None
        ready = rx.stdout.readline().strip()
        if ready != "listening":
            raise RuntimeError(f"the receiver did not start: {ready} {rx.communicate()[1][-800:]}")
        tx = side("tx")
        tx_out, tx_err = tx.communicate(timeout=seconds + 60)
        rx_out, rx_err = rx.communicate(timeout=seconds + 60)
    finally:
        for proc in (rx, tx):
            if proc is not None and proc.poll() is None:
                proc.kill()
    if tx.returncode or rx.returncode:
        raise RuntimeError(f"a radio process failed: {tx_err[-800:]} {rx_err[-800:]}")
    sent = json.loads(tx_out.splitlines()[-1])
    got = Counts(**json.loads(rx_out.splitlines()[-1]))
    got.sent, got.max_rt = sent["sent"], sent["max_rt"]
    return got


def _stream(path: str, plan: BenchPlan, progress: Callable[[float], None] | None) -> Counts:
    """One loop of non-blocking calls drives both radios (docs/design.md §1, process model)."""
    opts = plan.options
    tx, rx = SimRadio(air=path, name="tx"), SimRadio(air=path, name="rx")
    if not (tx.begin() and rx.begin()):
        raise RuntimeError("a radio could not attach to the air")
    for radio in (tx, rx):
        configure(radio, opts)
    rx.open_rx_pipe(1, ADDRESS)
    rx.start_listening()
    tx.stop_listening(ADDRESS)
    rng = random.Random(plan.loss.seed)
    payloads = [rng.randbytes(opts.payload) for _ in range(64)]
    stream = plan.mode == "stream"
    # stream: auto-ack is off on the chips (set_auto_ack(False)); the per-frame NO_ACK bit is
    # not used, as Si24R1 clones invert it with dynamic payloads on
    no_ack = not opts.acked and not stream
    burst = opts.timing().stream_burst_frames
    in_burst = 0
    c = Counts()
    start = time.monotonic()
    end = start + plan.seconds
    next_report = start
    fds = [tx.fileno(), rx.fileno()]
    while (now := time.monotonic()) < end:
        if stream and in_burst >= burst and tx.is_fifo(True, True):
            in_burst = 0  # the FIFO drained: the chip is back in standby (the 4 ms rule)
        while tx.is_fifo(True) != FIFO_FULL and not (stream and in_burst >= burst):
            tx.write_fast(payloads[c.sent % 64], no_ack)
            c.sent += 1
            in_burst += 1
        if tx.what_happened()[1]:  # MAX_RT: drop the frame, as a link would
            c.max_rt += 1
            tx.flush_tx()
        while rx.available():
            c.take(rx.read())
        if progress is not None and now >= next_report:
            progress((now - start) / plan.seconds)
            next_report = now + 0.25
        # A slot frees every frame time; a host that sleeps misses it (so does a slow host on
        # real hardware). Poll while the link is busy, sleep when it has gone quiet.
        if time.monotonic_ns() - c.last_ns > _SPIN_NS:
            select.select(fds, [], [], 0.001)
    # Let the last frames go out while still reading: a host that stops reading with frames on
    # their way fills the RX FIFO, and the air then waits for it (docs/emulator.md).
    deadline = time.monotonic() + 1.0
    while not tx.is_fifo(True, True) and time.monotonic() < deadline:
        if tx.what_happened()[1]:
            c.max_rt += 1
            tx.flush_tx()
            break
        while rx.available():
            c.take(rx.read())
        select.select(fds, [], [], 0.001)
    while rx.wait(0.05):
        while rx.available():
            c.take(rx.read())
    tx.close()
    rx.close()
    return c


def _result(plan: BenchPlan, c: Counts, stats: dict[str, Any]) -> BenchResult:
    opts = plan.options
    tx = stats["air"]["radios"].get("tx", {})
    timing = opts.timing()
    span_ns = c.last_ns - c.first_ns
    throughput = c.bytes_after_first * 8 * 1e9 / span_ns if c.received > 1 and span_ns else 0.0
    # (the radios run at RF24 begin()'s power, PA_MAX: the path loss counts at 0 dBm)
    per, ack_per, _ = link_error_rates(opts, plan.loss.as_dict(), 3)
    bound = opts.air_bound_bps()
    if opts.acked:
        q = per_attempt_failure(per, ack_per)
        model = timing.expected_goodput_bps(q)
    else:
        q = per
        model = bound * (1 - q)
    attempts = tx.get("attempts", 0)
    retrans = tx.get("retransmissions", 0)
    lost = tx.get("lost_data", 0) + tx.get("lost_ack", 0) + tx.get("collisions", 0)
    return BenchResult(
        plan=plan,
        frames_sent=c.sent,
        frames_received=c.received,
        max_rt=c.max_rt,
        throughput_bps=throughput,
        bound_bps=bound,
        model_bps=model,
        attempts=attempts,
        retransmissions=retrans,
        lost=lost,
        q_configured=q,
        q_measured=(lost / attempts) if attempts else 0.0,
        lag=stats["lag"],
        tx_mode_over_4ms=int(tx.get("tx_mode_over_4ms", 0)),
        rx_fifo_full=int(stats["air"]["radios"].get("rx", {}).get("rx_fifo_full", 0)),
    )


def format_result(r: BenchResult) -> str:
    o, loss = r.plan.options, r.plan.loss
    mode = (
        f"stream (no-ack, {o.timing().stream_burst_frames}-frame bursts: the 4 ms rule)"
        if r.plan.mode == "stream"
        else "auto-ack"
        if o.acked
        else "no-ack"
    )
    lines = [
        f"radio-bench: {o.rate}, {mode}, ARD {o.ard_us} µs, ARC {o.arc}, payload {o.payload} B, "
        f"per {loss.per:g}, {r.plan.seconds:g} s"
        + (", real pyrf24 on emulated chips" if r.plan.backend == "rf24" else ""),
        f"  measured   {r.throughput_bps / 1e3:9.1f} kbit/s  ({r.frames_received} frames received, "
        f"{r.frames_sent} sent, {r.max_rt} MAX_RT)",
        f"  bound      {r.bound_bps / 1e3:9.1f} kbit/s  (datasheet, no loss)",
        f"  TX mode    {r.tx_mode_over_4ms} stays over 4 ms (the datasheet allows none)",
    ]
    if loss.per or (loss.ack_per or 0):
        lines.append(
            f"  model      {r.model_bps / 1e3:9.1f} kbit/s  (expected service time, "
            f"q = {r.q_configured:.3f}; measured q = {r.q_measured:.3f})"
        )
    lines.append(f"  ratio      {r.ratio:9.3f}     (measured / {'model' if loss.per else 'bound'})")
    lines.append(
        f"  air        {r.attempts} attempts, {r.retransmissions} retransmissions, {r.lost} lost; "
        f"lag p50 {r.lag['p50_us']:.0f} µs, p99 {r.lag['p99_us']:.0f} µs, "
        f"max {r.lag['max_us']:.0f} µs"
    )
    if o.ard_too_short:
        lines.append(f"  warning: ARD {o.ard_us} µs is too short for an ACK at {o.rate} (p. 34)")
    return "\n".join(lines)
