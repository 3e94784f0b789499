"""``adapt = true`` on a base with several mobiles (docs/design.md §5, "A base with several
mobiles"): the base's one RX radio hears all its mobiles at one rate, so nobody in the cell
adapts a rate (or the power that is judged with it); each sender adapts its retries. A
mobile learns that it is in such a cell from its base's first grant. One that fell back to
the robust rate before (started or restarted out of reach) finds the base at the configured
rate again (rate.SCAN_S). The daemons over in-memory TUNs and the emulated air
(test_multinode.py's star)."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import running_air
from test_multinode import (
    N,
    Star,
    base_config,
    in_mode,
    mobile_config,
    mobile_ip,
    packet,
    star,
)

from longge.air import control
from longge.air.loss import AirLoss
from longge.config import NodeConfig
from longge.protocol.rate import ROBUST_RATE


def adapting(cfg: NodeConfig, mode: str) -> NodeConfig:
    cfg = in_mode(cfg, mode)
    return replace(cfg, radio=replace(cfg.radio, adapt=True))


def cell(air: str, tmp: Path, mode: str) -> tuple[list[NodeConfig], NodeConfig]:
    mobiles = [
        replace(adapting(mobile_config(tmp, air, i), mode), air_name=f"mobile{i + 1}")
        for i in range(N)
    ]
    return mobiles, adapting(base_config(tmp, air), mode)


def rx_rate(st: dict[str, Any]) -> str | None:
    """The rate a node's RX radio follows (None: it follows none: configured)."""
    adapt = st["rx"].get("adapt")
    return None if adapt is None else str(adapt["rate"])


def no_rate_adapted(s: Star) -> None:
    """Nobody in the cell adapts a rate: no chooser, no follower; retries adapt (ESB)."""
    for node in [s.base, *s.mobiles]:
        st = node.status()
        assert rx_rate(st) is None, st["rx"].get("adapt")
        tx = st["tx"].get("adapt")
        assert tx is None or ("rate" not in tx and "power" not in tx), tx


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_cell_that_adapts_keeps_its_rate_and_serves_every_mobile(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """adapt on at the base and the three mobiles: the mobiles hear grants and adapt no rate
    (before, a mobile out of reach for a moment fell back to 250 kbit/s, and the base, at
    2 Mbit/s, never heard it again); every packet arrives both ways."""
    mobiles, base = cell(air_path, tmp_path, mode)
    with star(air_path, tmp_path, mobiles, base) as s:
        assert s.heard(), s.base.status()["rx"]
        s.run(1.0)
        control.apply(air_path, {"path_loss": 150.0}, node="mobile3")  # (out of reach)
        s.run(2.5)  # (past the fallback's time)
        control.apply(air_path, {"path_loss": None}, node="mobile3")
        s.each_gets_its_own(53)
        ups, got = s.all_send_at_once(10)
        for i in range(N):
            mine = [p for p in got if p in ups[i]]
            assert mine == ups[i] or (mode == "esb" and len(mine) >= 9), (i, len(mine))
        s.run(0.6)  # (the radio processes send their counters every 0.25 s)
        no_rate_adapted(s)
        if mode == "esb":
            assert all("arc" in m.status()["tx"]["adapt"] for m in s.mobiles)


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_mobiles_that_fell_back_find_their_base_again(tmp_path: Path, mode: str) -> None:
    """The mobiles start out of the base's reach (150 dB): before any grant they fall back
    to 250 kbit/s, both radios. The path clears: they listen and send at the configured rate
    now and then (rate.SCAN_S), hear the base's grants there, and stay (before: stranded at
    250 kbit/s for good)."""
    with running_air(tmp_path, AirLoss(path_loss=150.0)) as air:
        mobiles, base = cell(air, tmp_path, mode)
        with star(air, tmp_path, mobiles, base) as s:
            s.run(4.0)  # (past STARTUP_S: each mobile has fallen back)
            assert [rx_rate(m.status()) for m in s.mobiles] == [ROBUST_RATE] * N
            control.apply(air, {"path_loss": None})
            t0 = time.monotonic()
            assert s.heard(timeout=15.0), [m.status()["rx"].get("adapt") for m in s.mobiles]
            took = time.monotonic() - t0
            s.each_gets_its_own(29)
            s.run(0.6)
            no_rate_adapted(s)
            scans = [m.status()["tx"]["adapt"] for m in s.mobiles]
            assert took < 15.0, (took, scans)


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_mobile_that_stops_reading_for_a_moment_costs_few_packets(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """Mobile 3's RX process held (SIGSTOP) for 0.2 s while 12 packets for it, and for it
    alone, wait at the base: its full RX FIFO acknowledges nothing. Stream mode's ARQ brings
    all 12, in order. In ESB each frame that meets MAX_RT gives its packet up, so the base,
    from the second MAX_RT in a row, waits for the mobile's backoff even with no one else to
    serve (before, it sent packet after packet into the full FIFO: 0 of 12 arrived, 2 runs);
    what arrives comes in order, and what is lost was refused by the full FIFO (the air
    counts it)."""
    mobiles, base = cell(air_path, tmp_path, mode)
    with star(air_path, tmp_path, mobiles, base) as s:
        assert s.heard(), s.base.status()["rx"]
        s.run(1.0)
        before = s.fifo_full()
        rx = next(w for w in s.mobiles[2].workers if w.which == "rx").proc
        assert rx is not None and rx.pid is not None
        mine = [packet("10.24.0.1", mobile_ip(2), 900, 7000 + k) for k in range(12)]
        for p in mine:
            s.btun.peer.send(p)
        os.kill(rx.pid, signal.SIGSTOP)
        try:
            s.run(0.2)
        finally:
            os.kill(rx.pid, signal.SIGCONT)
        got = s.collect(s.mtuns[2], len(mine), 10)
        refused = s.fifo_full().get("mobile3-rx", 0) - before.get("mobile3-rx", 0)
        tx = s.base.status()["tx"]["peers"]["mobile3"]
        assert got == [p for p in mine if p in got], (refused, tx)
        if mode == "stream":
            assert got == mine, (refused, tx)
        else:
            assert len(got) >= 4, (len(got), refused, tx)
            assert got == mine or refused > 0, (len(got), refused, tx)
