"""Command line: a table of subcommands, each a thin call into the library."""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from longge import __version__
from longge.errors import ConfigError, LongGeError


def _progress_bar(label: str) -> Callable[[float], None]:
    def show(fraction: float) -> None:
        if not sys.stderr.isatty():
            return
        width = 30
        done = int(max(0.0, min(fraction, 1.0)) * width)
        sys.stderr.write(f"\r{label} [{'#' * done}{'.' * (width - done)}] {fraction:4.0%}")
        sys.stderr.flush()

    return show


def cmd_radio_bench(ns: argparse.Namespace) -> int:
    from longge.radio.options import options_from_args
    from longge.radiobench import format_result, run_bench

    opts = options_from_args(ns)
    result = run_bench(opts, None if ns.json else _progress_bar("streaming"))
    if not ns.json and sys.stderr.isatty():
        sys.stderr.write("\n")
    print(json.dumps(result.as_dict()) if ns.json else format_result(result))
    return 0


def cmd_air(ns: argparse.Namespace) -> int:
    from longge.air import native
    from longge.air.loss import LossModel
    from longge.air.server import AirServer
    from longge.radio.options import RadioOptions

    opts = RadioOptions(per=ns.per, ack_per=ns.ack_per, burst=ns.burst, seed=ns.seed)
    if not native.use_python():  # the compiled server (LONGGE_AIR_SERVER=python: this one)
        args = native.command(ns.socket, opts.per, opts.ack_per, opts.burst, opts.seed)
        sys.stdout.flush()
        os.execv(args[0], args)
    server = AirServer(ns.socket, LossModel(opts.loss(), seed=opts.seed))
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    signal.signal(signal.SIGINT, lambda *_: server.stop())
    server.bind()
    print(f"air emulator listening on {ns.socket}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.close()
    return 0


def cmd_air_stats(ns: argparse.Namespace) -> int:
    from longge import testbed
    from longge.air.server import DEFAULT_SOCKET, query

    path = ns.socket
    if path is None:  # the standalone air's socket, else the testbed's
        bed = str(testbed.paths()["air"])
        path = DEFAULT_SOCKET if os.path.exists(DEFAULT_SOCKET) or not os.path.exists(bed) else bed
    try:
        stats = query(path)
    except OSError as exc:
        raise LongGeError(
            f"no air emulator answers at {path} ({exc.strerror or exc}): start one "
            "(./run.sh air, or sudo ./run.sh testbed up) or give its --socket"
        ) from exc
    print(json.dumps(stats, indent=2))
    return 0


def cmd_daemon(ns: argparse.Namespace) -> int:
    from longge import config
    from longge.daemon.supervisor import Supervisor
    from longge.radio.options import given_options

    cfg = config.load(ns.config)
    overrides = _radio_overrides(given_options(ns), cfg.role)
    if overrides:
        cfg = config.from_mapping(overrides, cfg)
    print(
        f"longge daemon: {cfg.role} on {cfg.tun} {cfg.address}, control {cfg.control}", flush=True
    )
    for warning in cfg.warnings():
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    Supervisor(cfg).run()
    return 0


def _radio_overrides(given: dict[str, object], role: str) -> dict[str, dict[str, object]]:
    """Config overrides from the radio options typed on the command line. ``--channel N`` is
    the uplink (mobile -> base) on both nodes, the downlink goes with it (downlink_channel),
    so that the same command line on both nodes keeps them a mirrored pair."""
    from longge.radio.options import downlink_channel

    radio = {
        k: v
        for k, v in given.items()
        if k not in ("channel", "seconds", "per", "ack_per", "burst", "seed")
    }
    if "channel" in given:
        up = int(given["channel"])  # type: ignore[call-overload]
        down = downlink_channel(up)
        radio["tx_channel"], radio["rx_channel"] = (up, down) if role == "mobile" else (down, up)
    return {"radio": radio} if radio else {}


def _control_paths(ns: argparse.Namespace) -> dict[str, str]:
    from longge import testbed

    if ns.control:
        return {"node": ns.control}
    p = testbed.paths()
    if p["state"].exists():
        return {"base": str(p["base"]), "mobile": str(p["mobile"])}
    return {"node": "/run/longge/longge0.sock"}


def cmd_status(ns: argparse.Namespace) -> int:
    from longge import testbed
    from longge.daemon.control import ControlError
    from longge.daemon.status import DaemonClient
    from longge.daemon.statusview import node_text

    if ns.watch:
        from longge.daemon.watch import watch

        if ns.interval <= 0:
            raise ConfigError("--interval", ns.interval, "a positive number of seconds")
        paths = _control_paths(ns)
        air = testbed.paths()["air"]
        on_testbed = not ns.control and air.exists()
        return watch(paths, str(air) if on_testbed else None, ns.interval, ns.count)
    out: dict[str, object] = {}
    for name, path in _control_paths(ns).items():
        try:
            out[name] = DaemonClient(path, timeout=5).status().raw
        except ControlError as exc:
            out[name] = {"error": str(exc)}
    if ns.json:
        print(json.dumps(out, indent=2))
    else:
        for name, st in out.items():
            print(f"{name}:")
            print(node_text(st))  # type: ignore[arg-type]
    return 0 if all("error" not in st for st in out.values()) else 1  # type: ignore[operator]


def cmd_radio_set(ns: argparse.Namespace) -> int:
    from longge.daemon.control import ControlError, request
    from longge.radio.options import given_options

    options = given_options(ns)
    options.pop("seconds", None)
    if not options:
        print("nothing to set: give radio options, e.g. --ard-us 250 --arc 2", file=sys.stderr)
        return 2
    from longge.radio.options import RadioOptions

    RadioOptions(**options)  # type: ignore[arg-type]  # refused here, before any daemon
    code = 0
    for name, path in _control_paths(ns).items():
        try:
            reply = request(path, {"cmd": "set", "options": options})
        except ControlError as exc:
            reply = {"error": str(exc)}
        if "error" in reply:
            code = 2 if "key" in reply else 1
            print(f"{name}: error: {reply['error']}", file=sys.stderr)
        else:
            r = reply["radio"]
            print(
                f"{name}: {r['rate']} ARD {r['ard_us']} µs ARC {r['arc']} "
                f"{'auto-ack' if r['auto_ack'] else 'no-ack'} payload {r['payload']}"
            )
    return code


def cmd_doctor(ns: argparse.Namespace) -> int:
    from longge import doctor

    checks = doctor.run(ns.config)
    if ns.json:
        print(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        print(doctor.render(checks))
    return 1 if any(c.status == doctor.FAIL for c in checks) else 0


def cmd_scan(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from longge import scan

    try:
        done = scan.run(
            config_path=ns.config,
            backend=ns.backend,
            air=ns.air,
            sweeps=ns.sweeps,
            dwell_us=ns.dwell_us,
            traffic=ns.traffic,
            wifi=ns.wifi,
            duty=ns.duty,
            out=Path(ns.out) if ns.out else None,
            say=lambda s: print(f"scan: {s}", flush=True),
            progress=_progress_bar("scan"),
        )
    except LongGeError as exc:
        print(f"scan: {exc}", file=sys.stderr)
        return 1
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    a, b = done.suggested
    print(scan.render(done.survey, marks=(a, b)))
    print(f"  busy (> 5 % of sweeps): {', '.join(map(str, done.busy)) if done.busy else 'none'}")
    print(
        f"  suggested: channels {a} and {b} (quietest, {b - a} MHz apart, inside the ISM band "
        f"0..83); set tx_channel/rx_channel on both nodes (mirrored)"
    )
    print(f"scan: chart {done.chart}, data {done.data}")
    return 0


def cmd_experiment(ns: argparse.Namespace) -> int:
    from longge.measure import runner
    from longge.measure.experiments import EXPERIMENTS
    from longge.radio.options import options_from_args

    if ns.name == "list":
        for e in EXPERIMENTS.values():
            print(f"  {e.name:11s} {e.question}")
        return 0
    names = list(EXPERIMENTS) if ns.name == "all" else [ns.name]
    if names[0] not in EXPERIMENTS:
        print(
            f"experiment: unknown {ns.name!r}; one of {', '.join(EXPERIMENTS)}, all, list",
            file=sys.stderr,
        )
        return 2
    for name in names:
        EXPERIMENTS[name].validate()
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    path, summary = runner.run_experiments(
        names,
        ns.quick,
        options_from_args(ns),
        ns.out,
        ns.keep_testbed,
        say=lambda s: print(f"experiment: {s}", flush=True),
        progress=_progress("experiment"),
        host=ns.host,
        ports=(ns.port, ns.rtt_port),
        queue=ns.queue,
    )
    print(f"  {'experiment':11s} verdict")
    for name, text in summary["verdicts"].items():
        print(f"  {name:11s} {text}")
    print(f"experiment: {summary['seconds']:.0f} s; CSV, JSON and plots in {path}/")
    return 0


def cmd_keygen(ns: argparse.Namespace) -> int:
    from longge.protocol.secure import generate_key

    key = generate_key()
    if not ns.out:
        print(key)
        return 0
    try:
        fd = os.open(ns.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        print(f"keygen: {ns.out} exists; not overwriting a key (remove it first)", file=sys.stderr)
        return 1
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    print(f"keygen: wrote {ns.out} (mode 0600); copy it to the other node's key_file")
    return 0


def cmd_testbed(ns: argparse.Namespace) -> int:
    from longge import testbed
    from longge.daemon.statusview import node_text
    from longge.radio.options import options_from_args

    if ns.action == "down":
        removed = testbed.down()
        print("testbed down" + (f": removed {', '.join(removed)}" if removed else ""))
        return 0
    if ns.action == "up":
        st = testbed.up(
            options_from_args(ns),
            say=lambda s: print(f"testbed: {s}", flush=True),
            queue=ns.queue,
            secured=not ns.insecure,
            serial=ns.serial,
            rf24=ns.backend == "rf24",
        )
    else:
        st = testbed.status()
    if ns.json:
        print(json.dumps(st, indent=2))
        return 0 if st["up"] else 1
    print(
        f"testbed {'UP' if st['up'] else 'DOWN'}: namespaces "
        + ", ".join(f"{k}{'' if v else ' (missing)'}" for k, v in st["namespaces"].items())
    )
    a = st["addresses"]
    print(
        f"  mobile {a['mobile']} (lg-mobile), base {a['base']} (lg-base), "
        f"internet host {a['internet']} (lg-inet, via the base station's NAT)"
    )
    for role, node in st["nodes"].items():
        print(f"{role}:")
        print(node_text(node))
    if st["up"]:
        print("  try: ip netns exec lg-mobile ping -c 3 10.24.0.1")
    return 0 if st["up"] else 1


def cmd_servers(ns: argparse.Namespace) -> int:
    from longge.measure.servers import run_servers

    counters = run_servers(
        ns.iperf_port, ns.rtt_port, ns.log_dir, ready=lambda s: print(f"servers: {s}", flush=True)
    )
    print(f"servers: stopped; RTT echo counters {counters}", flush=True)
    return 0


def _progress(label: str) -> Callable[[str, float], None]:
    last = [""]

    def show(message: str, fraction: float) -> None:
        width = 30
        done = int(max(0.0, min(fraction, 1.0)) * width)
        line = f"{label} [{'#' * done}{'.' * (width - done)}] {fraction:4.0%} {message}"
        if sys.stderr.isatty():
            sys.stderr.write("\r" + line.ljust(len(last[0])))
            if fraction >= 1.0:
                sys.stderr.write("\n")
        elif message != last[0]:
            sys.stderr.write(line + "\n")
        last[0] = line if sys.stderr.isatty() else message
        sys.stderr.flush()

    return show


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _sweep(ns: argparse.Namespace, kind: str) -> int:
    from dataclasses import replace

    # Ctrl-C and SIGTERM stop the sweep cleanly, keeping what was measured (also when the
    # shell started us with SIGINT ignored, as it does for background jobs).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)

    from longge.measure import runner, sweep
    from longge.measure.report import summary_text
    from longge.radio.options import options_from_args

    plan: sweep.TTestPlan | sweep.LTestPlan
    if kind == "tTest":
        plan = sweep.QUICK_TTEST if ns.quick else sweep.TTestPlan()
        changes: dict[str, Any] = {
            "protocol": "tcp" if ns.tcp else "udp",
            "streams": ns.parallel,
        }
        for key, value in (("duration", ns.time), ("length", ns.length), ("repeats", ns.repeats)):
            if value is not None:
                changes[key] = value
        plan = replace(plan, **changes)
    else:
        plan = sweep.QUICK_LTEST if ns.quick else sweep.LTestPlan()
        changes = {}
        if ns.capacity:
            changes["capacity_bps"] = ns.capacity
        if ns.time is not None:
            changes["seconds"] = ns.time
        if ns.length is not None:
            changes["length"] = ns.length
        plan = replace(plan, **changes)
    plan = replace(plan, direction="both" if ns.bidir else "down" if ns.reverse else "up")
    path, summary = runner.run(
        kind,
        plan,
        ns.host,
        ns.port,
        ns.rtt_port,
        options_from_args(ns),
        ns.out,
        ns.keep_testbed,
        say=lambda s: print(f"{kind}: {s}", flush=True),
        progress=_progress(kind),
        queue=ns.queue,
    )
    print(summary_text(summary))
    print(f"{kind}: results, CSV and plots in {path}/")
    return 1 if summary.get("error") else 0


def cmd_ttest(ns: argparse.Namespace) -> int:
    return _sweep(ns, "tTest")


def cmd_ltest(ns: argparse.Namespace) -> int:
    return _sweep(ns, "lTest")


def cmd_tune(ns: argparse.Namespace) -> int:
    from dataclasses import replace

    from longge.measure import report, runner, tune
    from longge.radio.options import options_from_args

    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    plan = tune.QUICK_TUNE if ns.quick else tune.TunePlan()
    if ns.ard_list:
        plan = replace(plan, ard_us=tuple(int(x) for x in ns.ard_list.split(",")))
    if ns.arc_list:
        plan = replace(plan, arc=tuple(int(x) for x in ns.arc_list.split(",")))
    base = options_from_args(ns)
    for ard, arc in itertools.product(plan.ard_us, plan.arc):  # refuse a bad grid up front
        replace(base, ard_us=ard, arc=arc)
    path, summary = runner.run_tune(
        plan,
        base,
        ns.out,
        ns.keep_testbed,
        say=lambda s: print(f"tune: {s}", flush=True),
        progress=_progress("tune"),
        host=ns.host,
        controls=tuple(ns.control),
        ports=(ns.port, ns.rtt_port),
        queue=ns.queue,
    )
    print(report.tune_text(summary))
    print(f"tune: results, grid.csv, heatmaps in {path}/")
    return 0


def cmd_plot(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from longge.measure.plots import plot_runs, rejudge_experiments
    from longge.measure.report import tune_text
    from longge.measure.results import read_summary

    missing = [d for d in ns.dirs if not (Path(d) / "summary.json").exists()]
    if missing:
        print(
            f"plot: no results folder (with a summary.json) at {', '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    made = plot_runs([Path(d) for d in ns.dirs], Path(ns.out) if ns.out else None)
    for p in made:
        print(p)
    for d in ns.dirs:  # verdicts judged again from the saved data, never from memory
        for name, text, _ in rejudge_experiments(Path(d), draw=False):
            print(f"{name}: {text}")
        saved = read_summary(d)
        if saved.get("kind") == "tune" and saved.get("grid"):
            print(tune_text(saved))
    return 0 if made else 1


def _add_server_arguments(p: argparse.ArgumentParser) -> None:
    """Where the base station's servers listen, and the testbed's queue: the same for every
    command that measures (tTest, lTest, tune, experiment)."""
    p.add_argument("-p", "--port", type=int, default=5201, help="iperf3 server port (--host)")
    p.add_argument("--rtt-port", type=int, default=7770, help="RTT echo server port (--host)")
    p.add_argument(
        "--queue",
        choices=["fair", "fifo"],
        default="fair",
        help="the testbed daemons' queue, when the run brings a testbed up: flow-fair or one FIFO",
    )


def _add_sweep_arguments(p: argparse.ArgumentParser, kind: str) -> None:
    from longge.radio.options import add_radio_arguments

    p.add_argument("--quick", action="store_true", help="a short sweep (about a minute)")
    p.add_argument("-t", "--time", type=int, help="seconds per trial (tTest) / per level (lTest)")
    p.add_argument("-l", "--length", type=int, help="UDP datagram size, bytes")
    p.add_argument("--host", help="base station address (default: the testbed)")
    _add_server_arguments(p)
    p.add_argument(
        "--out", help="results folder (default: the checkout's results/DATE-KIND; LONGGE_RESULTS)"
    )
    p.add_argument(
        "--keep-testbed", action="store_true", help="leave a testbed brought up for this run"
    )
    if kind == "tTest":
        p.add_argument("--tcp", action="store_true", help="TCP instead of UDP")
        p.add_argument("-P", "--parallel", type=int, default=1, help="parallel streams")
        p.add_argument("--repeats", type=int, help="trials per load")
    else:
        p.add_argument("--capacity", type=float, help="capacity in bit/s (default: measure it)")
    way = p.add_mutually_exclusive_group()
    way.add_argument(
        "-R",
        "--reverse",
        action="store_true",
        help="load base -> mobile (the download; default: mobile -> base)",
    )
    way.add_argument(
        "--bidir", action="store_true", help="load both ways at once, each direction reported"
    )
    add_radio_arguments(p, timing=False)


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one (not for flags, nor where the help text
    already says what happens without the option)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    from longge.air.server import DEFAULT_SOCKET
    from longge.radio.options import add_radio_arguments

    parser = argparse.ArgumentParser(prog="run.sh", description="LongGe: IP over nRF24L01+")
    parser.add_argument("--version", action="version", version=f"longge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # every subcommand's --help shows each option's default
    sub.add_parser = functools.partial(sub.add_parser, formatter_class=_Help)  # type: ignore[method-assign]

    p = sub.add_parser("radio-bench", help="stream frames between two emulated radios")
    add_radio_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_radio_bench)

    p = sub.add_parser("air", help="run the air emulator in the foreground")
    p.add_argument("--socket", default=DEFAULT_SOCKET, help="Unix socket radios attach to")
    p.add_argument("--per", type=float, default=0.0, help="frame error rate, data and ACK")
    p.add_argument("--ack-per", type=float, default=None, help="ACK error rate (default: --per)")
    p.add_argument("--burst", type=float, default=1.0, help="mean loss burst length, frames")
    p.add_argument("--seed", type=int, default=1, help="seed of the losses")
    p.set_defaults(func=cmd_air)

    p = sub.add_parser("air-stats", help="print a running air emulator's counters")
    p.add_argument(
        "--socket", help=f"default {DEFAULT_SOCKET}, or the testbed's air if that one is not there"
    )
    p.set_defaults(func=cmd_air_stats)

    p = sub.add_parser("daemon", help="run the link daemon (TUN + radios) in the foreground")
    p.add_argument("--config", required=True, help="node config (TOML)")
    add_radio_arguments(p, emulator=False, timing=False, only_given=True)
    p.set_defaults(func=cmd_daemon)

    p = sub.add_parser("status", help="link state and counters of the running daemon(s)")
    p.add_argument("--control", help="daemon control socket (default: testbed, else longge0)")
    p.add_argument("--json", action="store_true", help="print the status objects as JSON")
    p.add_argument(
        "--watch",
        action="store_true",
        help="live view: rates each way, frames, retransmissions, queues, drops, the air",
    )
    p.add_argument("--interval", type=float, default=1.0, help="--watch: seconds between views")
    p.add_argument("--count", type=int, help="--watch: stop after N views (default: Ctrl-C)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("radio", help="change radio settings of the running daemon(s) live")
    rsub = p.add_subparsers(dest="radio_cmd", required=True, metavar="set")
    rsub.add_parser = functools.partial(rsub.add_parser, formatter_class=_Help)  # type: ignore[method-assign]
    q = rsub.add_parser(
        "set", help="e.g. radio set --ard-us 250 --arc 2 (channels: in the config file)"
    )
    add_radio_arguments(q, emulator=False, timing=False, only_given=True, channels=False)
    q.add_argument("--control", help="daemon control socket (default: testbed, else longge0)")
    q.set_defaults(func=cmd_radio_set)

    p = sub.add_parser("tTest", help="throughput sweep: offered load to past capacity")
    _add_sweep_arguments(p, "tTest")
    p.set_defaults(func=cmd_ttest)

    p = sub.add_parser("lTest", help="latency sweep: RTT probes at each offered load")
    _add_sweep_arguments(p, "lTest")
    p.set_defaults(func=cmd_ltest)

    p = sub.add_parser("tune", help="retry tuning: sweep ARD x ARC live, measure, recommend")
    p.add_argument("--quick", action="store_true", help="a 2 x 2 grid (ARD 250/2500, ARC 2/15)")
    p.add_argument("--ard-list", help="ARD values, µs, comma separated (default 250,500,1000,2500)")
    p.add_argument("--arc-list", help="ARC values, comma separated (default 0,1,2,3,5,10,15)")
    p.add_argument("--out", help="results folder; an existing one is resumed")
    p.add_argument(
        "--keep-testbed", action="store_true", help="leave a testbed brought up for this run"
    )
    p.add_argument("--host", help="real link: the base station's address (servers running there)")
    p.add_argument(
        "--control",
        action="append",
        default=[],
        help="a daemon control socket to apply settings to (repeat; real link: the base "
        "station's, e.g. forwarded with ssh -L /tmp/base.sock:/run/longge/longge0.sock)",
    )
    _add_server_arguments(p)
    add_radio_arguments(p, timing=False)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("servers", help="base station: iperf3 server and RTT echo server")
    p.add_argument("--iperf-port", type=int, default=5201, help="iperf3 server port (tcp+udp)")
    p.add_argument("--rtt-port", type=int, default=7770, help="RTT echo server port (udp)")
    p.add_argument("--log-dir", help="write a line per iperf3 test here")
    p.set_defaults(func=cmd_servers)

    p = sub.add_parser("plot", help="re-plot (and overlay) saved results: plot DIR [DIR ...]")
    p.add_argument("dirs", nargs="+", help="results folders (several: overlaid)")
    p.add_argument("--out", help="where to write the plots (default: the first DIR)")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("testbed", help="emulated link in network namespaces: up | down | status")
    p.add_argument(
        "action", choices=["up", "down", "status"], help="bring it up, take it down, or show it"
    )
    p.add_argument(
        "--queue",
        choices=["fair", "fifo"],
        default="fair",
        help="the daemons' queue: flow-fair (default) or one FIFO",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="no link key: frames unauthenticated (to measure what security costs)",
    )
    p.add_argument(
        "--serial",
        action="store_true",
        help="the mobile node's radios are USB modems (firmware/, built natively, on ptys)",
    )
    p.add_argument(
        "--backend",
        choices=["sim", "rf24"],
        default="sim",
        help="rf24: both nodes drive their radios with the real pyrf24, on emulated chips",
    )
    add_radio_arguments(p, timing=False)
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=cmd_testbed)

    p = sub.add_parser("doctor", help="check this node's set-up: radios, SPI, TUN, NAT, tools")
    p.add_argument("--config", help=f"node config (default {'/etc/longge/longge.toml'} if any)")
    p.add_argument("--json", action="store_true", help="the checks as JSON")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("scan", help="2.4 GHz channel survey with the radio's power detector")
    p.add_argument("--sweeps", type=int, default=30, help="passes over channels 0..125")
    p.add_argument("--dwell-us", type=int, default=200, help="listening time per channel")
    p.add_argument("--out", help="chart/data path without extension (default results/...)")
    p.add_argument("--config", help="node config: scan with its rx radio (rf24 backend)")
    p.add_argument(
        "--backend",
        choices=["sim", "rf24"],
        default="sim",
        help="the radio to scan with: the testbed's emulated air, or the RX radio on SPI",
    )
    p.add_argument("--air", help="emulator socket (default: the testbed's)")
    p.add_argument("--wifi", type=int, help="emulator: add a Wi-Fi interferer on channel 1..13")
    p.add_argument("--duty", type=float, default=0.3, help="its share of air time")
    p.add_argument("--traffic", action="store_true", help="testbed: ping the base during the scan")
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("experiment", help="the experiment battery: NAME, all, or list")
    p.add_argument("name", help="tcp-vs-udp, loss, window, parallel, multiplex, cc, all, list")
    p.add_argument("--quick", action="store_true", help="fewer points, shorter trials")
    p.add_argument("--out", help="results folder (default results/<time>-experiment)")
    p.add_argument("--host", help="real link: the base station (servers running there)")
    p.add_argument(
        "--keep-testbed", action="store_true", help="leave a testbed brought up for this run"
    )
    _add_server_arguments(p)
    add_radio_arguments(p, timing=False)
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("keygen", help="make a link key (the same file on both nodes)")
    p.add_argument("--out", help="write it to this file (mode 0600; refuses to overwrite)")
    p.set_defaults(func=cmd_keygen)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("help", "-h", "--help"):
        parser.print_help()
        print(
            "\nalso (run.sh itself): ./run.sh test [pytest options]   lint, type-check, the suite"
        )
        return 0
    ns = parser.parse_args(args)
    try:
        code: int = ns.func(ns)
        return code
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except LongGeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
