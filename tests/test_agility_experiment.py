"""Experiment agility's arithmetic (longge/measure/agility_experiment.py) on made-up slices:
the time back to 0.9 of the clean rate, the outage, each phase's share, its moves, and the
verdict; the Wi-Fi channel that covers a pair of nRF channels."""

from __future__ import annotations

import math

from longge.air.wire import wifi_centre
from longge.measure import agility_experiment as ag

CLEAN_BPS = 400_000.0


def slices(t0: float, t1: float, rate: float) -> list[list[float]]:
    n = round((t1 - t0) / ag.SLICE_S)
    return [[t0 + (i + 1) * ag.SLICE_S, rate * ag.SLICE_S / 8, 0, 0] for i in range(n)]


def moved(n: int, ago: float, what: str) -> dict[str, object]:
    return {"uplink": 38, "downlink": 0, "recent": [[n, ago, what]]}


def test_a_switch_s_time_back_outage_share_and_moves() -> None:
    none: dict[str, object] = {"uplink": 76, "downlink": 81}
    s = slices(0, 10, CLEAN_BPS)
    s += slices(10, 11.5, 0.0) + slices(11.5, 20, CLEAN_BPS)  # (1.5 s out after the switch)
    bounds = [
        ("clean", 0.0, 10.0, none, none),
        ("wifi", 10.0, 20.0, none, moved(1, 8.8, "move 1: downlink 81 -> 0 (lost 0.62)")),
    ]
    clean, wifi = ag.rows_of("esb", "esb", 1, bounds, s)
    assert math.isclose(clean["goodput_bps"], CLEAN_BPS) and clean["moves"] == 0
    assert wifi["back_s"] == 2.0  # (the first slice whose last 0.5 s all carried)
    assert wifi["outage_s"] == 1.5
    assert math.isclose(wifi["share"], 0.85)
    assert wifi["moves"] == 1 and "81 -> 0" in wifi["why"] and wifi["downlink"] == 0
    assert clean["unconfirmed"] is None  # (not in the status: not made up)
    waited = {**moved(1, 8.8, "move 1"), "unconfirmed": 9}
    _, wifi = ag.rows_of(
        "esb", "esb", 1, [bounds[0], ("wifi", 10, 20, {"unconfirmed": 2}, waited)], s
    )
    assert wifi["unconfirmed"] == 7  # (what the move waited for: Wi-Fi heard beside the link)


def test_a_link_that_never_comes_back_has_no_time_back_and_the_verdict_says_missed() -> None:
    none: dict[str, object] = {"uplink": 76, "downlink": 81}
    s = slices(0, 10, CLEAN_BPS) + slices(10, 20, 0.1 * CLEAN_BPS)
    rows = ag.rows_of(
        "esb", "esb", 1, [("clean", 0, 10, none, none), ("wifi", 10, 20, none, none)], s
    )
    assert rows[1]["back_s"] is None and rows[1]["outage_s"] == 10.0
    summary = {"rows": rows, "targets": {"back_s": 2.0, "cell_back_s": 3.0, "share": 0.85}}
    assert ag.verdict(summary).startswith("esb: MISSED (wifi back never")


def test_the_wifi_channel_that_covers_a_pair() -> None:
    assert ag.wifi_covering((76, 81)) == 13
    for pair in ((2, 7), (38, 43), (20, 30)):
        centre = wifi_centre(ag.wifi_covering(pair))
        assert all(abs(c - centre) <= 11 for c in pair), pair
