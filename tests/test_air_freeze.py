"""The air sits out its own stalls (a VM's vCPU held back by the host) by stopping its clock,
instead of running the missed frames all at once (see longge.air.server)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from test_sim_radio import pair, receive_all

from longge.air import native
from longge.air.server import FREEZE_AFTER_NS, AirServer
from longge.air.wire import query
from longge.radiobench import start_air


class _Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns


def test_small_lateness_is_caught_up_a_stall_stops_the_clock(tmp_path: Path) -> None:
    clock = _Clock()
    air = AirServer(str(tmp_path / "air.sock"), clock=clock)
    due = clock.ns
    clock.ns += FREEZE_AFTER_NS // 2  # late, but less than the limit: catch up
    assert air.air_time(due) == clock.ns
    assert air.freezes == 0
    clock.ns += 50_000_000  # a 50 ms stall: the event happens at its time
    due = clock.ns - 50_000_000
    assert air.air_time(due) == due
    assert air.freezes == 1 and air.frozen_ns == 50_000_000
    clock.ns += 2_000  # and the clock goes on from there
    assert air.air_time() == due + 2_000
    assert air.air_time(None) == air.air_time(due + 10**9)  # nothing due: no freezing
    stats = air.stats()
    assert stats["freezes"] == 1 and stats["frozen_ms"] == 50.0
    assert stats["lag"]["max_us"] >= 50_000


def test_a_stopped_air_resumes_where_it_was(tmp_path: Path) -> None:
    """A frame retried for nobody (250 kbit/s, ARD 4000 µs, ARC 15: ~90 ms to MAX_RT); the air is
    stopped for 200 ms in the middle. Catching up would report MAX_RT right after the stop;
    with its clock stopped the air still owes the remaining retries."""
    path = str(tmp_path / "air.sock")
    proc = start_air(path)
    try:
        tx, _ = pair(path, rate="250k", ard_us=4000, arc=15)
        tx.stop_listening(b"Nobdy")
        start = time.monotonic()
        assert tx.write_fast(b"x" * 32)
        time.sleep(0.01)
        os.kill(proc.pid, signal.SIGSTOP)  # the host takes the air's CPU for 200 ms
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGCONT)
        assert not tx.tx_standby()  # MAX_RT in the end
        took = time.monotonic() - start
        assert tx.get_arc() == 15
        assert took >= 0.25, f"MAX_RT after {took:.3f} s: the air ran the stall's retries at once"
        stats = query(path)
        assert stats["freezes"] >= 1
        assert 150 <= stats["frozen_ms"] <= 2000
    finally:
        native.stop(proc)


def test_a_receiving_host_that_stalls_costs_time_not_frames(air_path: str) -> None:
    """The host reads nothing for 60 ms (a stalled vCPU) while 20 frames are sent with ARC 2.
    On the chip the FIFO would overflow into MAX_RT; the compiled air holds its clock until
    the host reads (host_stalls), so every frame arrives and none hits MAX_RT."""
    tx, rx = pair(air_path)
    payloads = [bytes([i]) * 32 for i in range(20)]
    sent = 0
    stall_until = time.monotonic() + 0.06
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while len(got) < len(payloads) and time.monotonic() < deadline:
        while sent < len(payloads) and tx.is_fifo(True) != 2:
            assert tx.write_fast(payloads[sent])
            sent += 1
        assert tx.what_happened()[1] is False, "MAX_RT: the air ran on past a stalled host"
        if time.monotonic() < stall_until:
            time.sleep(0.001)  # the receiving host is held back: it reads nothing
            continue
        while rx.available():
            got.append(bytes(rx.read()))
        rx.wait(0.005)
    assert got == payloads
    stats = query(air_path)
    assert stats["host_stalls"] >= 1 and stats["host_stalled_ms"] > 10
    assert stats["air"]["radios"]["rx"].get("rx_fifo_full", 0) == 0


def test_a_full_rx_fifo_that_no_frame_heads_for_holds_nothing(air_path: str) -> None:
    """A receiver whose host has stopped reading with its FIFO full (3 frames) holds the air
    only when a frame is about to land in it: meanwhile a link on another channel runs as it
    would (no hold, no host given up), and then a fourth frame to the full FIFO is held for
    and lands once the host reads."""

    a_tx, a_rx = pair(air_path, prefix="a-", channel=40)
    b_tx, b_rx = pair(air_path, prefix="b-", channel=90)
    for i in range(3):
        assert a_tx.write(bytes([i]) * 32)  # a's FIFO full, its host reads nothing yet
    got = []
    for i in range(20):  # one frame at a time: b's own FIFO never fills
        assert b_tx.write(bytes([i]) * 32)
        got += receive_all(b_rx, 1)
    assert got == [bytes([i]) * 32 for i in range(20)]
    stats = query(air_path)
    assert (stats["host_stalls"], stats["host_gave_up"]) == (0, 0)
    # a fourth frame for the full FIFO waits for the host's read instead of overflowing
    assert a_tx.write_fast(b"\x03" * 32)
    time.sleep(0.02)
    assert receive_all(a_rx, 4) == [bytes([i]) * 32 for i in range(4)]
    stats = query(air_path)
    assert stats["host_stalls"] >= 1
    assert stats["air"]["radios"]["a-rx"].get("rx_fifo_full", 0) == 0
