"""The compiled air (``emulator/``) against its specification, ``longge/air/model.py``.

The same event scripts (scripted scenarios and hypothesis-generated ones: submits, flushes,
reuses, listens, reads, configuration changes, losses with a seed, collisions, interferers)
run through both on a virtual clock; every result line must be identical: each frame's fate
and time to the nanosecond (``now`` after every advance), every counter of every radio and
channel. A difference is a bug in one of the two.
"""

from __future__ import annotations

import json
import random
import subprocess
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longge.air import native
from longge.air.interferer import Interferer
from longge.air.loss import LossSpec
from longge.air.model import Air, Outcome, RxFrame
from longge.air.server import registers_from_json

Op = dict[str, Any]


def _outputs(out: list[Any]) -> list[Any]:
    return [
        ["rx", o.radio, o.pipe, o.payload.hex()]
        if isinstance(o, RxFrame)
        else ["tx", o.radio, o.outcome is Outcome.OK, o.arc_count]
        for o in out
    ]


def _step(air: Air, op: Op) -> Any:
    kind = op["op"]
    if kind == "attach":
        return {"id": air.attach(op["name"])}
    if kind == "detach":
        air.detach(op["rid"])
    elif kind == "configure":
        air.configure(op["rid"], registers_from_json(op["regs"]), op["t"])
    elif kind == "listen":
        air.set_listening(op["rid"], op["on"], op["t"])
    elif kind == "submit":
        return {"ok": air.submit(op["rid"], bytes.fromhex(op["payload"]), op["no_ack"], op["t"])}
    elif kind == "flush_tx":
        air.flush_tx(op["rid"], op["t"])
    elif kind == "reuse_tx":
        air.reuse_tx(op["rid"], op["t"])
    elif kind == "consumed":
        air.consumed(op["rid"], op["count"])
    elif kind == "flush_rx":
        air.flush_rx(op["rid"])
    elif kind == "rpd":
        return {"rpd": air.rpd(op["rid"], op["t"])}
    elif kind == "advance":
        return {"out": _outputs(air.advance(op["t"])), "now": air.now}
    elif kind == "run_until_idle":
        return {"out": _outputs(air.run_until_idle(op["limit"])), "now": air.now}
    elif kind == "loss":
        spec = LossSpec(op["per"], op["ack_per"], op["burst"], op.get("path_loss"))
        if "tx" in op:
            air.loss.set_link(op["tx"], op["rx"], spec)
        else:
            air.loss.set_default(spec)
    elif kind == "interferer":
        w = Interferer(op["centre"], op["width"], op["duty"], op["burst_ns"])
        w.model, w.near = op.get("model", "slots"), op.get("near")
        air.interferers.append(w)
    elif kind == "holds":
        air.holds = op["on"]
        air.not_held = set(op.get("not_held", []))
    elif kind == "blocking":
        return {"blocking": air.blocking(), "for": air.blocked_for()}
    elif kind == "stats":
        return {"stats": air.stats()}
    return {}


def run_python(script: list[Op]) -> list[Any]:
    air = Air()
    results: list[Any] = []
    for op in script:
        if op["op"] == "new":
            air = Air()
            air.loss.seed = op["seed"]
            results.append({})
            continue
        # a host message sent while the air held its clock (the compiled server's)
        air.applying_held = bool(op.get("held", False))
        try:
            results.append(_step(air, op))
        except (ValueError, KeyError) as exc:
            results.append({"error": str(exc)})
        air.applying_held = False
    return [json.loads(json.dumps(r)) for r in results]


def run_compiled(script: list[Op]) -> list[Any]:
    text = "".join(json.dumps(op) + "\n" for op in script)
    done = subprocess.run(
        [str(native.build()), "replay"], input=text, capture_output=True, text=True, check=True
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def assert_same(script: list[Op]) -> None:
    ours, theirs = run_python(script), run_compiled(script)
    assert len(theirs) == len(ours)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if "error" in a or "error" in b:  # both refuse; the wording may differ
            assert ("error" in a, "error" in b) == (True, True), (i, script[i], a, b)
            continue
        assert a == b, f"line {i}: {script[i]}\npython: {a}\ncompiled: {b}"


def _regs(**over: Any) -> dict[str, Any]:
    regs: dict[str, Any] = {
        "channel": 76,
        "rate": "2M",
        "address_width": 5,
        "crc_len": 2,
        "auto_ack": [True] * 6,
        "dynamic_payloads": True,
        "dynamic_ack": True,
        "payload_size": 32,
        "ard_step": 0,
        "arc": 2,
        "tx_address": "4c47626e63",
        "rx_pipes": {"1": "4c47626e63"},
    }
    regs.update(over)
    return regs


def _stream(
    frames: int,
    *,
    per: float,
    ack_per: float,
    burst: float,
    no_ack: bool,
    seed: int,
    path_loss: float | None = None,
    holds: bool = False,
    names: tuple[str, str] = ("tx", "rx"),
    **regs: Any,
) -> list[Op]:
    """A host that keeps a TX FIFO full and reads everything, flushing after MAX_RT. With
    ``holds``: the air holds for the receiver's host when its FIFO is full (the compiled
    server's), and every third payload is loaded as if the air held its clock then."""
    rng = random.Random(seed)
    script: list[Op] = [{"op": "new", "seed": seed}]
    script += [{"op": "attach", "name": names[0]}, {"op": "attach", "name": names[1]}]
    loss = {"op": "loss", "per": per, "ack_per": ack_per, "burst": burst}
    script.append({**loss, "path_loss": path_loss} if path_loss is not None else loss)
    script.append({"op": "configure", "rid": 1, "regs": _regs(**regs), "t": 0})
    script.append({"op": "configure", "rid": 2, "regs": _regs(**regs), "t": 0})
    script.append({"op": "listen", "rid": 2, "on": True, "t": 0})
    if holds:
        script.append({"op": "holds", "on": True})
    t = 1_000
    for k in range(frames):
        payload = rng.randbytes(rng.randint(1, 32)).hex()
        submit = {"op": "submit", "rid": 1, "payload": payload, "no_ack": no_ack, "t": t}
        script.append({**submit, "held": True} if holds and k % 3 == 0 else submit)
        t += rng.choice((50_000, 150_000, 400_000, 700_000))
        script.append({"op": "advance", "t": t})
        if holds:
            script.append({"op": "blocking"})
        if k % 5 != 4:  # a host that falls behind now and then: the RX FIFO fills
            script.append({"op": "consumed", "rid": 2, "count": 1})
        if k % 7 == 6:
            script.append({"op": "flush_tx", "rid": 1, "t": t})
    script += [{"op": "run_until_idle", "limit": t + 10**9}, {"op": "stats"}]
    return script


@pytest.mark.parametrize(
    ("per", "ack_per", "burst", "no_ack"),
    [(0.0, 0.0, 1.0, False), (0.2, 0.1, 1.0, False), (0.3, 0.3, 4.0, False), (0.1, 0, 1, True)],
)
def test_a_stream_meets_the_same_fate_frame_by_frame(
    per: float, ack_per: float, burst: float, no_ack: bool
) -> None:
    assert_same(_stream(400, per=per, ack_per=ack_per, burst=burst, no_ack=no_ack, seed=7))


def test_collisions_interferers_rpd_and_detach_agree() -> None:
    script: list[Op] = [{"op": "new", "seed": 3}]
    for name in ("a", "b", "c", "sniff"):
        script.append({"op": "attach", "name": name})
    script.append({"op": "configure", "rid": 1, "regs": _regs(), "t": 0})
    script.append({"op": "configure", "rid": 2, "regs": _regs(channel=77), "t": 0})
    script.append({"op": "configure", "rid": 3, "regs": _regs(), "t": 0})
    script.append({"op": "configure", "rid": 4, "regs": _regs(channel=80), "t": 0})
    script.append({"op": "interferer", "centre": 80, "width": 22, "duty": 0.5, "burst_ns": 10**6})
    script.append({"op": "listen", "rid": 3, "on": True, "t": 0})
    script.append({"op": "listen", "rid": 4, "on": True, "t": 0})
    t = 0
    for k in range(60):
        t += 97_000 * (k % 5 + 1)
        sender = 1 if k > 40 else 1 + k % 2  # radio 2 is detached at k = 40
        script.append(
            {"op": "submit", "rid": sender, "payload": "ab" * (k % 32 + 1), "no_ack": False, "t": t}
        )
        script.append({"op": "advance", "t": t + 50_000})
        script.append({"op": "rpd", "rid": 4, "t": t + 60_000})
        script.append({"op": "rpd", "rid": 3, "t": t + 60_000})
        if k % 9 == 8:
            script.append({"op": "reuse_tx", "rid": 1, "t": t + 70_000})
            script.append({"op": "listen", "rid": 3, "on": False, "t": t + 70_000})
            script.append({"op": "listen", "rid": 3, "on": True, "t": t + 80_000})
        if k == 40:
            script.append({"op": "detach", "rid": 2})
    script += [{"op": "run_until_idle", "limit": t + 10**9}, {"op": "stats"}]
    assert_same(script)


@pytest.mark.parametrize("no_ack", [False, True])
def test_holding_for_a_slow_host_agrees(no_ack: bool) -> None:
    """The air that holds its clock before a frame would land in a full RX FIFO (the
    compiled server's, for hosts a busy machine delays), and payloads loaded while it held."""
    script = _stream(300, per=0.1, ack_per=0.1, burst=1.0, no_ack=no_ack, seed=9, holds=True)
    assert_same(script)
    results = run_python(script)
    assert any(r.get("blocking") is not None for r in results)  # (it did hold)
    assert results[-1]["stats"]["radios"]["rx"].get("rx_fifo_full", 0) == 0


@pytest.mark.parametrize(
    ("rate", "pa_level", "path_loss", "per"),
    [("2M", 3, 82.0, 0.0), ("1M", 1, 72.5, 0.1), ("250k", 0, 76.5, 0.0), ("2M", 2, 70.0, 0.05)],
)
def test_a_weak_link_loses_the_same_frames_at_every_rate(
    rate: str, pa_level: int, path_loss: float, per: float
) -> None:
    """The path's noise (its margin over the sensitivity at that rate and power, each frame's
    length) destroys the same frames and ACKs in both airs."""
    script = _stream(
        300,
        per=per,
        ack_per=per,
        burst=1.0,
        no_ack=False,
        seed=3,
        path_loss=path_loss,
        rate=rate,
        pa_level=pa_level,
        ard_step=3,
        arc=5,
    )
    assert_same(script)
    lost = run_python(script)[-1]["stats"]["radios"]["tx"]
    assert lost["lost_data"] > 0  # (the scenario does meet the noise)


@pytest.mark.parametrize(("centre", "no_ack"), [(77, False), (77, True), (40, False)])
def test_a_wifi_interferer_destroys_the_frames_it_overlaps_alike(centre: int, no_ack: bool) -> None:
    """Wi-Fi on channel 6 (nRF 37..) or 14 (nRF 66..88) busy 30 % of its 1-ms slots: the frames
    and ACKs it overlaps are destroyed in both airs, frame by frame; off its band, none."""
    script = _stream(300, per=0.0, ack_per=0.0, burst=1.0, no_ack=no_ack, seed=5)
    script.insert(
        3, {"op": "interferer", "centre": centre, "width": 22, "duty": 0.3, "burst_ns": 10**6}
    )
    assert_same(script)
    stats = run_python(script)[-1]["stats"]
    jammed = stats["channels"]["76"].get("jammed", 0)
    sent = stats["channels"]["76"]["transmissions"]
    if centre == 40:
        assert jammed == 0
    else:  # a share near what the busy slots cover, frames and ACKs together
        assert 0.15 * sent < jammed < 0.6 * sent


@pytest.mark.parametrize(
    ("model", "near"), [("traffic", None), ("traffic", "base"), ("slots", "mobile")]
)
def test_a_wifi_network_s_traffic_and_one_heard_at_one_end_agree(
    model: str, near: str | None
) -> None:
    """A network's bursts and gaps (the ``traffic`` model), and an interferer near one node
    only: near the base it destroys the mobile's frames there, near the mobile the ACKs that
    come back to it; the same frames in both airs, and the power detector hears it only
    where it is."""
    script = _stream(600, per=0.0, ack_per=0.0, burst=1.0, no_ack=False, seed=6,
                     names=("mobile-tx", "base-rx"))  # fmt: skip
    wifi = {"op": "interferer", "centre": 77, "width": 22, "duty": 0.5, "burst_ns": 10**6}
    script.insert(3, {**wifi, "model": model, **({"near": near} if near else {})})
    # a third radio of each node, listening on the interferer's channel: its RPD
    script[-2:-2] = [
        {"op": "attach", "name": "base-tx"},
        {"op": "attach", "name": "mobile-rx"},
        {"op": "configure", "rid": 3, "regs": _regs(channel=70), "t": 10**9},
        {"op": "configure", "rid": 4, "regs": _regs(channel=70), "t": 10**9},
    ]
    for k in range(40):
        t = 10**9 + 10**6 + k * 3_000_000
        for rid in (3, 4):
            script[-2:-2] = [
                {"op": "listen", "rid": rid, "on": True, "t": t},
                {"op": "rpd", "rid": rid, "t": t + 200_000},
                {"op": "listen", "rid": rid, "on": False, "t": t + 250_000},
            ]
    assert_same(script)
    results = run_python(script)
    stats = results[-1]["stats"]
    rx, tx = stats["radios"]["base-rx"], stats["radios"]["mobile-tx"]
    heard = {rid: sum(r.get("rpd", False) for r, op in zip(results, script, strict=True)
                      if op["op"] == "rpd" and op["rid"] == rid) for rid in (3, 4)}  # fmt: skip
    if near == "mobile":
        assert rx.get("lost_collision", 0) == 0 and tx.get("ack_collisions", 0) > 0
        assert heard[3] == 0 and heard[4] > 5
    elif near == "base":
        assert rx.get("lost_collision", 0) > 0 and tx.get("ack_collisions", 0) == 0
        assert heard[4] == 0 and heard[3] > 5
    else:
        assert rx.get("lost_collision", 0) > 0 and heard[3] > 5 and heard[4] > 5


# -- hypothesis: arbitrary event sequences --------------------------------------------------

_addresses = st.sampled_from(["4c47626e63", "4c47626e64", "0102030405"])
_reg_sets = st.fixed_dictionaries(
    {
        "channel": st.sampled_from([76, 77, 79]),
        "rate": st.sampled_from(["2M", "1M", "250k"]),
        "address_width": st.sampled_from([5, 4]),
        "auto_ack": st.sampled_from([[True] * 6, [False] * 6, [False] + [True] * 5]),
        "dynamic_payloads": st.booleans(),
        "dynamic_ack": st.booleans(),
        "payload_size": st.sampled_from([32, 8]),
        "ard_step": st.integers(0, 15),
        "arc": st.integers(0, 15),
        "powered": st.booleans(),
        "pa_level": st.integers(0, 3),
        "tx_address": _addresses,
        "rx_pipes": st.dictionaries(st.sampled_from(["0", "1", "2"]), _addresses, max_size=2),
    }
)


@st.composite
def _scripts(draw: st.DrawFn) -> list[Op]:
    n = draw(st.integers(2, 4))
    script: list[Op] = [{"op": "new", "seed": draw(st.integers(0, 1000))}]
    script += [{"op": "attach", "name": f"r{i}"} for i in range(n)]
    rid = st.integers(1, n)
    t = 0
    for _ in range(draw(st.integers(1, 60))):
        t += draw(st.sampled_from([0, 1_000, 30_000, 130_000, 300_000, 1_000_000]))
        kind = draw(
            st.sampled_from(
                [
                    "submit",
                    "submit",
                    "submit",
                    "advance",
                    "advance",
                    "listen",
                    "configure",
                    "flush_tx",
                    "reuse_tx",
                    "consumed",
                    "flush_rx",
                    "rpd",
                    "loss",
                    "holds",
                    "blocking",
                ]
            )
        )
        op: Op = {"op": kind, "t": t}
        if kind == "submit":
            op.update(
                rid=draw(rid),
                payload=draw(st.binary(min_size=1, max_size=33)).hex(),
                no_ack=draw(st.booleans()),
                held=draw(st.booleans()),
            )
        elif kind == "holds":
            op.update(on=draw(st.booleans()), not_held=draw(st.lists(rid, max_size=2)))
        elif kind == "listen":
            op.update(rid=draw(rid), on=draw(st.booleans()))
        elif kind == "configure":
            op.update(rid=draw(rid), regs=draw(_reg_sets))
        elif kind in ("flush_tx", "reuse_tx", "flush_rx", "rpd"):
            op.update(rid=draw(rid))
        elif kind == "consumed":
            op.update(rid=draw(rid), count=draw(st.integers(0, 4)))
        elif kind == "loss":
            per = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
            op.update(
                per=per,
                ack_per=draw(st.sampled_from([0.0, 0.2])),
                burst=1.0 if per >= 1.0 else draw(st.sampled_from([1.0, 3.0])),
            )
            # a margin near 0 dB at some rate and power: partial losses
            path_loss = draw(st.sampled_from([None, 64.5, 70.0, 73.0, 76.0, 82.0, 88.0]))
            if path_loss is not None:
                op["path_loss"] = path_loss
            if draw(st.booleans()):  # one link of its own
                op.update(
                    tx=f"r{draw(st.integers(0, n - 1))}", rx=f"r{draw(st.integers(0, n - 1))}"
                )
        script.append(op)
    script += [{"op": "run_until_idle", "limit": t + 10**9}, {"op": "stats"}]
    return script


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scripts())
def test_arbitrary_event_sequences_agree(script: list[Op]) -> None:
    assert_same(script)
