"""Retries chosen live (``adapt``): the adapter's rules, the adapter against the air model on
a virtual clock (exact: goodput against every fixed setting), and two daemons that adapt on a
lossy emulated air."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace

import pytest
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
from longge.radio.options import RadioOptions
from longge.radiobench import start_air

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
    path = os.path.join(str(tmp_path), "air.sock")
    proc = start_air(path, AirLoss(per=0.1))
    try:
        yield path
    finally:
        from longge.air import native

        native.stop(proc)


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
        adapt = st["tx"]["adapt"]
        assert adapt["ard_us"] == 250 and 5 <= adapt["arc"] <= ARC_MAX
        assert 0.1 < adapt["q"] < 0.35  # 1 − 0.9² = 0.19 per attempt
        assert adapt["why"] and adapt["decisions"] >= 1
        assert st["radio"]["adapt"] is True
        assert "adapt  ARD 250 µs ARC" in node_text(st)
        assert lk.mobile.set_radio({"adapt": False})["ok"]
        lk.pump(1.5)
        assert lk.mobile.status()["tx"].get("adapt") is None
