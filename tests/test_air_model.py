"""The air model on a virtual clock: timing, acknowledgement, retries, FIFOs, channels, loss.

Times are exact here: the model never reads a clock, so each figure is what the datasheet
formulas say, to the nanosecond.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from longge.air.loss import LossModel, LossSpec, frame_error, margin_db
from longge.air.model import Air, Outcome, RadioRegisters, RxFrame, TxResult
from longge.chip.datasheet import T_SETTLE_NS, LinkTiming, ard_ns, bits_on_air
from longge.errors import ConfigError

ADDR = b"Node1"


def regs(**kw: object) -> RadioRegisters:
    base = RadioRegisters(
        channel=40, rate="2M", dynamic_payloads=True, dynamic_ack=True, ard_step=0, arc=2
    )
    return replace(base, **kw)  # type: ignore[arg-type]


class Bench:
    """Two radios on one channel, the transmitter kept busy, everything on a virtual clock."""

    def __init__(self, loss: LossModel | None = None, **kw: object) -> None:
        self.air = Air(loss)
        self.tx = self.air.attach("tx")
        self.rx = self.air.attach("rx")
        self.air.configure(self.tx, regs(tx_address=ADDR, **kw), 0)
        self.air.configure(self.rx, regs(rx_pipes={1: ADDR}, **kw), 0)
        self.air.set_listening(self.rx, True, 0)
        self.results: list[TxResult] = []
        self.frames: list[tuple[int, bytes]] = []
        self.read = True

    def stream(
        self, count: int, size: int = 32, no_ack: bool = False, burst: int | None = None
    ) -> int:
        """Send ``count`` payloads, refilling the FIFO at each TX result; returns end time.
        With ``burst``: after that many, let the FIFO drain (the chip returns to standby)
        and go on just after."""
        queued = 0
        in_burst = 0
        end = 0
        t = 0
        while queued < count and self.air.submit(self.tx, bytes([queued % 256]) * size, no_ack, t):
            queued += 1
            in_burst += 1
        while (t := self.air.next_event()) is not None:  # type: ignore[assignment]
            for out in self.air.advance(t):
                if isinstance(out, TxResult):
                    self.results.append(out)
                    end = t
                    if out.outcome is Outcome.MAX_RT:
                        self.air.flush_tx(self.tx, t)
                    at = t
                    if burst is not None and in_burst >= burst:
                        if self.air.tx_pending(self.tx) > 0:
                            continue
                        in_burst, at = 0, t + 1  # drained: the host writes again just after
                    while (
                        queued < count
                        and self.air.tx_pending(self.tx) < 3
                        and (burst is None or in_burst < burst)
                    ):
                        self.air.submit(self.tx, bytes([queued % 256]) * size, no_ack, at)
                        queued += 1
                        in_burst += 1
                elif isinstance(out, RxFrame):
                    self.frames.append((t, out.payload))
                    if self.read:
                        self.air.consumed(self.rx, 1)
        return end

    def counters(self, name: str) -> dict[str, int]:
        stats = self.air.stats()["radios"]
        assert isinstance(stats, dict)
        return stats[name]  # type: ignore[no-any-return]


def test_one_acknowledged_frame_takes_one_ack_cycle() -> None:
    b = Bench()
    end = b.stream(1)
    assert end == LinkTiming("2M").ack_cycle_ns  # settle, data, turnaround, ACK
    assert b.results == [TxResult(b.tx, Outcome.OK, 0)]
    assert len(b.frames) == 1


@pytest.mark.parametrize("rate", ["250k", "1M", "2M"])
def test_acknowledged_stream_runs_at_the_ack_cycle(rate: str) -> None:
    b = Bench(rate=rate, ard_step=1)
    end = b.stream(1000)
    t = LinkTiming(rate)
    # Each frame settles (from standby, or turning round from the ACK) before its data.
    assert end == 1000 * t.ack_cycle_ns
    assert len(b.frames) == 1000


@pytest.mark.parametrize("rate", ["250k", "1M", "2M"])
def test_no_ack_frames_stream_back_to_back(rate: str) -> None:
    b = Bench(rate=rate)
    end = b.stream(1000, no_ack=True)
    assert end == T_SETTLE_NS + 1000 * LinkTiming(rate).toa_data_ns
    assert b.counters("tx")["settles"] == 1
    assert b.counters("rx").get("acks_sent", 0) == 0


@pytest.mark.parametrize("rate", ["250k", "1M", "2M"])
def test_a_stream_keeps_the_4_ms_rule_in_bursts_and_runs_at_the_stream_bound(rate: str) -> None:
    """The FIFO always full keeps the chip in TX mode for good: one stay over 4 ms, counted.
    Bursts of k = 4 ms / frame time, each after a settle: none, and exactly the bound."""
    t = LinkTiming(rate)
    k = t.stream_burst_frames
    always = Bench(rate=rate, auto_ack=(False,) * 6)
    always.stream(10 * k)
    assert always.counters("tx")["tx_mode_over_4ms"] == 1
    kept = Bench(rate=rate, auto_ack=(False,) * 6)
    end = kept.stream(10 * k, burst=k)
    assert kept.counters("tx").get("tx_mode_over_4ms", 0) == 0
    assert kept.counters("tx")["settles"] == 10
    # each burst: the host's 1 ns, a settle, k frames back to back (the first has no 1 ns)
    assert end == 10 * (T_SETTLE_NS + k * t.toa_data_ns) + 9
    assert 10 * k * t.payload_len * 8 * 1e9 / end == pytest.approx(t.stream_bound_bps(), 1e-6)
    late = Bench(rate=rate, auto_ack=(False,) * 6)
    late.stream(10 * (k + 1), burst=k + 1)  # one frame too many per burst
    assert late.counters("tx")["tx_mode_over_4ms"] == 10


def test_multicast_without_dynamic_ack_still_asks_for_an_ack() -> None:
    b = Bench(dynamic_ack=False)
    b.stream(3, no_ack=True)
    assert b.counters("rx")["acks_sent"] == 3


def test_nobody_listening_ends_in_max_rt_after_arc_plus_one_attempts() -> None:
    b = Bench(arc=3, ard_step=3)
    b.air.set_listening(b.rx, False, 0)
    end = b.stream(1)
    t = LinkTiming("2M", ard_us=1000, arc=3)
    assert b.results == [TxResult(b.tx, Outcome.MAX_RT, 3)]
    # settle + 4 data frames, ARD between consecutive ones
    assert end == T_SETTLE_NS + 4 * t.toa_data_ns + 3 * ard_ns(3)
    assert b.counters("tx")["attempts"] == 4
    assert b.counters("tx")["retransmissions"] == 3


def test_lost_ack_means_retransmission_and_the_receiver_drops_the_repeat() -> None:
    loss = LossModel(LossSpec(data_per=0.0, ack_per=1.0))
    b = Bench(loss, arc=2)
    b.stream(1)
    assert b.results[0].outcome is Outcome.MAX_RT
    assert len(b.frames) == 1  # stored once
    assert b.counters("rx")["duplicates_dropped"] == 2
    assert b.counters("rx")["acks_sent"] == 3


def test_full_rx_fifo_is_not_acknowledged() -> None:
    b = Bench(arc=1)
    b.read = False  # the host never reads
    b.stream(5)
    assert len(b.frames) == 3
    assert b.counters("rx")["rx_fifo_full"] == 2  # the 4th frame, twice (ARC 1)
    assert [r.outcome for r in b.results] == [Outcome.OK] * 3 + [Outcome.MAX_RT]
    assert b.counters("tx")["frames_flushed"] == 2  # the failed 4th and the waiting 5th


def test_ard_too_short_at_250k_misses_every_ack() -> None:
    """Datasheet p. 34: at 250 kbit/s an ACK needs ARD >= 500 µs."""
    b = Bench(rate="250k", ard_step=0, arc=1)
    b.stream(1)
    assert b.results[0].outcome is Outcome.MAX_RT
    assert len(b.frames) == 1  # the data got through; the PTX just never heard the ACK
    assert b.counters("tx")["ack_timeouts"] == 2


def test_frames_reach_only_their_channel_and_address() -> None:
    air = Air()
    tx, same, other_ch, other_addr = (air.attach(n) for n in ("tx", "a", "b", "c"))
    air.configure(tx, regs(tx_address=ADDR), 0)
    air.configure(same, regs(rx_pipes={1: ADDR}), 0)
    air.configure(other_ch, regs(channel=45, rx_pipes={1: ADDR}), 0)
    air.configure(other_addr, regs(rx_pipes={1: b"Node2"}), 0)
    for r in (same, other_ch, other_addr):
        air.set_listening(r, True, 0)
    air.submit(tx, b"x", True, 0)
    got = [o for o in air.run_until_idle() if isinstance(o, RxFrame)]
    assert [o.radio for o in got] == [same]


@pytest.mark.parametrize(("gap", "collide"), [(0, True), (1, True), (2, False)])
def test_overlapping_transmissions_collide_within_the_signal_bandwidth(
    gap: int, collide: bool
) -> None:
    """At 2 Mbit/s a signal is 2 MHz wide: channels must be >= 2 apart (docs/design.md §1)."""
    air = Air()
    t1, t2, r1 = air.attach("t1"), air.attach("t2"), air.attach("r1")
    air.configure(t1, regs(tx_address=ADDR), 0)
    air.configure(t2, regs(channel=40 + gap, tx_address=b"Other"), 0)
    air.configure(r1, regs(rx_pipes={1: ADDR}), 0)
    air.set_listening(r1, True, 0)
    air.submit(t1, b"one", True, 0)
    air.submit(t2, b"two", True, 0)
    got = [o for o in air.run_until_idle() if isinstance(o, RxFrame)]
    assert (got == []) is collide
    assert (air.stats()["channels"]["40"].get("collisions", 0) > 0) is collide  # type: ignore[index]


def test_losses_repeat_with_the_seed_and_differ_without_it() -> None:
    def fates(seed: int) -> list[int]:
        b = Bench(LossModel(LossSpec(0.3, 0.0), seed=seed), arc=0)
        b.stream(200)
        return [r.outcome is Outcome.OK for r in b.results].count(True), len(b.frames)  # type: ignore[return-value]

    assert fates(7) == fates(7)
    assert fates(7) != fates(8)


@pytest.mark.parametrize(("ard_us", "arc"), [(250, 2), (2500, 15)])
def test_throughput_under_loss_follows_the_expected_service_time(ard_us: int, arc: int) -> None:
    q = 0.1
    b = Bench(LossModel(LossSpec(q, 0.0), seed=11), ard_step=ard_us // 250 - 1, arc=arc)
    end = b.stream(20_000)
    t = LinkTiming("2M", ard_us=ard_us, arc=arc)
    measured = len(b.frames) * 256 * 1e9 / end
    assert measured == pytest.approx(t.expected_goodput_bps(q), rel=0.02)
    max_rt = sum(r.outcome is Outcome.MAX_RT for r in b.results)
    assert max_rt <= 20_000 * t.residual_loss(q) * 3 + 5


def test_bursty_loss_keeps_the_long_run_rate_but_clusters() -> None:
    loss = LossModel(LossSpec(data_per=0.1, burst=8.0), seed=5)
    fates = [loss.data_lost("a", "b") for _ in range(100_000)]
    assert sum(fates) / len(fates) == pytest.approx(0.1, rel=0.1)
    runs = [0]
    for lost in fates:
        if lost:
            runs[-1] += 1
        elif runs[-1]:
            runs.append(0)
    bursts = [r for r in runs if r]
    assert sum(bursts) / len(bursts) == pytest.approx(8.0, rel=0.15)


def test_the_error_curve_passes_through_the_datasheets_sensitivity() -> None:
    """At the sensitivity one bit in a thousand is wrong (the datasheet's 0.1 % BER point);
    each dB of margin makes frames much safer, and a longer frame is likelier lost."""
    assert frame_error(0.0, 1) == pytest.approx(0.001, rel=1e-9)
    full = bits_on_air(32)  # 329 bits
    assert frame_error(0.0, full) == pytest.approx(1 - 0.999**full, rel=1e-9)
    fers = [frame_error(m, full) for m in (-2.0, -1.0, 0.0, 1.0, 2.0, 3.0)]
    assert fers == sorted(fers, reverse=True)
    assert fers[0] > 0.9 and fers[-1] < 0.002
    assert frame_error(0.0, bits_on_air(0)) < frame_error(0.0, full)


def test_a_path_loses_frames_as_the_margin_at_each_rate_and_power_says() -> None:
    """Over one path, 250 kbit/s is 12 dB and 1 Mbit/s 3 dB more sensitive than 2 Mbit/s,
    and each PA step is 6 dB: the air's losses follow the formula at each (20 000 frames)."""
    path = 82.5  # 0 dBm at 2 Mbit/s: 0.5 dB under the sensitivity
    bits = bits_on_air(32)
    for rate, pa_level in (("2M", 3), ("1M", 3), ("1M", 2), ("250k", 0), ("2M", 2)):
        loss = LossModel(LossSpec(path_loss=path), seed=3)
        n = 20_000
        lost = sum(loss.data_lost("a", "b", bits, rate, pa_level) for _ in range(n)) / n
        want = frame_error(margin_db(path, pa_level, rate), bits)
        assert lost == pytest.approx(want, abs=4 * (want * (1 - want) / n) ** 0.5 + 1e-3)
    assert margin_db(path, 3, "1M") - margin_db(path, 3, "2M") == 3.0
    assert margin_db(path, 3, "250k") - margin_db(path, 3, "2M") == 12.0
    assert margin_db(path, 3, "2M") - margin_db(path, 2, "2M") == 6.0


def test_a_weak_path_halves_2m_where_1m_and_250k_get_through() -> None:
    """The attenuations the adaptive experiment needs exist: at one path loss 2 Mbit/s loses
    more than half its frames and 1 Mbit/s almost none; at a higher one only 250 kbit/s works."""
    for path, delivered in (
        (83.0, {"2M": (0, 0.5), "1M": (0.95, 1)}),
        (90.0, {"250k": (0.99, 1), "1M": (0, 0.01)}),
    ):
        for rate, (lo, hi) in delivered.items():
            b = Bench(LossModel(LossSpec(path_loss=path), seed=1), rate=rate, pa_level=3, arc=0)
            b.stream(2000, no_ack=True)
            share = len(b.frames) / 2000
            assert lo <= share <= hi, (path, rate, share)


def test_impossible_register_values_are_refused() -> None:
    air = Air()
    rid = air.attach("x")
    with pytest.raises(ConfigError, match="channel"):
        air.configure(rid, regs(channel=126), 0)
    with pytest.raises(ConfigError, match="rate"):
        air.configure(rid, regs(rate="3M"), 0)
    with pytest.raises(ConfigError, match="per"):
        LossSpec(data_per=1.5)
    for bad in (-1.0, 250.0, float("nan"), "80", True):
        with pytest.raises(ConfigError, match="path_loss"):
            LossSpec(path_loss=bad)  # type: ignore[arg-type]
