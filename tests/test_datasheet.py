"""The formulas against the datasheet's own numbers (nRF24L01+ PS v1.0) and docs/design.md §2."""

from __future__ import annotations

import pytest

from longge.chip.datasheet import LinkTiming, bits_on_air, time_on_air_ns


def test_bits_on_air_follow_the_packet_format() -> None:
    # preamble 1 + address 5 + payload 32 + CRC 2 bytes, plus the 9-bit control field
    assert bits_on_air(32) == 8 * 40 + 9
    assert bits_on_air(0, address_width=3, crc_len=1) == 8 * 5 + 9


@pytest.mark.parametrize(
    ("rate", "data_us", "ack_us", "cycle_us"),
    [("2M", 164.5, 36.5, 461), ("1M", 329, 73, 662), ("250k", 1316, 292, 1868)],
)
def test_design_table(rate: str, data_us: float, ack_us: float, cycle_us: float) -> None:
    t = LinkTiming(rate)
    assert t.toa_data_ns == data_us * 1000
    assert t.toa_ack_ns == ack_us * 1000
    assert t.ack_cycle_ns == cycle_us * 1000
    assert time_on_air_ns(32, rate) == t.toa_data_ns


def test_bounds_match_design_table() -> None:
    assert LinkTiming("2M").bound_bps(True) == pytest.approx(555e3, rel=0.002)
    assert LinkTiming("2M").bound_bps(False) == pytest.approx(1556e3, rel=0.001)
    assert LinkTiming("1M").bound_bps(True) == pytest.approx(387e3, rel=0.002)
    assert LinkTiming("250k").bound_bps(False) == pytest.approx(194.5e3, rel=0.001)


def test_retry_trade_off_example_of_design_md() -> None:
    short = LinkTiming("2M", ard_us=250, arc=2)
    long = LinkTiming("2M", ard_us=2500, arc=15)
    assert short.expected_goodput_bps(0.1) == pytest.approx(505e3, rel=0.005)
    assert long.expected_goodput_bps(0.1) == pytest.approx(338e3, rel=0.005)
    assert short.residual_loss(0.1) == pytest.approx(1e-3)
    assert long.residual_loss(0.1) == pytest.approx(1e-16)
    # Without loss the model is the bound.
    assert short.expected_goodput_bps(0.0) == pytest.approx(short.bound_bps(True))


def test_both_ways_in_stream_mode_each_channel_also_carries_the_other_directions_acks() -> None:
    from longge.measure.model import udp_goodput_both_ways_bps, udp_goodput_bps
    from longge.protocol.frame import PACKET_OVERHEAD
    from longge.protocol.secure import OVERHEAD
    from longge.radio.options import RadioOptions

    stream = RadioOptions(mode="stream")
    one = udp_goodput_bps(stream, 1400, OVERHEAD)
    both = udp_goodput_both_ways_bps(stream, 1400, OVERHEAD)
    # by hand: the packet in 30-byte slices (32 - LongGe header - ARQ byte); an ACK with
    # nothing missing is 4 bytes, 8·(1 + 5 + 4 + 2) + 9 = 105 bits = 52.5 µs at 2 Mbit/s,
    # one for every 16 frames of the other direction
    frames = -(-(1400 + 28 + PACKET_OVERHEAD + OVERHEAD) // 30)
    assert 1400 * 8e9 / both == pytest.approx(1400 * 8e9 / one + frames * 52_500 / 16)
    assert 0.97 < both / one < 0.99
    esb = RadioOptions()  # the chips' ACKs are in the one-way figure already
    assert udp_goodput_both_ways_bps(esb, 1400, OVERHEAD) == udp_goodput_bps(esb, 1400, OVERHEAD)


def test_a_run_loading_both_ways_is_compared_with_the_both_ways_bound() -> None:
    """tTest/lTest --bidir record (context.json) and report against each direction's bound
    with both loaded, from the radio settings the daemon's status gives."""
    import dataclasses

    from longge.measure.link import model_context
    from longge.measure.model import udp_goodput_both_ways_bps, udp_goodput_bps
    from longge.protocol.secure import OVERHEAD
    from longge.radio.options import RadioOptions

    stream = RadioOptions(mode="stream")
    status = dataclasses.asdict(stream)
    one = model_context(status, 1400, OVERHEAD)
    both = model_context(status, 1400, OVERHEAD, both_ways=True)
    assert one["model_capacity_bps"] == udp_goodput_bps(stream, 1400, OVERHEAD)
    assert both["model_capacity_bps"] == udp_goodput_both_ways_bps(stream, 1400, OVERHEAD)
    assert both["model_capacity_bps"] < one["model_capacity_bps"]
    assert "both loaded at once" in both["model_note"]
    assert "both loaded" not in one["model_note"]
