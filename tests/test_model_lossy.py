"""The lossy model (measure/model.py) held to the emulated air (air/model.py, the executable
specification), on its virtual clock: packets of F frames sent through two emulated radios,
the rest of a packet dropped at its first MAX_RT as the daemon does, at several (per, ack_per,
burst, ARD, ARC, rate) points, loss-free ones included. The model's capacity and loss floor
must be what the air gives: tTest, lTest and tune print that model as the bound."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import replace

import pytest

from longge.air.loss import LossModel, LossSpec
from longge.air.model import Air, Outcome, RadioRegisters, RxFrame, TxResult
from longge.measure.model import IP_UDP_HEADERS, esb_frame_stats, lossy_model
from longge.protocol.frame import HEADER_LEN, PACKET_OVERHEAD
from longge.radio.options import RadioOptions

ADDR = b"Node1"
LENGTH = 1400
OVERHEAD = 24


def regs(opts: RadioOptions) -> RadioRegisters:
    return RadioRegisters(
        channel=40,
        rate=opts.rate,
        dynamic_payloads=True,
        dynamic_ack=True,
        ard_step=opts.ard_us // 250 - 1,
        arc=opts.arc,
    )


def frame_sizes(opts: RadioOptions) -> list[int]:
    """The frames of one LENGTH-byte datagram on the air (LongGe's header byte each)."""
    stream = LENGTH + IP_UDP_HEADERS + PACKET_OVERHEAD + OVERHEAD
    step = opts.payload - HEADER_LEN
    return [HEADER_LEN + min(step, stream - i) for i in range(0, stream, step)]


def send_packets(
    opts: RadioOptions, loss: LossSpec, packets: int, seed: int = 7
) -> tuple[float, float, float, float]:
    """(UDP payload bit/s, share of datagrams lost, residual loss per frame, failed attempts
    per frame) with the TX FIFO kept full and each MAX_RT ending its datagram: the FIFO
    flushed, the rest of that datagram dropped, the next one's frames written again (as
    radio_tx does)."""
    air = Air(LossModel(loss, seed=seed))
    tx, rx = air.attach("tx"), air.attach("rx")
    air.configure(tx, replace(regs(opts), tx_address=ADDR), 0)
    air.configure(rx, replace(regs(opts), rx_pipes={1: ADDR}), 0)
    air.set_listening(rx, True, 0)
    sizes = frame_sizes(opts)
    queue = [(p, f) for p in range(packets) for f in range(len(sizes))]
    nxt = 0  # next frame of the queue to write
    fifo: deque[int] = deque()  # frames written, oldest first
    lost: set[int] = set()
    end = done = failed = max_rt = 0

    def fill(t: int) -> None:
        nonlocal nxt
        while nxt < len(queue) and len(fifo) < 3:
            p, f = queue[nxt]
            air.submit(tx, bytes([f, p % 256]) + bytes(sizes[f] - 2), False, t)
            fifo.append(nxt)
            nxt += 1

    fill(0)
    while (t := air.next_event()) is not None:
        for out in air.advance(t):
            if isinstance(out, TxResult):
                end = t
                done += 1
                head = fifo.popleft()
                failed += out.arc_count
                if out.outcome is Outcome.MAX_RT:
                    failed += 1
                    max_rt += 1
                    p = queue[head][0]
                    lost.add(p)
                    air.flush_tx(tx, t)
                    fifo.clear()
                    nxt = head + 1
                    while nxt < len(queue) and queue[nxt][0] == p:
                        nxt += 1
                fill(t)
            elif isinstance(out, RxFrame):
                air.consumed(rx, 1)
    delivered = packets - len(lost)
    return delivered * LENGTH * 8 * 1e9 / end, len(lost) / packets, max_rt / done, failed / done


POINTS = [
    # (rate, ARD µs, ARC, per, ack_per, burst)
    ("2M", 250, 2, 0.0, 0.0, 1.0),
    ("1M", 500, 5, 0.0, 0.0, 1.0),
    ("2M", 250, 2, 0.05, 0.05, 1.0),
    ("2M", 250, 2, 0.1, 0.1, 1.0),
    ("2M", 2500, 2, 0.1, 0.1, 1.0),
    ("2M", 250, 15, 0.1, 0.1, 1.0),
    ("1M", 500, 3, 0.1, 0.0, 1.0),
    ("250k", 1500, 2, 0.05, 0.02, 1.0),
    ("2M", 250, 2, 0.05, 0.05, 4.0),
    ("2M", 1000, 5, 0.1, 0.05, 8.0),
]


@pytest.mark.parametrize(("rate", "ard_us", "arc", "per", "ack_per", "burst"), POINTS)
def test_the_lossy_model_is_what_the_air_gives(
    rate: str, ard_us: int, arc: int, per: float, ack_per: float, burst: float
) -> None:
    opts = RadioOptions(rate=rate, ard_us=ard_us, arc=arc)
    loss = LossSpec(data_per=per, ack_per=ack_per, burst=burst)
    packets = 400 if rate == "250k" else 1500
    if per == ack_per == 0.0:
        packets = 200  # (exact: no sampling error to average out)
    # bursty losses vary far more from run to run (a run holds fewer bursts than frames):
    # the mean of four seeds
    seeds = range(4) if burst > 1 else range(1)
    runs = [send_packets(opts, loss, packets, seed) for seed in seeds]
    bps, lost, r_air, failed_air = (sum(x) / len(runs) for x in zip(*runs, strict=True))
    capacity, floor = lossy_model(opts, per, ack_per, burst, LENGTH, OVERHEAD)
    r, failed = esb_frame_stats(opts, per, ack_per, burst)
    frames = len(frame_sizes(opts))
    if per == ack_per == 0.0:
        # loss-free: the datasheet's ack cycles, to the nanosecond (the last frame shorter)
        assert lost == 0.0 and floor == 0.0
        assert bps == pytest.approx(capacity, rel=1e-6)
        return
    # per frame, from tens of thousands of frames: the chain's figures within their sampling
    # error (bursts: a few per cent)
    n = packets * frames * len(runs)
    events = failed * n
    assert failed_air == pytest.approx(failed, rel=4 * math.sqrt(burst / events) + 0.01)
    assert abs(r_air - r) <= 4 * math.sqrt(r * (1 - r) / n) * burst + 1e-4
    # per datagram: the floor within its binomial error (bursts: frames of a datagram
    # share their fate, so a wider one), the capacity within 3 % (bursts 4 %)
    spread = 4 * math.sqrt(max(floor * (1 - floor), 1e-4) / (packets * len(runs))) * burst
    assert abs(lost - floor) <= spread + 0.005
    assert bps == pytest.approx(capacity, rel=0.03 if burst == 1 else 0.04)
