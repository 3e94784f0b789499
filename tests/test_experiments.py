"""The experiment battery's definitions and analysis, on synthetic data. The runs themselves
need the testbed and minutes each; the suite does not run them (./run.sh experiment NAME
--quick does)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from fielddoc import assert_documented

from longge.errors import ConfigError
from longge.measure.experiment_plans import (
    DEFAULTS,
    EXPERIMENTS,
    GRID_BULK,
    Experiment,
    Series,
    interactive_grid,
    probe_spec,
)
from longge.measure.experiment_report import plot, verdict
from longge.measure.model import IP_UDP_HEADERS, udp_goodput_bps
from longge.radio.options import RadioOptions


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_definition_is_valid(name: str) -> None:
    exp = EXPERIMENTS[name]
    exp.validate()
    pts = exp.points(quick=True)
    assert pts and all(set(DEFAULTS) <= set(c) for _, _, c in pts)
    assert len(exp.points(quick=False)) >= len(pts)
    # its JSON (Runner.run writes the definition with the rows) is documented field by field
    assert_documented(json.loads(json.dumps({"experiment": asdict(exp)})), name)


def test_the_battery_is_what_the_issue_asks_for() -> None:
    assert set(EXPERIMENTS) == {
        *("tcp-vs-udp", "loss", "window", "parallel", "multiplex", "cc"),
        "mode",  # the link-mode issue's
    }
    quick_points = sum(len(e.points(True)) for e in EXPERIMENTS.values())
    quick_seconds = sum(len(e.points(True)) * e.quick_trial_s for e in EXPERIMENTS.values())
    # `experiment all --quick` in 15 minutes: measured 6.7 s a point with 5-second trials
    # (docs/measurements.md); 4 s of drain and set-up a point, and 0.6 of the 15 minutes
    assert quick_seconds + 4 * quick_points < 15 * 60 * 0.6


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"vary": "per", "values": (0.0, 1.5)}, "per"),
        ({"vary": "window", "values": (1000,)}, "window"),
        ({"vary": "colour", "values": ("red",)}, "experiment"),
        ({"measure": "vibes"}, "tcp-vs-udp.measure"),
        ({"series": (Series("x", {"cc": "warp"}),)}, "cc"),
        ({"series": (Series("x", {"ard_us": 300}),)}, "ard_us"),
        ({"quick_values": ()}, "tcp-vs-udp.values"),
    ],
)
def test_bad_definitions_are_refused_by_key(change: dict[str, object], key: str) -> None:
    bad = replace(EXPERIMENTS["tcp-vs-udp"], **change)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as err:
        bad.validate()
    assert err.value.key == key


def rows(
    exp: Experiment, values: dict[str, dict[object, dict[str, float]]]
) -> list[dict[str, object]]:
    return [
        {"experiment": exp.name, "series": s, "x": x, "error": "", **fields}
        for s, by_x in values.items()
        for x, fields in by_x.items()
    ]


def test_verdicts_and_plots_from_synthetic_rows(tmp_path: Path) -> None:
    k = 1e3
    cases = {
        "tcp-vs-udp": {
            "default": {"udp": {"received_bps": 500 * k}, "tcp": {"received_bps": 400 * k}}
        },
        "loss": {
            "TCP, ARD 250 µs ARC 2": {
                0.0: {"received_bps": 400 * k},
                0.3: {"received_bps": 100 * k},
            },
            "TCP, ARD 1000 µs ARC 15": {
                0.0: {"received_bps": 380 * k},
                0.3: {"received_bps": 190 * k},
            },
        },
        "window": {
            "default": {
                w: {
                    "received_bps": min(w, 16384) / 16384 * 450 * k,
                    "rtt_median_ms": 5 + w / 2000,
                    "rtt_p95_ms": 9 + w / 1000,
                }
                for w in (4096, 16384, 65536, 262144)
            }
        },
        "parallel": {
            "default": {n: {"received_bps": 450 * k, "jain": 1 - 0.02 * n} for n in (1, 2, 4, 8)}
        },
        "multiplex": {
            "default": {
                n: {"rtt_median_ms": 4 + 20 * n, "rtt_p95_ms": 8 + 25 * n} for n in (0, 1, 2, 3)
            },
            "keystroke, stream": {
                n: {"rtt_median_ms": 3 + n, "rtt_p95_ms": 5 + n} for n in (0, 1, 3)
            },
            "20 ms x 200 B, up, esb": {
                n: {"rtt_median_ms": 5 + n, "rtt_p95_ms": 6 + 2 * n} for n in (0, 1, 3)
            },
            "100 ms x 1200 B, down, esb": {
                n: {"rtt_median_ms": 9 + 0.5 * n, "rtt_p95_ms": 11 + 3 * n} for n in (0, 1, 3)
            },
            "20 ms x 200 B, down, stream": {
                n: {"rtt_median_ms": 2.5 + 0.1 * n, "rtt_p95_ms": 3 + 0.2 * n} for n in (0, 1, 3)
            },
        },
        "cc": {
            f"{cc}{d}": {0.0: {"received_bps": 400 * k}, 0.1: {"received_bps": v * k}}
            for d in ("", ", +50 ms")
            for cc, v in (("reno", 100), ("cubic", 120), ("bbr", 210))
        },
        "mode": {
            f"{proto}, {mode}": {
                per: {
                    "received_bps": top * k * (1 - per * fall),
                    "rtt_median_ms": rtt,
                    "rtt_p95_ms": 2 * rtt,
                }
                for per in (0.0, 0.1, 0.3)
            }
            for proto, mode, top, fall, rtt in (
                ("UDP", "esb", 500, 2.0, 20),
                ("UDP", "stream", 1300, 1.0, 10),
                ("TCP", "esb", 480, 2.5, 25),
                ("TCP", "stream", 1200, 3.2, 12),
            )
        },
    }
    expected = {
        "tcp-vs-udp": "TCP gets 400 kbit/s = 0.80x UDP's 500 kbit/s",
        "loss": "TCP, ARD 250 µs ARC 2: 25%; TCP, ARD 1000 µs ARC 15: 50%",
        "window": "from a 16384-byte buffer",
        "parallel": "8 flows: 450 kbit/s, Jain 0.840",
        "multiplex": "3 bulk flows 64 (83) ms; keystroke, stream: 0 bulk flows 3 (5) ms, 1 bulk "
        "flows 4 (6) ms, 3 bulk flows 6 (8) ms; interactive grid over idle: esb: 2 flows beside "
        "up to 3 bulk, their RTT rose at most +3.0 ms in the median (20 ms x 200 B, up), +9.0 "
        "ms at p95 (100 ms x 1200 B, down); stream: 1 flows beside up to 3 bulk, their RTT "
        "rose at most +0.3 ms in the median (20 ms x 200 B, down), +0.6 ms at p95",
        "cc": "BBR 2.10x Reno; CUBIC, +50 ms 1.20x Reno",
        # UDP: stream ahead at every loss rate; TCP: at 30 % stream keeps 4 % of 1200 (48),
        # ESB 25 % of 480 (120): ESB carries more there
        "mode": "UDP: stream 1300 kbit/s = 2.60x ESB's 500, RTT under load 10 vs 20 ms; at 30% "
        "frame error stream keeps 70%, ESB 40%; stream carries more at every loss rate; TCP: "
        "stream 1200 kbit/s = 2.50x ESB's 480, RTT under load 12 vs 25 ms; at 30% frame error "
        "stream keeps 4%, ESB 25%; ESB carries more at 30%",
    }
    for name, data in cases.items():
        exp = EXPERIMENTS[name]
        bounds = {"udp_1400": 509e3, "udp_1400_esb": 509e3, "udp_1400_stream": 1353e3}
        summary = {"rows": rows(exp, data), "quick": True, "bound_bps": bounds}
        text = verdict(exp, summary)
        assert expected[name] in text, (name, text)
        summary["verdict"] = text
        assert_documented(summary, name)
        made = plot(exp, summary, tmp_path)
        assert all(p.stat().st_size > 1000 for p in made), name


def test_a_verdict_without_enough_points_says_so() -> None:
    exp = EXPERIMENTS["loss"]
    text = verdict(exp, {"rows": [], "quick": True, "bound_bps": {"udp_1400": 1.0}})
    assert text.startswith("not enough points")
    text = verdict(EXPERIMENTS["tcp-vs-udp"], {"rows": [], "quick": True, "bound_bps": {}})
    assert text.startswith("not enough points")


def test_the_window_verdict_needs_goodput_and_two_buffer_sizes() -> None:
    """Once it compared one point with itself ("RTT 5 ms at 2048 bytes, 5 ms at 2048 bytes")
    or named the best of nothing ("90 % of its best (0 kbit/s)")."""
    exp = EXPERIMENTS["window"]

    def rows(points: list[tuple[int, float, float]]) -> list[dict[str, object]]:
        return [
            {"series": "default", "x": x, "received_bps": bps, "rtt_median_ms": rtt}
            for x, bps, rtt in points
        ]

    for pts in ([(2048, 0.0, 5.0), (65536, 0.0, 6.0)], [(2048, 4e5, 5.0), (65536, 5e5, math.nan)]):
        text = verdict(exp, {"rows": rows(pts), "quick": True, "bound_bps": {}})
        assert text.startswith("not enough points"), text


def test_a_point_still_disturbed_is_plotted_but_not_judged() -> None:
    exp = EXPERIMENTS["tcp-vs-udp"]
    rows = [
        {"series": "default", "x": "udp", "received_bps": 5e5},
        {"series": "default", "x": "tcp", "received_bps": 4.9e5, "disturbed": "CPU steal 9 %"},
    ]
    summary = {"rows": rows, "quick": True, "bound_bps": {"udp_1400": 5.09e5}}
    assert verdict(exp, summary).startswith("not enough points")  # tcp was not counted
    rows[1]["disturbed"] = ""
    assert verdict(exp, summary).startswith("TCP gets 490 kbit/s")


def test_an_rtt_quantile_among_the_lost_probes_is_none() -> None:
    """44 of 45 probes lost: the one that came back is no median (it read 8 ms once)."""
    from longge.measure.loadprobe import LoadProbe

    def run(rtts: list[float], sent: int) -> LoadProbe:
        return LoadProbe(None, {"sent": sent, "records": [{"rtt_ms": r} for r in rtts]})

    assert run([8.0], 45).rtt_ms(0.5) is None
    assert run([8.0] * 43, 45).rtt_ms(0.95) == 8.0  # 2 lost of 45: p95 among the received
    assert run([8.0] * 42, 45).rtt_ms(0.95) is None  # 3 lost: p95 falls among them
    assert run([1.0, 3.0], 2).rtt_ms(0.5) == 2.0


def test_a_probe_is_named_or_an_interval_and_a_size_and_nothing_else() -> None:
    assert probe_spec("ping") == (0.2, 60)
    assert probe_spec("20ms/200B") == (0.02, 200)
    for bad in ("20ms", "20ms/2000B", "0ms/64B", "20 ms/64B", "ms/B", "20ms/4B"):
        with pytest.raises(ValueError):
            probe_spec(bad)
    with pytest.raises(ConfigError, match="probe"):
        replace(EXPERIMENTS["multiplex"], series=(Series("x", {"probe": "20ms"}),)).validate()
    with pytest.raises(ConfigError, match="direction"):
        replace(EXPERIMENTS["multiplex"], series=(Series("x", {"direction": "left"}),)).validate()


def test_the_interactive_grid_holds_every_flow_below_its_share_and_none_above() -> None:
    """Each mode, each way: every interval and size of the issue's grid whose rate on the
    link is below C / (n + 1) beside n = 3 bulk flows, and none above; multiplex runs it all,
    --quick a part, the four ping series in both."""
    grid = interactive_grid(24)
    labels = {s.label for s in grid}
    for mode in ("esb", "stream"):
        share = udp_goodput_bps(RadioOptions(mode=mode), 1400, 24) / (GRID_BULK + 1)
        for every_ms in (10, 20, 50, 100):
            for size in (64, 200, 1200):
                rate = (size + IP_UDP_HEADERS + 24) * 8 / (every_ms / 1000)
                for way in ("up", "down"):
                    label = f"{every_ms} ms x {size} B, {way}, {mode}"
                    assert (label in labels) == (rate < share), label
    assert "100 ms x 1200 B, up, esb" in labels and "20 ms x 1200 B, up, esb" not in labels
    multiplex = EXPERIMENTS["multiplex"]
    full = {s.label for s, _, _ in multiplex.points(quick=False)}
    quick = {s.label for s, _, _ in multiplex.points(quick=True)}
    assert {"default", "keystroke", "ping, stream", "keystroke, stream"} <= quick < full
    assert len(full) == 4 + len(multiplex.series) - 4
    down = [c for s, _, c in multiplex.points(quick=False) if s.label.endswith("down, esb")]
    assert down and all(c["direction"] == "down" and c["mode"] == "esb" for c in down)
