"""Experiment ``hostile``'s attacker (what it makes of what it hears, no radio) and its
judgement of the phases (from rows alone)."""

from __future__ import annotations

import math
from pathlib import Path

from longge.measure import hostile_experiment as hx
from longge.measure.hostile_radio import Forger, attacks_for
from longge.measure.results import ResultsDir
from longge.measure.udp_count import SLICE_S
from longge.protocol.arq_frames import ACK, BEHIND, RESET, RESYNC, control_body
from longge.protocol.frame import FIRST, LAST


def data(seq: int, header: int, body: bytes = b"\x00\x07" + bytes(28)) -> bytes:
    return bytes((seq, header)) + body


def test_control_frames_pass_their_check_and_name_another_epoch() -> None:
    f = Forger(stream=True)
    f.heard_down(bytes((ACK, 42, 17)) + bytes(8) + b"\x00")
    assert (f.epoch, f.cum) == (42, 17)
    reset = control_body(f.reset())
    assert reset is not None and reset[0] == RESET and reset[1] not in (0, 42)
    assert control_body(f.resync()) == bytes((RESYNC,))
    ack = control_body(f.ack())
    assert ack is not None and ack[0] == ACK | BEHIND and ack[1] == 42 and ack[2] == 49


def test_a_first_frame_is_answered_with_its_header_and_number_and_other_bytes() -> None:
    f = Forger(stream=True)
    genuine = data(5, FIRST | (3 << 3))
    (forged,) = f.heard_up(genuine) or []
    assert forged[0] == 6  # the next sequence number
    assert forged[1:4] == genuine[1:4] and forged[4:] != genuine[4:]
    assert len(forged) == len(genuine)
    assert f.heard_up(data(6, 3 << 3 | 1)) is None  # not a first frame: nothing
    esb = Forger(stream=False)
    (plain,) = esb.heard_up(genuine[1:]) or []
    assert plain[:3] == genuine[1:4]


def test_whole_packets_heard_are_replayed_behind_the_next_sequence_numbers() -> None:
    f = Forger(stream=True)
    f.heard_up(data(1, FIRST | (2 << 3)))
    f.heard_up(data(2, (2 << 3) | 1))
    f.heard_up(data(3, LAST | (2 << 3) | 2))
    f.heard_up(bytes((ACK, 1, 1)) + bytes(9))  # an ACK the mobile sends: not data
    assert len(f.packets) == 1
    f.heard_up(data(9, FIRST | (3 << 3)))
    again = f.replay(f.packets)
    assert [g[0] for g in again] == [10, 11, 12]
    assert [g[1:] for g in again] == [p[1:] for p in f.packets[0]]
    assert f.replay([]) == []


def test_the_arq_attacks_are_for_stream_mode_only_and_jam_for_esb() -> None:
    assert "reset1" not in attacks_for("esb") and "first" in attacks_for("esb")
    assert {"reset1", "ack20", "replay", "random"} <= set(attacks_for("stream"))
    assert "jam" in attacks_for("esb") and "jam" not in attacks_for("stream")
    # frames on a gone mobile's pipe: in the stream cell of three only
    assert attacks_for("cell") == ["absent"]
    assert "absent" not in attacks_for("esb") + attacks_for("stream")


def test_the_absent_attack_sends_data_frames_with_plausible_sequence_numbers() -> None:
    f = Forger(stream=True)
    f.heard_up(bytes((41,)) + bytes(31))
    frames = [f.data_frame() for _ in range(3)]
    assert [fr[0] for fr in frames] == [42, 43, 44] and all(len(fr) == 32 for fr in frames)


def test_each_attack_is_judged_against_the_none_phases_around_it(tmp_path: Path) -> None:
    counts = {"gave_up": 0, "refused_first": 0}
    bounds = [
        ("none", 0.0, 10.0, {}, counts),
        ("reset1", 10.0, 20.0, {"reset1": 10}, counts),
        ("none", 20.0, 30.0, {}, counts),
        ("replay", 30.0, 40.0, {"replay": 30}, counts),
        ("none", 40.0, 50.0, {}, counts),
        ("jam", 50.0, 60.0, {"jam": 40}, {"gave_up": 40, "refused_first": 0}),
        ("none", 60.0, 70.0, {}, counts),
    ]
    goodput = {0: 1000.0, 1: 500.0, 2: 1200.0, 3: 1100.0, 4: 1000.0, 5: 10.0, 6: 1000.0}
    slices = []
    for k, (_, t0, _, _, _) in enumerate(bounds):
        for i in range(1, 41):
            got = goodput[k] * SLICE_S / 8
            slices.append([t0 + i * SLICE_S, got, 1 if (k == 3 and i == 20) else 0, 0])
    rows = hx._rows("stream", bounds, slices)
    reset, replay = rows[1], rows[3]
    assert math.isclose(reset["none_bps"], 1100, rel_tol=0.02)  # (1000 before, 1200 after)
    assert math.isclose(reset["ratio"], 500 / 1100, rel_tol=0.02) and not reset["kept"]
    assert replay["ratio"] > 0.9 and replay["replayed_delivered"] == 1 and not replay["kept"]
    assert math.isnan(rows[0]["ratio"])
    jam = rows[5]  # out of scope: measured, not judged
    assert jam["ratio"] < 0.1 and jam["kept"] is None and jam["gave_up"] == 40
    summary = {"rows": rows, "target": hx.TARGET}
    text = hx.verdict(summary)
    assert text.startswith("stream: 2 of 2 hurt") and "(1 replayed)" in text
    assert "jam 0.01 (out of scope, not judged)" in text
    made = hx.plot({**summary, "verdict": text}, ResultsDir(tmp_path).path)
    assert all(p.stat().st_size > 500 for p in made)
