"""The node's commands: the emulator, the daemon and its status, live settings, the testbed,
doctor, scan and keys. Each parses nothing (cli.py does) and calls into the library."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from longge.cli_progress import progress_bar
from longge.errors import ConfigError, LongGeError


def cmd_radio_bench(ns: argparse.Namespace) -> int:
    from longge.air.loss import loss_from_args
    from longge.radio.options import options_from_args
    from longge.radiobench import BenchPlan, format_result, run_bench

    plan = BenchPlan(options_from_args(ns), loss_from_args(ns), ns.seconds, ns.backend)
    result = run_bench(plan, None if ns.json else progress_bar("streaming"))
    if not ns.json and sys.stderr.isatty():
        sys.stderr.write("\n")
    print(json.dumps(result.as_dict()) if ns.json else format_result(result))
    return 0


def cmd_modem_bench(ns: argparse.Namespace) -> int:
    from longge.modembench import ModemBenchPlan, format_result, run_bench

    plan = ModemBenchPlan(seconds=ns.seconds, baud=ns.baud, no_ack=ns.no_ack, rate=ns.rate)
    if not ns.json:
        sys.stderr.write("modem-bench: building and simulating (both ways)...\n")
    result = run_bench(plan)
    print(json.dumps(result) if ns.json else format_result(result))
    return 0 if result["completed"] else 1


def check_air_socket(path: str) -> None:
    """The air binds ``path`` after removing what is there: only ever an old air's socket,
    never a file of the user's nor a running air's (once: any path, deleted)."""
    import stat

    from longge.air import native

    if len(os.fsencode(path)) > 107:
        raise ConfigError("--socket", path, "a path of at most 107 bytes (a Unix socket's)")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return  # (the air makes its folder)
    except OSError as exc:
        raise ConfigError("--socket", path, f"a path the air can bind ({exc.strerror})") from exc
    if not stat.S_ISSOCK(mode):
        raise ConfigError("--socket", path, "a new path or an old air's socket, not a file")
    if native.serving(path):
        raise ConfigError("--socket", path, "a free path: an air emulator serves there already")


def cmd_air(ns: argparse.Namespace) -> int:
    from longge.air import native
    from longge.air.loss import LossModel, loss_from_args
    from longge.air.server import AirServer

    loss = loss_from_args(ns)
    check_air_socket(ns.socket)
    if not native.use_python():  # the compiled server (LONGGE_AIR_SERVER=python: this one)
        args = native.command(ns.socket, loss)
        sys.stdout.flush()
        os.execv(args[0], args)
    server = AirServer(ns.socket, LossModel(loss.spec(), seed=loss.seed))
    wifi = loss.wifi()
    if wifi is not None:
        server.set_interferer({"wifi": wifi.channel, "duty": wifi.duty, "model": wifi.model})
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    signal.signal(signal.SIGINT, lambda *_: server.stop())
    server.bind()
    print(f"air emulator listening on {ns.socket}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.close()
    return 0


def _air_socket(given: str | None) -> str:
    """The air to talk to: ``given``, else the standalone air's socket, else the testbed's."""
    from longge import testbed
    from longge.air.wire import DEFAULT_SOCKET

    if given is not None:
        return given
    bed = str(testbed.paths()["air"])
    return DEFAULT_SOCKET if os.path.exists(DEFAULT_SOCKET) or not os.path.exists(bed) else bed


def _no_air(path: str, exc: OSError) -> LongGeError:
    return LongGeError(
        f"no air emulator answers at {path} ({exc.strerror or exc}): start one "
        "(./run.sh air, or sudo ./run.sh testbed up) or give its --socket"
    )


def cmd_air_stats(ns: argparse.Namespace) -> int:
    from longge.air.wire import query

    path = _air_socket(ns.socket)
    try:
        stats = query(path)
    except OSError as exc:
        raise _no_air(path, exc) from exc
    print(json.dumps(stats, indent=2))
    return 0


def cmd_air_set(ns: argparse.Namespace) -> int:
    from longge.air import control

    path = _air_socket(ns.socket)
    try:
        stats = control.apply(path, control.changes_from_args(ns), ns.node, ns.interferer)
    except OSError as exc:
        raise _no_air(path, exc) from exc
    print(control.describe(stats))
    return 0


def cmd_daemon(ns: argparse.Namespace) -> int:
    from longge import configfile
    from longge.daemon.supervisor import Supervisor
    from longge.radio.options import given_options

    cfg = configfile.load(ns.config)
    overrides = _radio_overrides(given_options(ns), cfg.role)
    if overrides:
        cfg = configfile.from_mapping(overrides, cfg)
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
        return {
            "base": str(p["base"]),
            **{n: str(testbed.node_socket(n)) for n in testbed.recorded_mobiles()},
        }
    return {"node": "/run/longge/longge0.sock"}


def cmd_status(ns: argparse.Namespace) -> int:
    from longge import testbed
    from longge.daemon.control import ControlError
    from longge.daemon.status import DaemonClient, NodeStatus
    from longge.daemon.statusview import node_text

    if ns.watch:
        from longge.daemon.watch import watch

        if not 0 < ns.interval < 3600:  # (NaN and inf are not)
            raise ConfigError("--interval", ns.interval, "a positive number of seconds")
        if ns.count is not None and ns.count < 1:
            raise ConfigError("--count", ns.count, "1 or more views")
        paths = _control_paths(ns)
        air = testbed.paths()["air"]
        on_testbed = not ns.control and air.exists()
        return watch(paths, str(air) if on_testbed else None, ns.interval, ns.count)
    if ns.prometheus:
        from longge.daemon.metrics import exposition

        statuses: dict[str, NodeStatus | None] = {}
        for name, path in _control_paths(ns).items():
            try:
                statuses[name] = DaemonClient(path, timeout=5).status()
            except ControlError as exc:
                print(f"status: {name}: {exc}", file=sys.stderr)
                statuses[name] = None
        print(exposition(statuses), end="")
        return 0 if all(st is not None for st in statuses.values()) else 1
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
    from longge.daemon.statusview import ack_text
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
                f"{name}: {r['rate']} ARD {r['ard_us']} µs ARC {r['arc']} {ack_text(r)} "
                f"payload {r['payload']}"
            )
    if code == 0 and "mode" in options:
        code = _wait_for_mode(tuple(_control_paths(ns).values()), str(options["mode"]))
    return code


def _wait_for_mode(controls: tuple[str, ...], mode: str) -> int:
    """A new mode restarts each daemon's radio processes: tell the user when the link is back
    (both ends up and heard from), so that what they run next measures the link, not its
    restart. With one node's socket (each node changed on its own), when its radio is up."""
    from longge.measure.link import wait_for_mode

    both = len(controls) >= 2
    took = wait_for_mode(controls, mode, timeout_s=15.0, peer=both)
    if took is None:
        what = "the link did not come back" if both else "the radio processes did not start"
        print(f"error: {what} within 15 s in {mode} mode", file=sys.stderr)
        return 1
    if both:
        print(f"link up in {mode} mode ({took:.1f} s)")
    else:
        print(f"radio up in {mode} mode ({took:.1f} s); the link returns once the peer runs it")
    return 0


def cmd_doctor(ns: argparse.Namespace) -> int:
    from longge import doctor

    checks = doctor.run(ns.config)
    if ns.json:
        print(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        print(doctor.render(checks))
    return 1 if any(c.status == doctor.FAIL for c in checks) else 0


def cmd_scan(ns: argparse.Namespace) -> int:
    import math
    from pathlib import Path

    from longge import scan

    if ns.link:
        return _scan_link(ns.control)
    for key, value, ok, allowed in (
        ("--sweeps", ns.sweeps, 1 <= ns.sweeps <= 100_000, "1..100000"),
        ("--dwell-us", ns.dwell_us, 130 <= ns.dwell_us <= 1_000_000, "130..1000000 µs"),
        ("--wifi", ns.wifi, ns.wifi is None or 1 <= ns.wifi <= 13, "a Wi-Fi channel, 1..13"),
        ("--duty", ns.duty, math.isfinite(ns.duty) and 0 < ns.duty <= 1, "0..1 of air time"),
    ):
        if not ok:
            raise ConfigError(key, value, allowed)
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
            progress=progress_bar("scan"),
        )
    except (LongGeError, OSError, ValueError) as exc:  # (the air refused or went away)
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


def _scan_link(control: str | None) -> int:
    """scan --link: the running daemon's picture of the band (docs/design.md §6)."""
    from longge import scan, testbed
    from longge.config import NodeConfig
    from longge.daemon.status import DaemonClient
    from longge.testbed_spec import node_socket

    if control is None:
        base = node_socket("base")
        control = str(base) if testbed.status().get("up") else NodeConfig(insecure=True).control
    try:
        raw = DaemonClient(control).status().raw
    except LongGeError as exc:
        print(f"scan: {exc}", file=sys.stderr)
        return 1
    channels = (raw.get("rx") or {}).get("channels")
    if not isinstance(channels, dict):
        print(f"scan: the link at {control} does not move (radio.agile is off)", file=sys.stderr)
        return 1
    print(f"scan: what the link at {control} sees of the band")
    print(scan.link_view(channels))
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
        what = "is a folder" if os.path.isdir(ns.out) else "exists; not overwriting a key"
        print(f"keygen: {ns.out} {what} (give a new file's path)", file=sys.stderr)
        return 1
    except OSError as exc:
        why = f"a new file in a writable folder ({exc.strerror})"
        raise ConfigError("--out", ns.out, why) from exc
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    print(f"keygen: wrote {ns.out} (mode 0600); copy it to the other node's key_file")
    return 0


def cmd_testbed(ns: argparse.Namespace) -> int:
    from longge import testbed
    from longge.air.loss import loss_from_args
    from longge.daemon.statusview import node_text
    from longge.radio.options import options_from_args

    if ns.action == "down":
        removed = testbed.down()
        print("testbed down" + (f": removed {', '.join(removed)}" if removed else ""))
        return 0
    if ns.action == "up":
        spec = testbed.TestbedSpec(
            options_from_args(ns),
            loss_from_args(ns),
            queue=ns.queue,
            queue_ms=ns.queue_ms,
            mtu=ns.mtu,
            secured=not ns.insecure,
            serial=ns.serial,
            rf24=ns.backend == "rf24",
            irq=not ns.no_irq,
            mobiles=ns.mobiles,
        )
        st = testbed.up(spec, say=lambda s: print(f"testbed: {s}", flush=True))
    else:
        st = testbed.status()
    if ns.json:
        print(json.dumps(st, indent=2))
        return 0 if st["up"] else 1
    print(
        f"testbed {'UP' if st['up'] else 'DOWN'}: namespaces "
        + ", ".join(f"{k}{'' if v else ' (missing)'}" for k, v in st["namespaces"].items())
    )
    a = dict(st["addresses"])
    base, inet = a.pop("base"), a.pop("internet")
    mobiles = ", ".join(f"{name} {ip} (lg-{name})" for name, ip in a.items())
    print(
        f"  {mobiles}, base {base} (lg-base), "
        f"internet host {inet} (lg-inet, via the base station's NAT)"
    )
    owner = (st.get("state") or {}).get("owner")
    if st.get("leftover"):
        print(f"  {st['leftover']}: the next tTest, lTest, tune or experiment takes it down")
    elif owner:
        print(f"  brought up by {owner.get('command')} (pid {owner.get('pid')}), for itself")
    restarts = (st.get("state") or {}).get("restarts") or {}
    if restarts:  # (the keeper's: keeper.py)
        said = ", ".join(f"{name} {n}x" for name, n in sorted(restarts.items()))
        print(f"  started again by the keeper: {said}")
    for role, node in st["nodes"].items():
        print(f"{role}:")
        print(node_text(node))
    if st["up"]:
        first = next(iter(a))
        print(f"  try: ip netns exec lg-{first} ping -c 3 10.24.0.1")
    return 0 if st["up"] else 1
