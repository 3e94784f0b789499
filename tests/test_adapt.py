"""Retries chosen live (``adapt``): the adapter's rules, the adapter against the air model on
a virtual clock (exact: goodput against every fixed setting), and two daemons that adapt on a
lossy emulated air."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from conftest import running_air
from daemonlink import ip_packet, make_link

from longge.air.loss import AirLoss, LossModel, LossSpec
from longge.air.model import Air, Outcome, RadioRegisters, RxFrame, TxResult
from longge.chip.datasheet import ARC_MAX
from longge.daemon.statusview import node_text
from longge.protocol.adapt import (
    ARC_FLOOR,
    TARGET_RESIDUAL,
    WINDOW_ATTEMPTS,
    RetryAdapter,
    arc_for,
)
from longge.protocol.rate import PROBE_MAX_WAIT_S
from longge.radio.options import RadioOptions

ADDR = b"Node1"
#: frames of a 1400-byte datagram on a secured link (29 bytes of packet per frame)
DATAGRAM_FRAMES = 49


def test_arc_keeps_the_residual_loss_under_the_target() -> None:
    for q in (0.01, 0.05, 0.19, 0.4, 0.6):
        arc = arc_for(q)
        assert q ** (arc + 1) <= TARGET_RESIDUAL or arc == ARC_MAX
        assert arc == ARC_FLOOR or q**arc > TARGET_RESIDUAL  # (and no more than needed)
    assert arc_for(0.0) == ARC_FLOOR and arc_for(1.0) == ARC_MAX


def test_it_starts_robust_comes_down_on_a_clean_channel_and_jumps_up_on_max_rt() -> None:
    a = RetryAdapter("2M", 0.0)
    assert (a.choice.ard_us, a.choice.arc) == (250, ARC_MAX)
    assert RetryAdapter("250k", 0.0).choice.ard_us == 500  # (an empty ACK needs it)
    t = 0.0
    for _ in range(40):  # clean: one step down per window, to the floor
        t += 0.01
        a.observe(WINDOW_ATTEMPTS, 0, 0, t)
    assert a.choice.arc == ARC_FLOOR
    decisions = a.decisions
    a.observe(10, 3, 1, t + 0.01)  # a frame exhausted its retries: all of them at once
    assert a.choice.arc == ARC_MAX and "exhausted" in a.choice.why
    assert a.decisions == decisions + 1


def test_a_quiet_link_is_not_judged_on_a_few_frames() -> None:
    a = RetryAdapter("2M", 0.0)
    assert a.observe(3, 3, 0, 0.6) is None  # 6 attempts in a window: too few
    assert a.q is None and a.choice.arc == ARC_MAX


class _Sender:
    """A host keeping a TX FIFO full on the air model, in datagrams of DATAGRAM_FRAMES frames
    (a frame that meets MAX_RT loses its datagram's rest, as the daemon does); with an
    adapter, its choices applied as the TX process applies them."""

    def __init__(self, per: float, arc: int, adapt: bool, seed: int = 3) -> None:
        self.air = Air(LossModel(LossSpec(per, per), seed=seed))
        self.tx, self.rx = self.air.attach("tx"), self.air.attach("rx")
        self.regs = RadioRegisters(
            channel=40, rate="2M", dynamic_payloads=True, dynamic_ack=True, ard_step=0, arc=arc
        )
        self.air.configure(self.tx, replace(self.regs, tx_address=ADDR), 0)
        self.air.configure(self.rx, replace(self.regs, rx_pipes={1: ADDR}), 0)
        self.air.set_listening(self.rx, True, 0)
        self.adapter = RetryAdapter("2M", 0.0) if adapt else None
        if self.adapter is not None:
            self._apply(0)

    def _apply(self, t: int) -> None:
        assert self.adapter is not None
        c = self.adapter.choice
        regs = replace(self.regs, tx_address=ADDR, ard_step=c.ard_us // 250 - 1, arc=c.arc)
        self.air.configure(self.tx, regs, t)

    def run(self, datagrams: int) -> tuple[float, float]:
        """(delivered datagrams' frames per virtual second, share of datagrams lost)."""
        sent = good = 0
        frame = 0  # of the datagram being sent
        lost_this = False
        t = 0
        while sent < datagrams:
            while frame < DATAGRAM_FRAMES and self.air.tx_pending(self.tx) < 3:
                self.air.submit(self.tx, bytes([frame % 256]) * 32, False, t)
                frame += 1
            next_t = self.air.next_event()
            assert next_t is not None
            t = next_t
            for out in self.air.advance(t):
                if isinstance(out, RxFrame):
                    self.air.consumed(self.rx, 1)
                elif isinstance(out, TxResult):
                    loaded = 1
                    if out.outcome is Outcome.MAX_RT:
                        loaded = self.air.tx_pending(self.tx)
                        self.air.flush_tx(self.tx, t)
                        lost_this = True
                    if self.adapter is not None and self.adapter.observe(
                        loaded, out.arc_count, int(out.outcome is Outcome.MAX_RT), t / 1e9
                    ):
                        self._apply(t)
            if frame >= DATAGRAM_FRAMES and self.air.tx_pending(self.tx) == 0:
                sent += 1
                good += not lost_this
                frame, lost_this = 0, False
        return good * DATAGRAM_FRAMES / (t / 1e9), 1 - good / sent


@pytest.mark.parametrize("per", [0.0, 0.1, 0.25])
def test_adapting_carries_what_the_best_fixed_arc_does(per: float) -> None:
    """On the air model (virtual time: every figure exact), 1400-byte datagrams: the adapting
    sender carries ≥ 0.95 of the best fixed ARC's goodput (ARD 250 µs), and loses no more
    than 0.5 % of its datagrams wherever some fixed ARC does."""
    # (goodput rises with ARC up to a point and stays: these find the best)
    arcs = (2,) if per == 0 else (0, 1, 2, 3, 4, 5, 6, 8, 10, 15)
    fixed = {arc: _Sender(per, arc, adapt=False).run(200) for arc in arcs}
    best = max(g for g, _ in fixed.values())
    goodput, lost = _Sender(per, ARC_MAX, adapt=True).run(200)
    assert goodput >= 0.95 * best, (goodput, best)
    if min(lost for _, lost in fixed.values()) <= 0.005:
        assert lost <= 0.005
    if per >= 0.1:  # (ARC 2, the default, loses a share of them here)
        assert fixed[2][1] > 0.05


@pytest.fixture
def lossy_air(tmp_path: os.PathLike[str]) -> Iterator[str]:
    with running_air(tmp_path, AirLoss(per=0.1)) as path:
        yield path


def test_two_daemons_adapt_their_retries_on_a_lossy_air(
    lossy_air: str, tmp_path: os.PathLike[str]
) -> None:
    """10 % frame error both ways, ARC 2 configured (28 % of 1400-byte datagrams lost):
    with adapt the TX radios run more retries, the packets get through, and status says
    what was chosen and why; adapt switched off live, the configured retries are back."""
    radio = RadioOptions(ard_us=250, arc=2, adapt=True)
    with make_link(lossy_air, str(tmp_path), radio=radio) as lk:
        packets = [ip_packet(1000, 100 + i) for i in range(200)]
        got = lk.send(lk.mtun, packets, to=lk.btun, timeout=30.0)
        assert len(got) >= 197, len(got)  # (ARC 2: about 40 of 200 would be lost)
        lk.pump(1.5)  # (stats reach the supervisor every STATS_EVERY_S)
        st = lk.mobile.status()
        deadline = time.monotonic() + 10  # (a first decision ends a window of attempts: on a
        while st["tx"]["adapt"]["decisions"] < 1 and time.monotonic() < deadline:  # busy
            lk.pump(0.5)  # machine it came after the status was read, "start" then)
            st = lk.mobile.status()
        adapt = st["tx"]["adapt"]
        assert adapt["ard_us"] == 250 and 5 <= adapt["arc"] <= ARC_MAX
        assert 0.1 < adapt["q"] < 0.35  # 1 − 0.9² = 0.19 per attempt
        assert adapt["why"] and adapt["decisions"] >= 1
        assert st["radio"]["adapt"] is True
        assert "adapt  ARD 250 µs ARC" in node_text(st)
        assert lk.mobile.set_radio({"adapt": False})["ok"]
        lk.pump(1.5)
        assert lk.mobile.status()["tx"].get("adapt") is None


# -- the data rate -----------------------------------------------------------------------------


def test_the_rate_carrying_most_is_chosen_down_at_once_up_on_trial() -> None:
    """The expected-service model picks the rate: a slower one at once where the current one
    fails half its attempts (one never tried counts as clean), on trial below that; a faster
    one on trial once the wait has passed, or at once when the channel improved; a trial that
    carries less fails and doubles the wait. Wi-Fi-like failures that hit every rate alike
    move nothing."""
    from longge.protocol.rate import (
        PROBE_S,
        RateChooser,
        RateMove,
        parse_rate,
        rate_goodput,
        rate_message,
    )

    r = RateChooser("2M", 0.0)
    assert r.after_window(0.3, 0.1) is None  # 2 Mbit/s at q 0.3 still carries more than 1M
    assert r.after_window(0.9, 0.2) == RateMove("1M") and "failed 0.60" in r.why
    assert r.after_window(0.02, 0.3) is None  # (the wait: PROBE_S)
    t = 0.2 + PROBE_S
    assert r.after_window(0.02, t) == RateMove("2M", trial=True)
    assert r.after_window(0.8, t + 0.1) is None  # carried less than 1M: back, wait longer
    assert (r.rate, r.trial_from, r.failed_probes, r.wait) == ("1M", None, 1, 2 * PROBE_S)
    t += 0.2
    for k in range(3):  # the reference, then the channel clears: tried at once
        assert r.after_window(0.2, t + 0.01 * k) is None
    moves = []
    for k in range(4):
        moves.append(r.after_window(0.0, t + 0.1 + 0.01 * k))
        if moves[-1] is not None:
            break
    assert moves[-1] == RateMove("2M", trial=True)  # (well before the doubled wait)
    assert r.after_window(0.0, t + 1) == RateMove("2M", keep=True) and r.wait == PROBE_S
    # Wi-Fi: every rate fails alike (longer frames rather more): staying carries most
    w = RateChooser("2M", 0.0)
    w.memory["1M"] = (0.5, 0.0)
    assert all(w.after_window(0.45, 0.1 * k) is None for k in range(1, 30))
    assert rate_goodput("2M", 0.45) > rate_goodput("1M", 0.5)
    # a rate failing less than DEAD_Q: the slower one on trial (Wi-Fi may hit it as hard)
    v = RateChooser("2M", 0.0)
    assert v.after_window(0.45, 1.0) is None  # (before PROBE_S: no trial yet)
    assert v.after_window(0.45, PROBE_S) == RateMove("1M", trial=True)
    assert v.after_window(0.55, PROBE_S + 0.05) is None and v.rate == "2M"  # worse: back
    assert all(v.after_window(0.45, PROBE_S + 0.1 * k) is None for k in range(1, 20))
    assert parse_rate(rate_message("250k", trial=True)) == RateMove("250k", trial=True)
    assert parse_rate(RateMove("1M", keep=True).message()) == RateMove("1M", keep=True)
    assert parse_rate(rate_message("1M")[:-2] + b"\x07\x00") is None  # (no such rate)


def test_a_spike_that_set_off_a_failed_trial_is_not_the_next_ones_reference() -> None:
    """At the robust rate, one window spikes (the reverse channel lost ACKs for a while):
    the rate worsened, the faster one is tried at once and fails. The windows after it are
    as before the spike: no change of channel, so no trial before the doubled wait."""
    from longge.protocol.rate import PROBE_S, REF_WINDOWS, RateChooser, RateMove

    r = RateChooser("250k", 0.0)
    t = 0.0
    while t < 6.0:  # clean; the first trials of 1 Mbit/s fail (1.5 s, 3 s: the wait is 6 s)
        t += 0.2
        if r.after_window(0.0, t) is not None:
            assert r.after_window(1.0, t + 0.05) is None
            t += 0.05
    assert r.failed_probes == 2 and r.next_probe > t + 3 and r.windows_here > REF_WINDOWS
    assert r.after_window(0.3, t + 0.2) == RateMove("1M", trial=True)  # the spike: at once
    assert r.after_window(1.0, t + 0.25) is None and r.failed_probes == 3  # failed
    t += 0.25
    due = r.next_probe
    for k in range(1, 40):  # the channel as it was: no trial before the (doubled) wait
        move = r.after_window(0.0, t + 0.1 * k)
        assert move is None or t + 0.1 * k >= due, (k, move, r.why)
    assert due - t >= 2 * PROBE_S


def test_a_probe_fills_whole_frames_and_reads_as_its_trial() -> None:
    from longge.protocol.frame import PACKET_OVERHEAD
    from longge.protocol.rate import RateMove, parse_rate, probe_length, probe_message
    from longge.protocol.secure import OVERHEAD

    sealed = probe_length(OVERHEAD + PACKET_OVERHEAD, 31)
    assert (sealed + OVERHEAD + PACKET_OVERHEAD) % 31 == 0 and sealed >= 9
    assert probe_length(PACKET_OVERHEAD, 31) == 25  # (open: one frame)
    probe = probe_message("1M", sealed)
    assert len(probe) == sealed and parse_rate(probe) == RateMove("1M", trial=True)
    assert parse_rate(probe[:-1] + b"\x01") is None  # (padding is zeros)


def test_a_stream_filler_is_taken_and_announces_nothing() -> None:
    """Stream mode's fillers ride the ARQ, so one lost at a trial's rate is sent again at the
    rate the sender went back to: a filler that read as a rate's trial (a probe) took the
    receiver off that rate again (at 71 dB: 0.5-0.8 s without a packet per failed trial)."""
    from longge.protocol import Fragmenter, Reassembler
    from longge.protocol.adapt_stream import FILL_FRAMES, StreamAdaptation
    from longge.protocol.arq import ArqSender
    from longge.protocol.peer import Networks, PeerReceiver, PeerSender
    from longge.protocol.rate import parse_rate, rate_message

    nets = Networks(("0.0.0.0/0",))
    peer = PeerSender("b", b"addrb", nets, Fragmenter(31), None)
    rx = PeerReceiver("m", b"addrm", nets, Reassembler(1500), None)
    arq = ArqSender()
    arq.established = True  # (a session: the RESET's answer is not what is tested)
    StreamAdaptation()._fill(arq, peer, 2 * FILL_FRAMES, 0.0)
    frames = [arq.next_frame(0.0) for _ in range(arq.offered)]
    assert len(frames) >= 2 * FILL_FRAMES and all(frames)
    for f in frames:
        assert f is not None and rx.receive(f[1:], 1.0) is None
        assert rx.rate_heard is None
    assert rx.heard >= 2 and rx.counters.control_unknown == 0  # (whole packets, known)
    assert parse_rate(rate_message("1M", trial=True)[:-1] + b"\x03") is None


def test_the_receiver_ends_a_trial_not_kept_and_falls_back_when_nothing_comes() -> None:
    from longge.protocol.rate import FALLBACK_S, STARTUP_S, TRIAL_S, RateMove
    from longge.protocol.rate_follower import RateFollower

    trial, keep = RateMove("2M", trial=True), RateMove("2M", keep=True)
    f = RateFollower("1M", 0.0)
    assert f.announced(trial, 10.0) and f.rate == "2M"
    assert not f.tick(10.0, 10.0 + TRIAL_S / 2)
    assert f.tick(10.0, 10.0 + TRIAL_S) and f.rate == "1M"  # not kept: back
    assert not f.announced(keep, 10.2) and f.rate == "1M"  # (a keep too late: nothing)
    assert f.announced(trial, 20.0) and not f.announced(keep, 20.05)  # kept
    assert not f.tick(20.05, 20.0 + 2 * TRIAL_S) and f.rate == "2M"
    assert f.tick(20.05, 20.05 + FALLBACK_S) and f.rate == "250k"  # quiet: the robust rate
    assert f.stale_keeps == 1
    g = RateFollower("2M", 0.0)  # never heard: silence counts after STARTUP_S only
    assert not g.tick(None, FALLBACK_S + 0.1)
    assert g.tick(None, STARTUP_S) and g.rate == "250k"


def test_an_end_that_fell_back_tries_the_configured_rate_now_and_then_while_unheard() -> None:
    """At the robust rate with nothing heard (receiver) or acknowledged (sender) for SCAN_S:
    the configured rate for FALLBACK_S, then back, while nothing comes; heard, it stays. An
    end configured at the robust rate has nowhere else to look."""
    from longge.protocol.rate import FALLBACK_S, SCAN_S, STARTUP_S, RateChooser
    from longge.protocol.rate_follower import RateFollower

    f = RateFollower("2M", 0.0)
    assert f.tick(None, STARTUP_S) and f.rate == "250k"  # never heard: fallen back
    assert not f.tick(None, STARTUP_S + SCAN_S - 0.01)
    assert f.tick(None, STARTUP_S + SCAN_S) and f.rate == "2M" and f.scans == 1
    t = STARTUP_S + SCAN_S + FALLBACK_S
    assert f.tick(None, t) and f.rate == "250k"  # nothing there either: back
    assert not f.tick(t + 1.0, t + 1.0 + SCAN_S - 0.01)  # heard at 250k: it stays
    assert f.rate == "250k"
    assert not RateFollower("250k", 0.0).tick(None, 100.0)  # (nowhere else to look)

    c = RateChooser("2M", 0.0)
    c.fall_back(10.0)
    assert not c.scan_due(10.0, 10.0 + SCAN_S - 0.01)
    assert not c.scan_due(11.0, 10.0 + SCAN_S)  # (acknowledged since)
    assert c.scan_due(10.0, 10.0 + SCAN_S)
    c.scan(12.0)
    assert c.rate == "2M" and c.scans == 1 and not c.scan_due(0.0, 20.0)
    r = RateChooser("250k", 0.0)
    assert r.rate == "250k" and not r.scan_due(0.0, 100.0)


def test_a_stream_receivers_trial_lasts_while_it_hears_the_sender_at_the_rate() -> None:
    """Stream mode: the trial ends after the trial rate's STREAM_TRIAL_S without a packet
    (the time the sender stays silent after a trial that failed)."""
    from longge.protocol.rate import STREAM_TRIAL_S, RateMove
    from longge.protocol.rate_follower import RateFollower

    for rate, back in (("2M", "1M"), ("1M", "250k"), ("250k", "1M")):
        quiet = STREAM_TRIAL_S[rate]
        f = RateFollower(back, 0.0, stream=True)
        assert f.announced(RateMove(rate, trial=True), 5.0) and f.rate == rate
        heard = 5.0
        for k in range(1, 20):  # packets a bit less than ``quiet`` apart: it stays
            heard = 5.0 + 0.9 * quiet * k
            assert not f.tick(heard, heard + 0.8 * quiet) and f.rate == rate
        assert f.tick(heard, heard + quiet) and f.rate == back
    assert STREAM_TRIAL_S["2M"] < STREAM_TRIAL_S["250k"]


@pytest.fixture
def air_71db(tmp_path: os.PathLike[str]) -> Iterator[str]:
    """At the nodes' default power (low: −12 dBm), 71 dB leaves 2 Mbit/s 1 dB under its
    sensitivity (about 3 attempts in 4 fail) and 1 Mbit/s 2 dB over (about 1 in 100)."""
    with running_air(tmp_path, AirLoss(path_loss=71.0)) as path:
        yield path


def _rates(lk: Any) -> tuple[str, str]:
    """(the mobile's uplink rate, the base's RX radio's) as their status says."""
    m = lk.mobile.status()["tx"]["adapt"]["rate"]["rate"]
    b = lk.base.status()["rx"]["adapt"]["rate"]
    return m, b


def _until(lk: Any, want: tuple[str, str], seconds: float) -> tuple[str, str]:
    """Traffic up the link (rates are judged on it) until both ends are at ``want``."""
    got = _rates(lk)
    end = time.monotonic() + seconds
    tag = 10_000
    while got != want and time.monotonic() < end:
        tag += 20
        lk.send(lk.mtun, [ip_packet(1000, tag + i) for i in range(20)], to=lk.btun, timeout=0.5)
        got = _rates(lk)
    return got


def test_a_weak_path_moves_the_link_to_a_slower_rate_and_a_clean_one_back(
    air_71db: str, tmp_path: os.PathLike[str]
) -> None:
    """Both ends agree: the mobile's uplink to 1 Mbit/s, announced to the base's RX radio;
    with the path clean again (air set, live), back to 2 Mbit/s on trial; packets through
    both times."""
    from longge.air import control

    radio = RadioOptions(ard_us=250, arc=2, adapt=True)
    with make_link(air_71db, str(tmp_path), radio=radio) as lk:
        lk.send(lk.mtun, [ip_packet(1000, 1 + i) for i in range(100)], to=lk.btun, timeout=20)
        assert _until(lk, ("1M", "1M"), 5.0) == ("1M", "1M")
        got = lk.send(lk.mtun, [ip_packet(1000, 200 + i) for i in range(50)], to=lk.btun)
        assert len(got) >= 49
        control.apply(air_71db, {"path_loss": None})
        lk.send(lk.mtun, [ip_packet(1000, 300 + i) for i in range(100)], to=lk.btun, timeout=20)
        # (tried again once the wait, doubled by each failed trial, has passed)
        assert _until(lk, ("2M", "2M"), PROBE_MAX_WAIT_S + 4) == ("2M", "2M")
        why = lk.mobile.status()["tx"]["adapt"]["rate"]
        assert why["switches"] >= 2 and why["probes"] >= 1
        got = lk.send(lk.mtun, [ip_packet(1000, 400 + i) for i in range(50)], to=lk.btun)
        assert len(got) >= 49


def test_trials_of_a_dead_rate_cost_no_packet(tmp_path: os.PathLike[str]) -> None:
    """78 dB: only 250 kbit/s is above its sensitivity. The mobile tries 1 Mbit/s now and
    then (a rate never tried counts as clean); its probes fail, the data waits: every packet
    sent meanwhile arrives."""
    radio = RadioOptions(rate="250k", ard_us=500, arc=15, adapt=True)
    with (
        running_air(tmp_path, AirLoss(path_loss=78.0)) as path,
        make_link(path, str(tmp_path), radio=radio) as lk,
    ):
        sent, got = lk.send_for(6.0, 600)
        tx = lk.mobile.status()["tx"]
        rate = tx["adapt"]["rate"]
        assert rate["probes"] >= 1 and rate["failed_probes"] >= 1, (rate["why"], rate)
        assert rate["probe_frames"] >= 2 and rate["rate"] == "250k"
        assert sorted(got) == sorted(sent), (len(sent), len(got), tx, tx["adapt"])


def test_a_rate_that_dies_costs_the_packet_on_its_way_not_the_queue(
    tmp_path: os.PathLike[str],
) -> None:
    """2 Mbit/s on a clean path, 40 packets queued; the path goes to 78 dB (only 250 kbit/s
    works) while they go: the packet on its way meets MAX_RT and is lost, the rest wait
    (probes only) until both ends have fallen back, then arrive."""
    from longge.air import control

    with (
        running_air(tmp_path) as path,
        make_link(path, str(tmp_path), radio=RadioOptions(adapt=True)) as lk,
    ):
        lk.send(lk.mtun, [ip_packet(300, 1 + i) for i in range(20)], to=lk.btun)
        for i in range(40):
            lk.mtun.peer.send(ip_packet(1000, 100 + i))
        lk.collect(lk.btun, 0.05)  # (some on their way)
        control.apply(path, {"path_loss": 78.0})
        got = lk.collect(lk.btun, 6.0)
        tx = lk.mobile.status()["tx"]
        rate = tx["adapt"]["rate"]
        assert rate["rate"] == "250k" and rate["fallbacks"] >= 1, rate
        assert tx["packets_aborted"] <= 3 and len(got) >= 40 - 3 - 2, (tx, len(got))


def test_lost_rate_agreements_leave_both_ends_on_the_robust_rate_and_linked(
    air_71db: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every announcement dropped where it arrives (the receivers never switch): the sender
    switches alone, hears nothing acknowledged, falls back; the receiver, hearing nothing,
    falls back too: both at 250 kbit/s and packets through within a few FALLBACK_S."""
    from longge.protocol import rate

    monkeypatch.setattr(rate, "parse_rate", lambda packet: None)  # (the daemons fork)
    radio = RadioOptions(ard_us=250, arc=2, adapt=True)
    with make_link(air_71db, str(tmp_path), radio=radio) as lk:
        lk.send(lk.mtun, [ip_packet(1000, 1 + i) for i in range(60)], to=lk.btun, timeout=10)
        assert _until(lk, ("250k", "250k"), 4 * rate.FALLBACK_S + 1) == ("250k", "250k")
        assert lk.base.status()["rx"]["adapt"]["fallbacks"] >= 1
        got = lk.send_until_through(lk.mtun, lk.btun, 500, 900, seconds=3 * rate.FALLBACK_S)
        assert got


def test_a_light_direction_tries_a_faster_rate_soon_only_while_losing() -> None:
    """A direction that carries little (stream mode: the other's ACKs) and loses little at
    its rate tries a faster one only after PROBE_MAX_WAIT_S there (each failed trial costs
    the other direction its ACKs); losing LIGHT_Q or more, as soon as any direction would."""
    from longge.protocol.rate import (
        LIGHT_Q,
        PROBE_MAX_WAIT_S,
        PROBE_S,
        RateChooser,
        RateMove,
        stream_goodput,
    )

    calm = RateChooser("250k", 0.0, stream_goodput)
    calm.light = True
    assert all(calm.after_window(0.0, PROBE_S + 0.5 * k) is None for k in range(20))
    assert calm.after_window(0.0, PROBE_MAX_WAIT_S) == RateMove("1M", trial=True)
    lossy = RateChooser("250k", 0.0, stream_goodput)
    lossy.light = True
    assert lossy.after_window(LIGHT_Q + 0.3, PROBE_S) == RateMove("1M", trial=True)
    busy = RateChooser("250k", 0.0, stream_goodput)  # (not light: the wait alone)
    assert busy.after_window(0.0, PROBE_S) == RateMove("1M", trial=True)
