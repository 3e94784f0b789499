"""Emulated radios through the real-time air server: pyrf24 semantics over a socket. Every
test runs against both servers: the compiled one (emulator/) and the Python fallback."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator

import pytest

from longge.air import native
from longge.air.wire import query
from longge.radio.constants import RF24_2MBPS, RF24_250KBPS
from longge.radio.options import RadioOptions, configure
from longge.radio.sim import SimRadio

ADDR = b"1Node"


@pytest.fixture(params=["compiled", "python"])
def air_path(
    request: pytest.FixtureRequest, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    if request.param == "python":
        monkeypatch.setenv("LONGGE_AIR_SERVER", "python")
    path = os.path.join(str(tmp_path), "air.sock")
    proc = native.start(path)
    try:
        yield path
    finally:
        native.stop(proc)


def pair(
    air_path: str, rx_class: type[SimRadio] = SimRadio, prefix: str = "", **kw: object
) -> tuple[SimRadio, SimRadio]:
    """A sender and a listening receiver on the air (named ``prefix`` tx / rx), set up with
    RadioOptions(**kw)."""
    opts = RadioOptions(**kw)  # type: ignore[arg-type]
    tx = SimRadio(air=air_path, name=f"{prefix}tx")
    rx = rx_class(air=air_path, name=f"{prefix}rx")
    assert tx.begin() and rx.begin()
    configure(tx, opts)
    configure(rx, opts)
    rx.open_rx_pipe(1, ADDR)
    rx.start_listening()
    tx.stop_listening(ADDR)
    time.sleep(0.01)  # RX settles (130 µs) in air time
    return tx, rx


def receive_all(rx: SimRadio, count: int, timeout: float = 5.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        rx.wait(0.05)
        while rx.available():
            got.append(bytes(rx.read()))
    return got


def test_begin_fails_cleanly_without_an_air(tmp_path: object) -> None:
    radio = SimRadio(air="/nonexistent/air.sock")
    assert radio.begin() is False
    assert radio.is_chip_connected is False
    assert radio.write(b"x") is False  # no crash, no hang
    assert radio.failure_detected > 0


def test_write_is_acknowledged_and_read_returns_the_payload(air_path: str) -> None:
    tx, rx = pair(air_path)
    payloads = [bytes([i]) * (1 + i % 32) for i in range(50)]
    got = []
    for p in payloads:
        assert tx.write(p) is True
        assert tx.get_arc() == 0
        got += receive_all(rx, 1)
    assert got == payloads


def test_a_receiver_that_does_not_read_stops_acknowledging(air_path: str) -> None:
    """RX FIFO holds 3; a full FIFO is not acknowledged, so the 4th write hits MAX_RT."""
    tx, rx = pair(air_path)
    assert [tx.write(b"x%d" % i) for i in range(4)] == [True, True, True, False]
    assert rx.rx_fifo_full
    assert query(air_path)["air"]["radios"]["rx"]["rx_fifo_full"] == 3  # ARC 2: 3 attempts


def test_write_fast_and_tx_standby_stream_many_frames(air_path: str) -> None:
    tx, rx = pair(air_path)
    got: list[bytes] = []

    def drain_while(busy: Callable[[], bool]) -> None:
        """Read while the air drains the TX FIFO. A reader held back by a busy machine lets
        the RX FIFO fill (the Python air does not wait for it): the next payload then meets
        MAX_RT and blocks the FIFO, and is sent again as RF24's callers do (reuse_tx). A FIFO
        that stays blocked otherwise is a lost TX result: fail, naming the air's counters."""
        deadline = time.monotonic() + 30
        while busy():
            got.extend(receive_all(rx, 1, timeout=0.01))
            if tx.what_happened()[1]:
                tx.reuse_tx()
            assert time.monotonic() < deadline, query(air_path)["air"]["radios"]

    for i in range(300):
        drain_while(lambda: tx.is_fifo(True) == 2)  # full
        assert tx.write_fast(i.to_bytes(2, "big"))
    drain_while(lambda: not tx.is_fifo(True, True))
    assert tx.tx_standby() is True
    got += receive_all(rx, 300 - len(got))
    assert [int.from_bytes(g, "big") for g in got] == list(range(300))


def test_write_without_a_listener_fails_after_max_rt_and_flushes(air_path: str) -> None:
    tx = SimRadio(air=air_path, name="lonely")
    assert tx.begin()
    configure(tx, RadioOptions(arc=3))
    tx.stop_listening(b"Nobdy")
    assert tx.write(b"hello") is False
    assert tx.get_arc() == 3
    assert tx.is_fifo(True, True)  # flushed: empty
    stats = query(air_path)["air"]["radios"]["lonely"]
    assert stats["max_rt"] == 1 and stats["attempts"] == 4


def test_write_fast_returns_false_on_max_rt_and_reuse_tx_retries(air_path: str) -> None:
    tx = SimRadio(air=air_path, name="t2")
    assert tx.begin()
    configure(tx, RadioOptions(arc=0))
    tx.stop_listening(b"Nobdy")
    results = [tx.write_fast(b"a") for _ in range(4)]
    assert results[:3] == [True, True, True]
    assert results[3] is False  # FIFO full and MAX_RT raised
    assert tx.what_happened()[1] is True
    tx.reuse_tx()
    assert tx.tx_standby(10) is False  # retried for ~105 ms, then flushed
    assert tx.is_fifo(True, True)


def test_multicast_needs_dynamic_ack(air_path: str) -> None:
    tx, rx = pair(air_path, auto_ack=True)
    assert tx.write(b"m", multicast=True) is True
    assert receive_all(rx, 1) == [b"m"]
    stats = query(air_path)["air"]["radios"]["rx"]
    assert stats.get("acks_sent", 0) == 0  # configure() enabled dynamic ack: NO_ACK honoured


def test_settings_read_back(air_path: str) -> None:
    r = SimRadio(air=air_path)
    assert r.begin()
    r.data_rate = RF24_250KBPS
    r.channel = 200  # RF24 clamps to 125
    r.set_retries(3, 7)
    assert r.data_rate == RF24_250KBPS and r.channel == 125
    r.data_rate = RF24_2MBPS
    assert int(r.data_rate) == int(RF24_2MBPS)
    r.payload_size = 99
    assert r.payload_size == 32


def test_static_payloads_pad_to_payload_size(air_path: str) -> None:
    tx, rx = pair(air_path)
    for r in (tx, rx):
        r.dynamic_payloads = False
        r.payload_size = 8
    assert tx.write(b"abc")
    assert receive_all(rx, 1) == [b"abc" + bytes(5)]


def test_air_counts_garbage_and_keeps_serving(air_path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(2)
        s.connect(air_path)
        for junk in [b"T\x00" + bytes(40), b"Z", b"C{not json", b"H" + b"\xff\xfe"]:
            s.send(junk)
        s.send(b"Cjunk")
        replies = [s.recv(4096) for _ in range(4)]
    assert all(r[:1] in (b"e", b"h") for r in replies)
    assert query(air_path)["bad_messages"] >= 3
    tx, rx = pair(air_path)  # still works
    assert tx.write(b"ok") and receive_all(rx, 1) == [b"ok"]


def test_radio_whose_peer_vanishes_sees_max_rt_not_a_hang(air_path: str) -> None:
    tx, rx = pair(air_path, arc=2)
    assert tx.write(b"1")
    rx.close()
    time.sleep(0.05)
    start = time.monotonic()
    assert tx.write(b"2") is False
    assert time.monotonic() - start < 1.0


def test_a_frame_written_while_the_air_sleeps_counts_from_when_it_was_written(
    air_path: str,
) -> None:
    """In the last 0.6 ms before its next event the compiled air does not watch its sockets
    (lazy reading) and applies what arrived meanwhile at the time the kernel stamped it as sent.
    250 kbit/s without ACK: a frame is 1.3 ms on air, and a second one written 0.3 ms before
    the first ends must follow it without settling again. Counted from when the air read it
    (its wake-up at the first frame's end) it would find the FIFO empty: a settle every time.
    A busy machine can delay the second write past the end, so one chained pair in up to 20
    tries is asked (none ever chains when stamps are missing)."""
    from longge.chip.datasheet import T_SETTLE_NS, time_on_air_ns

    tx, rx = pair(air_path, rate="250k", auto_ack=False)
    ends_after_s = (T_SETTLE_NS + time_on_air_ns(32, "250k", 5, 2)) / 1e9
    chained = 0
    for _ in range(20):
        before = query(air_path)["air"]["radios"]["tx"].get("settles", 0)
        start = time.monotonic()
        assert tx.write_fast(b"a" * 32)
        while time.monotonic() < start + ends_after_s - 0.0003:
            pass  # a sleep would wake too late as often as not
        assert tx.write_fast(b"b" * 32)
        got = []  # (both frames, however long a busy machine keeps the air from sending them:
        deadline = time.monotonic() + 5.0  # 10 ms was not enough beside two CPU hogs)
        while len(got) < 2 and time.monotonic() < deadline:
            if rx.available():
                got.append(rx.read())
            else:
                time.sleep(0.001)
        assert [bytes(p[:1]) for p in got] == [b"a", b"b"]
        chained += query(air_path)["air"]["radios"]["tx"].get("settles", 0) - before == 1
        if chained:
            break
    assert chained, "a frame written before the one on air ended was taken in after it"


class SampledEarly(SimRadio):
    """A chip on an IRQ pin whose STATUS byte after read() was sampled before the read's own
    RX_DR clear landed: it says the RX FIFO is empty while a frame that came in between waits
    (and left no edge)."""

    irq_edges = 0  # on an IRQ pin (daemon.child.on_irq)

    def get_status_flags(self) -> int:
        return 0b1110  # RX_P_NO 7: "empty"


def test_an_empty_status_after_read_is_confirmed_on_an_irq_pin(air_path: str) -> None:
    """A receiver on an IRQ pin sleeps without looking again once it has read the FIFO empty,
    so "empty" must come from a look after the clear: next_pipe asks available() then."""
    from longge.daemon.child import next_pipe

    tx, rx = pair(air_path, SampledEarly, rate="2M")
    for i in range(2):
        assert tx.write_fast(bytes([i]) * 8)
    deadline = time.monotonic() + 5
    while len(rx._rx) < 2 and time.monotonic() < deadline:
        rx.wait(0.05)
        rx.is_fifo(False)  # (takes in what the air sent)
    assert len(rx._rx) == 2
    assert bytes(rx.read()) == bytes(8)
    assert next_pipe(rx) == 1  # the status said empty; the look after it found the second frame
    assert bytes(rx.read()) == bytes([1]) * 8
    assert next_pipe(rx) == 7  # now it is empty
    rx.irq_edges = None  # off the pin (the emulated air's socket wakes the process instead)
    assert SimRadio.get_status_flags(rx) >> 1 & 7 == 7


def test_malformed_messages_from_the_chips_side_are_counted_and_dropped() -> None:
    """What the air (or a modem's line) sends is checked before it is taken in: an r without a
    payload, for pipe 7 or with 33 bytes, a t of the wrong length (once an IndexError or a
    struct.error in the radio process's hot path)."""
    radio = SimRadio(air="/nonexistent/air.sock")
    for msg in (b"r", b"r\x00", b"r\x07abc", b"r\x00" + bytes(33), b"t", b"t" + bytes(20)):
        radio._on_message(msg)
    assert radio.bad_messages == 6
    assert not radio.available()  # nothing was taken for a frame
    radio._on_message(b"r\x01abc")
    assert radio.read() == bytearray(b"abc") and radio.bad_messages == 6
