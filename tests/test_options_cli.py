"""Radio options: one spelling, checked where the user typed them; the CLI refuses clearly."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest
from answering import answering
from fielddoc import assert_documented

from longge.air.loss import AirLoss
from longge.errors import ConfigError
from longge.radio.options import RadioOptions
from longge.radiobench import BenchPlan


@pytest.mark.parametrize(
    ("make", "kwargs", "key"),
    [
        (RadioOptions, {"rate": "3M"}, "rate"),
        (RadioOptions, {"ard_us": 100}, "ard_us"),
        (RadioOptions, {"ard_us": 300}, "ard_us"),
        (RadioOptions, {"ard_us": 4250}, "ard_us"),
        (RadioOptions, {"arc": 16}, "arc"),
        (RadioOptions, {"payload": 0}, "payload"),
        (RadioOptions, {"address_width": 6}, "address_width"),
        (RadioOptions, {"crc": 0}, "crc"),
        (RadioOptions, {"channel": 126}, "channel"),
        (AirLoss, {"per": 1.2}, "per"),
        (AirLoss, {"burst": 0.5}, "burst"),
        (AirLoss, {"seed": "x"}, "seed"),
        (BenchPlan, {"seconds": 0}, "seconds"),
    ],
)
def test_bad_values_name_their_key(make: Any, kwargs: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        make(**kwargs)
    assert err.value.key == key


def test_the_link_settings_hold_no_emulator_or_bench_setting() -> None:
    """The emulator's losses and radio-bench's duration have their own types: a daemon's
    config that sets them under [radio] is refused by name (nothing there reads them)."""
    from longge import configfile

    assert not {"per", "ack_per", "burst", "seed", "seconds"} & set(RadioOptions().as_dict())
    with pytest.raises(ConfigError) as err:
        configfile.from_mapping({"radio": {"per": 0.1}})
    assert "per" in str(err.value)


def test_ard_steps_and_the_250k_ack_pitfall() -> None:
    assert RadioOptions(ard_us=250).ard_step == 0
    assert RadioOptions(ard_us=4000).ard_step == 15
    assert RadioOptions(rate="250k", ard_us=250).ard_too_short
    assert not RadioOptions(rate="250k", ard_us=500).ard_too_short
    assert not RadioOptions(rate="250k", ard_us=250, auto_ack=False).ard_too_short


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "longge", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_refuses_a_bad_value_with_the_key_and_exit_2() -> None:
    r = run_cli("radio-bench", "--arc", "20")
    assert r.returncode == 2
    assert "arc = 20 is not allowed: 0..15" in r.stderr


def test_radio_bench_json_reports_what_the_air_saw() -> None:
    r = run_cli("radio-bench", "--seconds", "1", "--json", "--per", "0.05", "--seed", "3")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("throughput_bps", "bound_bps", "attempts", "retransmissions", "lost"):
        assert key in out
    assert 0 < out["frames_received"] <= out["frames_sent"]
    assert out["attempts"] >= out["frames_received"]
    assert out["retransmissions"] > 0 and out["lost"] > 0
    assert out["throughput_bps"] < out["bound_bps"]
    assert_documented(out, "radio-bench")


def test_radio_bench_stream_mode_keeps_the_4_ms_rule() -> None:
    """--mode stream: auto-ack off on both chips, the FIFO let drain after each burst that
    fits in 4 ms; the air counts no stay in TX mode over 4 ms, and the bound is the stream
    bound (bursts after a settle), not the back-to-back one."""
    from longge.chip.datasheet import LinkTiming

    r = run_cli("radio-bench", "--mode", "stream", "--seconds", "1", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["options"]["mode"] == "stream"
    assert out["tx_mode_over_4ms"] == 0
    assert out["frames_received"] > 100
    assert out["bound_bps"] == pytest.approx(LinkTiming("2M").stream_bound_bps(), rel=1e-3)
    assert_documented(out, "radio-bench")
    bad = run_cli("radio-bench", "--mode", "turbo")
    assert bad.returncode == 2 and "--mode" in bad.stderr


def test_air_stats_without_an_air_says_so(tmp_path: object) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "longge", "air-stats", "--socket", f"{tmp_path}/none.sock"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "no air emulator answers at" in out.stderr and "--socket" in out.stderr
    assert "Traceback" not in out.stderr


def test_everyday_commands_refuse_clearly(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """radio set checks its values before it contacts any daemon (exit 2, the key named: the
    control socket here does not exist, which would be exit 1); plot of a missing folder says
    so without a traceback; help lists run.sh's own test command."""
    from longge.cli import main

    assert main(["radio", "set", "--arc", "20", "--control", "/nonexistent.sock"]) == 2
    err = capsys.readouterr().err
    assert "arc = 20" in err and "0..15" in err
    assert main(["plot", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "no results folder" in err and "Traceback" not in err
    assert main(["help"]) == 0
    assert "./run.sh test" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:  # argparse's own refusal names the option
        main(["tTest", "-p", "70000", "--host", "192.0.2.1"])
    assert stop.value.code == 2 and "--port" in capsys.readouterr().err
    # a sweep's own numbers, before any testbed or server is touched
    for argv, key in (
        (["lTest", "--capacity", "nan"], "capacity"),
        (["lTest", "--capacity", "-5000"], "capacity"),
        (["lTest", "--capacity", "0"], "capacity"),
        (["tTest", "-t", "0"], "time"),
        (["tTest", "-l", "4"], "length"),
        (["tune", "--ard-list", "250,abc"], "--ard-list"),
        (["tune", "--arc-list", ""], "--arc-list"),
        (
            ["status", "--watch", "--interval", "nan", "--control", "/nonexistent.sock"],
            "--interval",
        ),
        (["scan", "--sweeps", "0"], "--sweeps"),
        (["scan", "--wifi", "14"], "--wifi"),
        (["scan", "--wifi", "0"], "--wifi"),
        (["scan", "--wifi", "1", "--duty", "2"], "--duty"),
        (["tTest", "--host", ""], "--host"),
        # issue 38: a lossy link's options, refused before anything starts
        (["tTest", "--per", "1.5"], "per"),
        (["tTest", "--pdr-loss", "-1"], "--pdr-loss"),
        (["lTest", "--pdr-loss", "1.5"], "--pdr-loss"),
        (["tTest", "--interferer", "wifi:200"], "--interferer"),
        (["lTest", "--interferer", "wifi:6:2"], "--interferer"),
        (["tune", "--interferer", "wifi:x"], "--interferer"),
        (["tune", "--pdr-loss", "nan"], "--pdr-loss"),
        (["experiment", "loss", "--interferer", "bluetooth:6"], "--interferer"),
        (["radio-bench", "--seconds", "inf"], "seconds"),
        (["status", "--watch", "--count", "0", "--control", "/nonexistent.sock"], "--count"),
        (["keygen", "--out", "/nonexistent/folder/key"], "--out"),
        (["air", "--socket", __file__], "--socket"),  # a file of ours: never deleted
        (["servers", "--log-dir", "/nonexistent/folder"], "--log-dir"),
    ):
        own = ("status", "scan", "radio-bench", "keygen", "air", "servers")
        host = [] if argv[0] in own or "--host" in argv else ["--host", "192.0.2.1"]
        assert main([*argv, *host]) == 2, argv
        err = capsys.readouterr().err
        assert f"{key} = " in err and "Traceback" not in err, (argv, err)


def test_channel_means_the_uplink_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """``--channel N`` on both daemons keeps them a mirrored pair: N is the uplink (mobile tx,
    base rx), the downlink goes with it. ``radio set`` (channels cannot change live) does not
    offer it."""
    from longge.cli import build_parser
    from longge.commands.node import _radio_overrides
    from longge.radio.options import downlink_channel

    down = downlink_channel(70)
    mobile = _radio_overrides({"channel": 70}, "mobile")["radio"]
    base = _radio_overrides({"channel": 70}, "base")["radio"]
    assert (mobile["tx_channel"], mobile["rx_channel"]) == (70, down)
    assert (base["tx_channel"], base["rx_channel"]) == (down, 70)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["radio", "set", "--channel", "70"])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["radio", "set", "--help"])
    assert "--arc" in (shown := capsys.readouterr().out) and "--channel" not in shown


def test_every_option_of_every_command_says_what_it_is_and_its_default() -> None:
    """--help is the command reference: each option has a help text, and the defaults show."""
    import argparse

    from longge.cli import build_parser

    def commands(parser: argparse.ArgumentParser, prefix: str = "") -> Any:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield prefix + name, sub
                    yield from commands(sub, prefix + name + " ")

    found = list(commands(build_parser()))
    assert len(found) > 15
    for name, sub in found:
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            assert action.help, (name, action.option_strings or action.dest)
    ttest = dict(found)["tTest"].format_help()
    assert "(default: 5201)" in ttest and "(default: 2M)" in ttest


def test_tune_and_experiments_take_the_servers_ports_and_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--port/--rtt-port/--queue reach tune's and the experiments' runs (they ignored them),
    and a real link's target is built with those ports."""
    from longge import cli
    from longge.measure import runner

    seen: dict[str, dict[str, object]] = {}

    def fake(kind: str) -> Any:
        def run(*args: object, **kw: object) -> Any:
            seen[kind] = kw
            raise SystemExit(0)  # stop before anything is measured

        return run

    monkeypatch.setattr(runner, "run_tune", fake("tune"))
    monkeypatch.setattr(runner, "run_experiments", fake("experiments"))
    for argv in (["tune"], ["experiment", "multiplex"]):
        with pytest.raises(SystemExit):
            control = ["--control", "/x"] if argv == ["tune"] else []
            ports = ["-p", "5999", "--rtt-port", "7999", "--queue", "fifo"]
            cli.main([*argv, "--host", "192.0.2.1", *ports, *control])
    assert set(seen) == {"tune", "experiments"}
    for kw in seen.values():
        assert kw["ports"] == (5999, 7999) and kw["queue"] == "fifo"
    target, started = runner.resolve_target("192.0.2.1", 5999, 7999, RadioOptions(), lambda s: None)
    assert (target.host, target.iperf_port, target.rtt_port, started) == (
        "192.0.2.1",
        5999,
        7999,
        False,
    )


def test_tune_and_the_experiments_refuse_stream_mode_by_name() -> None:
    """They vary ARD/ARC, which stream mode does not use: refused before anything starts."""
    for argv in (["tune", "--mode", "stream"], ["experiment", "loss", "--mode", "stream"]):
        r = run_cli(*argv)
        assert r.returncode == 2 and "mode = 'stream'" in r.stderr, (argv, r.stderr)


def test_options_that_set_up_a_testbed_must_match_a_link_already_running(tmp_path: Any) -> None:
    """``tTest --rate 1M`` with a testbed up at 2M (or on a node, or with --host) once measured
    the 2M link and said nothing: the options only set up a testbed the run brings up."""
    from longge.measure.runner import check_asked

    running = {
        "node": {"role": "mobile", "queue": "fair"},
        "radio": {
            "rate": "2M",
            "ard_us": 500,
            "arc": 2,
            "auto_ack": True,
            "payload": 32,
            "address_width": 5,
            "crc": 2,
            "mode": "esb",
            "tx_channel": 76,
        },
    }
    path = str(tmp_path / "m.sock")
    server = answering(path, socket.SOCK_STREAM, [json.dumps(running).encode() + b"\n"] * 5)

    def ask() -> Any:
        from longge.daemon.status import DaemonClient

        return DaemonClient(path).status()

    loss = AirLoss(per=0.1)
    spec = {"loss": loss.as_dict()}
    with pytest.raises(ConfigError) as err:
        check_asked(RadioOptions(rate="1M"), AirLoss(), "fair", ask, spec)
    assert err.value.key == "--rate" and "rate = '2M'" in str(err.value)
    assert "radio set" in str(err.value)
    check_asked(RadioOptions(ard_us=500), loss, "fair", ask, spec)  # what it runs: measured
    with pytest.raises(ConfigError) as err:
        check_asked(RadioOptions(), AirLoss(), "fifo", ask, spec)
    assert err.value.key == "--queue" and "'fair'" in str(err.value)
    with pytest.raises(ConfigError) as err:
        check_asked(RadioOptions(mode="stream"), AirLoss(), "fair", ask, spec)
    assert err.value.key == "--mode"
    with pytest.raises(ConfigError) as err:
        check_asked(RadioOptions(), AirLoss(per=0.3), "fair", ask, spec)
    assert err.value.key.startswith("--per")
    server.join(10)
    # --host with no daemon here: nothing to set them on
    check_asked(RadioOptions(), AirLoss(), "fair", None, None)
    with pytest.raises(ConfigError) as err:
        check_asked(RadioOptions(arc=5), AirLoss(), "fair", None, None)
    assert err.value.key == "--arc" and "no daemon here" in str(err.value)
    with pytest.raises(ConfigError) as err:
        check_asked(RadioOptions(), AirLoss(per=0.1), "fair", None, None)
    assert "a real link" in str(err.value)
