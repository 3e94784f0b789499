"""status --watch as text: the screens it draws from two status samples."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from answering import answering


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


FOREIGN_STATUS = [
    (b"[1, 2]\n", "answered badly"),
    (b"not json\n", "answered badly"),
    (b'{"node": "base"}\n', "node is not an object"),
    (b'{"node": null}\n', "node is not an object"),
    (b'{"tx": null}\n', "tx is not an object"),
    (b'{"node": {"role": ["base"]}}\n', "node.role"),
    (b'{"peer_last_heard_s": "soon"}\n', "status.peer_last_heard_s"),
    (b'{"radio": "2M"}\n', "status.radio"),
    (b'{"tx": {"frames_sent": "many"}}\n', "tx.frames_sent"),
    (b'{"tx": {"max_rt": true}}\n', "tx.max_rt"),
    (b'{"tx": {"queue_drops": {"overflow": "3"}}}\n', "tx.queue_drops"),
    (b'{"rx": {"bytes_out": null}}\n', "rx.bytes_out"),
    (b'{"rx": {"drops": [1]}}\n', "rx.drops"),
]


def test_a_status_of_another_shape_is_named_in_the_live_view_not_a_crash(tmp_path: Path) -> None:
    """Each answer once crashed ``status --watch`` (or ``status``) with a traceback: the view
    read whatever came as counters. Now it names the field and goes on."""
    from longge.daemon.watch import View, sample

    path = str(tmp_path / "c.sock")
    answers = [a for a, _ in FOREIGN_STATUS]
    server = answering(path, socket.SOCK_STREAM, [a for a in answers for _ in (1, 2)])
    view = View()
    for _, said in FOREIGN_STATUS:
        prev = sample({"base": path})
        cur = sample({"base": path})
        assert said in cur["nodes"]["base"]["error"]
        assert said in view.frame(prev, cur, 1.0)
    server.join(10)


def test_an_air_answering_in_another_shape_is_named_in_the_live_view(tmp_path: Path) -> None:
    from longge.daemon.watch import View, sample

    path = str(tmp_path / "air.sock")
    answers = [b"snot json", b"s[1]", b's{"lag": 5}', b"eunknown request"]
    server = answering(path, socket.SOCK_SEQPACKET, answers)
    for _ in answers:
        cur = sample({}, air=path)
        assert "error" in cur["air"]
        assert "air: " in View().frame(cur, cur, 1.0)
    server.join(10)


@pytest.mark.parametrize(
    "status",
    [
        {},
        {"link": "up"},
        {"uptime_s": "long", "peer_last_heard_s": 0.5, "processes": {"tx": 5, "rx": {}}},
        {"radio": {"mode": "esb"}, "node": {"role": "base"}},
    ],
)
def test_plain_status_text_says_what_a_status_lacks_as_a_question_mark(
    status: dict[str, object],
) -> None:
    """``./run.sh status`` once indexed the answer directly: a status that passed the type
    check but lacked a key (another version's) ended in a KeyError."""
    from longge.daemon.statusview import node_text

    text = node_text(status)
    assert "?" in text and "link" in text
