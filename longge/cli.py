"""Command line: a table of subcommands, each a thin call into the library."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable

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
    from longge.air.loss import LossModel
    from longge.air.server import AirServer
    from longge.radio.options import RadioOptions

    opts = RadioOptions(per=ns.per, ack_per=ns.ack_per, burst=ns.burst, seed=ns.seed)
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
    from longge.air.server import query

    print(json.dumps(query(ns.socket), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from longge.air.server import DEFAULT_SOCKET
    from longge.radio.options import add_radio_arguments

    parser = argparse.ArgumentParser(prog="run.sh", description="LongGe: IP over nRF24L01+")
    parser.add_argument("--version", action="version", version=f"longge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

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
    p.add_argument("--socket", default=DEFAULT_SOCKET)
    p.set_defaults(func=cmd_air_stats)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("help", "-h", "--help"):
        parser.print_help()
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
