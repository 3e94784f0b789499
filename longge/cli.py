"""Command line: the parser of every subcommand; each runs a function of longge.commands
(node: the link and its emulator; measure: the measuring commands)."""

from __future__ import annotations

import argparse
import functools
import os
import sys

from longge import __version__
from longge.commands import measure, node
from longge.errors import ConfigError, LongGeError


def port(text: str) -> int:
    """A TCP/UDP port, 1..65535 (argparse says which option, exit 2)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1..65535)")
    return n


def _add_server_arguments(p: argparse.ArgumentParser) -> None:
    """Where the base station's servers listen, and the testbed's queue: the same for every
    command that measures (tTest, lTest, tune, experiment)."""
    p.add_argument("-p", "--port", type=port, default=5201, help="iperf3 server port (--host)")
    p.add_argument("--rtt-port", type=port, default=7770, help="RTT echo server port (--host)")
    p.add_argument(
        "--queue",
        choices=["fair", "fifo"],
        default="fair",
        help="the testbed daemons' queue, when the run brings a testbed up: flow-fair or one FIFO",
    )


def _add_sweep_arguments(p: argparse.ArgumentParser, kind: str) -> None:
    from longge.air.loss import add_loss_arguments
    from longge.radio.options import add_radio_arguments

    p.add_argument(
        "--quick", action="store_true", help="a short sweep (tTest ~1.5 min, lTest ~2.5 min)"
    )
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
    p.add_argument(
        "--pdr-loss",
        type=float,
        help="datagram loss the partial drop rate (PDR) allows, a share (default 0.005: 0.5 %%)",
    )
    if kind == "tTest":
        p.add_argument("--tcp", action="store_true", help="TCP instead of UDP")
        p.add_argument("-P", "--parallel", type=int, default=1, help="parallel streams")
        p.add_argument("--repeats", type=int, help="trials per load")
    else:
        p.add_argument("--capacity", type=float, help="capacity in bit/s (default: measure it)")
    p.add_argument(
        "--mobiles",
        help="the testbed's mobiles that load the link at once, each an equal part (lTest: "
        "and each probes): all, or numbers with commas (1,3); without a running testbed it "
        "brings up as many mobiles as it names (all: 3)",
    )
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
    add_radio_arguments(p)
    add_loss_arguments(p)


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one (not for flags, nor where the help text
    already says what happens without the option)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    from longge.air.control import add_set_arguments
    from longge.air.loss import add_loss_arguments
    from longge.air.wire import DEFAULT_SOCKET
    from longge.radio.options import add_radio_arguments

    parser = argparse.ArgumentParser(prog="run.sh", description="LongGe: IP over nRF24L01+")
    parser.add_argument("--version", action="version", version=f"longge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # every subcommand's --help shows each option's default
    sub.add_parser = functools.partial(sub.add_parser, formatter_class=_Help)  # type: ignore[method-assign]

    p = sub.add_parser("radio-bench", help="stream frames between two emulated radios")
    add_radio_arguments(p)
    add_loss_arguments(p)
    p.add_argument("--seconds", type=float, default=5.0, help="how long to stream, s")
    p.add_argument(
        "--backend",
        choices=["sim", "rf24"],
        default="sim",
        help="rf24: each radio driven by the real pyrf24 on an emulated chip, with a Pi's SPI "
        "timing (LONGGE_SPI_TIMING=off: none)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=node.cmd_radio_bench)

    p = sub.add_parser(
        "modem-bench", help="the USB modem's AVR image on a simulated ATmega328P, each way"
    )
    p.add_argument("--seconds", type=float, default=10.0, help="simulated seconds each way")
    p.add_argument("--baud", type=int, default=2_000_000, help="host line rate (8N1)")
    p.add_argument("--no-ack", action="store_true", help="no-ack frames (stream mode's)")
    p.add_argument("--rate", default="2M", help="air data rate: 2M | 1M | 250k")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=node.cmd_modem_bench)

    p = sub.add_parser(
        "air",
        help="run the air emulator in the foreground (air set: change a running one's channel)",
    )
    p.add_argument("--socket", default=DEFAULT_SOCKET, help="Unix socket radios attach to")
    add_loss_arguments(p)
    p.set_defaults(func=node.cmd_air)
    air_sub = p.add_subparsers(dest="air_action", metavar="{set}")
    q = air_sub.add_parser(
        "set",
        help="change a running air's channel live: losses, path loss, Wi-Fi (every link, "
        "or --node NAME's)",
    )
    add_set_arguments(q)
    q.set_defaults(func=node.cmd_air_set)

    p = sub.add_parser("air-stats", help="print a running air emulator's counters")
    p.add_argument(
        "--socket", help=f"default {DEFAULT_SOCKET}, or the testbed's air if that one is not there"
    )
    p.set_defaults(func=node.cmd_air_stats)

    p = sub.add_parser("daemon", help="run the link daemon (TUN + radios) in the foreground")
    p.add_argument("--config", required=True, help="node config (TOML)")
    add_radio_arguments(p, only_given=True)
    p.set_defaults(func=node.cmd_daemon)

    p = sub.add_parser("status", help="link state and counters of the running daemon(s)")
    p.add_argument("--control", help="daemon control socket (default: testbed, else longge0)")
    p.add_argument("--json", action="store_true", help="print the status objects as JSON")
    p.add_argument(
        "--prometheus",
        action="store_true",
        help="print the counters as Prometheus text (node_exporter's textfile collector)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="live view: rates each way, frames, retransmissions, queues, drops, the air",
    )
    p.add_argument("--interval", type=float, default=1.0, help="--watch: seconds between views")
    p.add_argument("--count", type=int, help="--watch: stop after N views (default: Ctrl-C)")
    p.set_defaults(func=node.cmd_status)

    p = sub.add_parser("radio", help="change radio settings of the running daemon(s) live")
    rsub = p.add_subparsers(dest="radio_cmd", required=True, metavar="set")
    rsub.add_parser = functools.partial(rsub.add_parser, formatter_class=_Help)  # type: ignore[method-assign]
    q = rsub.add_parser(
        "set", help="e.g. radio set --ard-us 250 --arc 2 (channels: in the config file)"
    )
    add_radio_arguments(q, only_given=True, channels=False)
    q.add_argument("--control", help="daemon control socket (default: testbed, else longge0)")
    q.set_defaults(func=node.cmd_radio_set)

    p = sub.add_parser("tTest", help="throughput sweep: offered load to past capacity")
    _add_sweep_arguments(p, "tTest")
    p.set_defaults(func=measure.cmd_ttest)

    p = sub.add_parser("lTest", help="latency sweep: RTT probes at each offered load")
    _add_sweep_arguments(p, "lTest")
    p.set_defaults(func=measure.cmd_ltest)

    p = sub.add_parser("tune", help="retry tuning: sweep ARD x ARC live, measure, recommend")
    p.add_argument("--quick", action="store_true", help="a 2 x 2 grid (ARD 250/2500, ARC 2/15)")
    p.add_argument("--ard-list", help="ARD values, µs, comma separated (default 250,500,1000,2500)")
    p.add_argument("--arc-list", help="ARC values, comma separated (default 0,1,2,3,5,10,15)")
    p.add_argument(
        "-t",
        "--time",
        type=int,
        help="seconds of each trial and of each point's RTT probes, 1..3600 (default 5; "
        "--quick: 3)",
    )
    p.add_argument(
        "--pdr-loss",
        type=float,
        help="a setting losing more than this share of its datagrams at every load is not "
        "recommended while another loses less (default 0.005: 0.5 %%)",
    )
    p.add_argument(
        "--vs-stream",
        action="store_true",
        help="then measure stream mode too (both daemons switched live, and back) and say "
        "which mode carries more",
    )
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
    add_radio_arguments(p)
    add_loss_arguments(p)
    p.set_defaults(func=measure.cmd_tune)

    p = sub.add_parser("servers", help="base station: iperf3 server and RTT echo server")
    p.add_argument("--iperf-port", type=port, default=5201, help="iperf3 server port (tcp+udp)")
    p.add_argument("--rtt-port", type=port, default=7770, help="RTT echo server port (udp)")
    p.add_argument("--log-dir", help="write a line per iperf3 test here")
    p.add_argument(
        "--bind",
        help="the address to listen on: the base's link address (default: [node] address of "
        "/etc/longge/longge.toml); 0.0.0.0 listens on every interface",
    )
    p.add_argument(
        "--user", help="give up root for this user once the sockets and the log are open"
    )
    p.set_defaults(func=measure.cmd_servers)

    p = sub.add_parser("plot", help="re-plot (and overlay) saved results: plot DIR [DIR ...]")
    p.add_argument("dirs", nargs="+", help="results folders (several: overlaid)")
    p.add_argument("--out", help="where to write the plots (default: the first DIR)")
    p.set_defaults(func=measure.cmd_plot)

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
        "--queue-ms",
        type=int,
        help="the daemons' queue limit: packets older than this are dropped (default: 100)",
    )
    p.add_argument("--mtu", type=int, help="the TUN interfaces' MTU (default: 1500)")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="no link key: frames unauthenticated (to measure what security costs)",
    )
    p.add_argument(
        "--serial",
        action="store_true",
        help="the mobiles' radios are USB modems (firmware/, built natively, on ptys); with "
        "--mobiles 2..5 the base's too",
    )
    p.add_argument(
        "--mobiles",
        type=int,
        default=1,
        help="mobiles on the base: 1 (lg-mobile, 10.24.0.2) or 2..5 (lg-mobile1 ... at "
        "10.24.0.2 ...; any backend)",
    )
    p.add_argument(
        "--backend",
        choices=["sim", "rf24"],
        default="sim",
        help="rf24: both nodes drive their radios with the real pyrf24, on emulated chips",
    )
    p.add_argument(
        "--no-irq",
        action="store_true",
        help="rf24: poll the radios every 0.2 ms instead of sleeping on their IRQ pins",
    )
    add_radio_arguments(p)
    add_loss_arguments(p)
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=node.cmd_testbed)

    p = sub.add_parser("doctor", help="check this node's set-up: radios, SPI, TUN, NAT, tools")
    p.add_argument("--config", help=f"node config (default {'/etc/longge/longge.toml'} if any)")
    p.add_argument("--json", action="store_true", help="the checks as JSON")
    p.set_defaults(func=node.cmd_doctor)

    p = sub.add_parser("scan", help="2.4 GHz channel survey with the radio's power detector")
    p.add_argument("--sweeps", type=int, default=30, help="passes over channels 0..125")
    p.add_argument("--dwell-us", type=int, default=200, help="listening time per channel")
    p.add_argument("--out", help="chart/data path without extension (default results/...)")
    p.add_argument(
        "--config",
        help="node config: scan with its rx radio (rf24; default /etc/longge/longge.toml if any)",
    )
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
    p.add_argument(
        "--link",
        action="store_true",
        help="what a running agile link sees of the band (its daemon's picture, no radio "
        "taken): --control SOCKET, default the testbed's base, else the installed daemon's",
    )
    p.add_argument("--control", help="with --link: the daemon's control socket")
    p.set_defaults(func=node.cmd_scan)

    p = sub.add_parser("experiment", help="the experiment battery: NAME, all, or list")
    p.add_argument(
        "name",
        help="tcp-vs-udp, loss, window, parallel, multiplex, cc, mode, multinode, adaptive, "
        "adaptive-stream, hostile, agility, all, list",
    )
    p.add_argument("--quick", action="store_true", help="fewer points, shorter trials")
    p.add_argument(
        "--values",
        help="one experiment: only these values of what it varies, with commas (tcp-vs-udp: "
        "udp,tcp; loss: 0,0.1; multinode: numbers of mobiles; adaptive: settings, e.g. "
        "adapt,2M/15); default: its plan's",
    )
    p.add_argument(
        "-t",
        "--time",
        type=int,
        help="seconds of each trial (multinode: of each direction; adaptive: of each phase), "
        "2..3600; default: its plan's",
    )
    p.add_argument("--out", help="results folder (default results/<time>-experiment)")
    p.add_argument("--host", help="real link: the base station (servers running there)")
    p.add_argument(
        "--keep-testbed", action="store_true", help="leave a testbed brought up for this run"
    )
    p.add_argument(
        "--backend",
        choices=["sim", "rf24", "serial"],
        default="sim",
        help="multinode: the testbeds' radios (rf24: the real pyrf24 on emulated chips; "
        "serial: every node's on native USB modems)",
    )
    _add_server_arguments(p)
    add_radio_arguments(p)
    add_loss_arguments(p)
    p.set_defaults(func=measure.cmd_experiment)

    p = sub.add_parser("keygen", help="make a link key (the same file on both nodes)")
    p.add_argument("--out", help="write it to this file (mode 0600; refuses to overwrite)")
    p.set_defaults(func=node.cmd_keygen)
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
    except BrokenPipeError:  # (the reader went: `status | head`): quiet, as other tools are
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
