"""status --watch as text: the screens it draws from two status samples."""

from __future__ import annotations


def test_the_live_views_history_has_a_full_scale_floor() -> None:
    """A link carrying only keepalives (a few hundred bit/s) draws low bars, not full ones."""
    from longge.daemon.watch import SPARK, spark

    assert spark([300.0, 400.0]) == SPARK[0] * 2
    assert spark([0.0, 250_000.0, 500_000.0]) == SPARK[0] + SPARK[4] + SPARK[-1]


def test_a_view_shows_each_directions_rate_from_the_counters() -> None:
    from longge.daemon.watch import View

    def node(role: str, rx_bytes: int, frames: int) -> dict[str, object]:
        return {
            "node": {"role": role},
            "radio": {"rate": "2M", "ard_us": 250, "arc": 2},
            "link": "up",
            "peer_last_heard_s": 0.1,
            "tx": {"frames_sent": frames, "max_rt": 0, "queue_bytes": 0},
            "rx": {"bytes_out": rx_bytes, "drops": {"checksum": 1}},
        }

    before = {"t": 0.0, "nodes": {"b": node("base", 0, 0), "m": node("mobile", 0, 0)}}
    after = {"t": 2.0, "nodes": {"b": node("base", 50_000, 10), "m": node("mobile", 0, 500)}}
    screen = View().frame(before, after, 1.0)
    up = screen.splitlines()[
        screen.splitlines().index(next(x for x in screen.splitlines() if "mobile -> base" in x)) + 1
    ]
    assert "200.0 kbit/s delivered" in up  # 50 kB in 2 s at the base
    assert "250 frames/s" in screen and "drops: checksum 1" in screen
    gone = View().frame(before, {"t": 1.0, "nodes": {"b": {"error": "no daemon"}}}, 1.0)
    assert "b: no daemon" in gone  # a node that does not answer is said, not a crash
