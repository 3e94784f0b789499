"""The measuring commands: tTest, lTest, tune, the experiment battery, the base station's
servers and re-plotting. Each hands a plan to measure.runner and prints the report."""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
from pathlib import Path
from typing import Any

from longge.cli_progress import progress
from longge.errors import ConfigError


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def exit_status(summary: dict[str, Any]) -> int:
    """What a script is told of a measurement: 0 measured, 1 failed (its error in the
    summary, or an experiment of it that failed), 130 interrupted (Ctrl-C, SIGTERM), as a
    shell says of a command ended so; what was measured is kept either way."""
    from longge.measure.experiments import any_failed

    if summary.get("interrupted"):
        return 130
    return 1 if summary.get("error") or any_failed(summary.get("verdicts") or {}) else 0


def cmd_servers(ns: argparse.Namespace) -> int:
    from longge.measure.servers import run_servers

    log_dir = ns.log_dir
    if log_dir is not None and not (os.path.isdir(log_dir) and os.access(log_dir, os.W_OK)):
        raise ConfigError("--log-dir", ns.log_dir, "an existing folder it can write in")
    counters = run_servers(
        ns.iperf_port,
        ns.rtt_port,
        ns.log_dir,
        ready=lambda s: print(f"servers: {s}", flush=True),
        host=servers_address(ns.bind),
        user=ns.user,
    )
    print(f"servers: stopped; RTT echo counters {counters}", flush=True)
    return 0


def servers_address(bind: str | None, path: str | None = None) -> str:
    """Where the servers listen: ``--bind``, else the installed node's own address on the link
    (``[node] address`` of /etc/longge/longge.toml, read without its [security]: the key may not
    be readable here); an IPv4 address, or ConfigError naming --bind."""
    import ipaddress
    import tomllib

    from longge.config import DEFAULT_PATH

    if bind is None:
        source = path or DEFAULT_PATH
        try:
            with open(source, "rb") as f:
                node = tomllib.load(f).get("node", {})
            bind = str(ipaddress.ip_interface(node.get("address", "10.24.0.1/24")).ip)
        except (OSError, tomllib.TOMLDecodeError, ValueError, AttributeError) as exc:
            raise ConfigError(
                "--bind",
                None,
                f"the base's link address to listen on (none given, and {source} gave none: "
                f"{exc}); 0.0.0.0 listens on every interface, reachable from anywhere",
            ) from exc
    try:
        return str(ipaddress.IPv4Address(bind))
    except ValueError:
        raise ConfigError("--bind", bind, "an IPv4 address of this machine (the link's)") from None


def _int_list(key: str, text: str) -> tuple[int, ...]:
    """ "250,500,1000" -> (250, 500, 1000): whole numbers, at least one, each once."""
    try:
        values = tuple(dict.fromkeys(int(x) for x in text.split(",")))
    except ValueError:
        values = ()
    if not values:
        raise ConfigError(key, text, "comma-separated whole numbers, e.g. 250,500,1000")
    return values


def check_sweep_arguments(ns: argparse.Namespace) -> None:
    """Refuse a sweep's own numbers by name before anything starts (a testbed takes seconds to
    come up; a NaN capacity once failed only after it had)."""
    import math

    capacity = getattr(ns, "capacity", None)
    if capacity is not None and not (math.isfinite(capacity) and capacity > 0):
        raise ConfigError(
            "capacity", capacity, "bit/s above 0 (or leave it out: lTest measures it first)"
        )
    for key, lo, hi in (
        ("time", 1, 3600),
        ("length", 16, 65507),
        ("repeats", 1, 100),
        ("parallel", 1, 128),
    ):
        value = getattr(ns, key, None)
        if value is not None and not lo <= value <= hi:
            raise ConfigError(key, value, f"{lo}..{hi}")


def _sweep(ns: argparse.Namespace, kind: str) -> int:
    from dataclasses import replace

    check_sweep_arguments(ns)

    # Ctrl-C and SIGTERM stop the sweep cleanly, keeping what was measured (also when the
    # shell started us with SIGINT ignored, as it does for background jobs).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)

    from longge.air.loss import loss_from_args
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
        if ns.capacity is not None:
            changes["capacity_bps"] = ns.capacity
        if ns.time is not None:
            changes["seconds"] = ns.time
        if ns.length is not None:
            changes["length"] = ns.length
        plan = replace(plan, **changes)
    if ns.pdr_loss is not None:
        plan = replace(plan, pdr_loss=ns.pdr_loss)
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
        progress=progress(kind),
        queue=ns.queue,
        loss=loss_from_args(ns),
        mobiles=getattr(ns, "mobiles", None),
    )
    print(summary_text(summary))
    print(f"{kind}: results, CSV and plots in {path}/")
    return exit_status(summary)


def cmd_ttest(ns: argparse.Namespace) -> int:
    return _sweep(ns, "tTest")


def cmd_ltest(ns: argparse.Namespace) -> int:
    return _sweep(ns, "lTest")


def cmd_tune(ns: argparse.Namespace) -> int:
    from dataclasses import replace

    from longge.air.loss import loss_from_args
    from longge.measure import report, runner, tune_plan
    from longge.radio.options import options_from_args

    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    plan = tune_plan.QUICK_TUNE if ns.quick else tune_plan.TunePlan()
    if ns.ard_list is not None:
        plan = replace(plan, ard_us=_int_list("--ard-list", ns.ard_list))
    if ns.arc_list is not None:
        plan = replace(plan, arc=_int_list("--arc-list", ns.arc_list))
    if ns.time is not None:
        if not 1 <= ns.time <= 3600:
            raise ConfigError("--time", ns.time, "1..3600 s")
        plan = replace(plan, trial_s=ns.time, probe_s=ns.time)
    plan = replace(plan, vs_stream=ns.vs_stream)
    if ns.pdr_loss is not None:
        plan = replace(plan, pdr_loss=ns.pdr_loss)
    base = options_from_args(ns)
    if base.mode != "esb":
        raise ConfigError(
            "mode",
            base.mode,
            "esb: tune varies ARD and ARC, which stream mode does not use (--vs-stream "
            "compares the best of them with stream mode)",
        )
    for ard, arc in itertools.product(plan.ard_us, plan.arc):  # refuse a bad grid up front
        replace(base, ard_us=ard, arc=arc)
    path, summary = runner.run_tune(
        plan,
        base,
        ns.out,
        ns.keep_testbed,
        say=lambda s: print(f"tune: {s}", flush=True),
        progress=progress("tune"),
        host=ns.host,
        controls=tuple(ns.control),
        ports=(ns.port, ns.rtt_port),
        queue=ns.queue,
        loss=loss_from_args(ns),
    )
    print(report.tune_text(summary))
    print(f"tune: results, grid.csv, heatmaps in {path}/")
    return exit_status(summary)


def cmd_experiment(ns: argparse.Namespace) -> int:
    from longge.air.loss import loss_from_args
    from longge.measure import own_testbeds, runner
    from longge.measure.experiment_plans import EXPERIMENTS, narrowed
    from longge.radio.options import options_from_args

    own_all = own_testbeds.modules()
    if ns.name == "list":
        for e in EXPERIMENTS.values():
            print(f"  {e.name:11s} {e.question}")
        for m in own_all:
            print(f"  {m.NAME:11s} {m.QUESTION}")
        return 0
    names = list(EXPERIMENTS) if ns.name == "all" else [ns.name]
    own = [m for m in own_all if ns.name in ("all", m.NAME)]
    names = [n for n in names if n not in {m.NAME for m in own_all}]
    if own and ns.host:
        print(
            f"experiment: {', '.join(m.NAME for m in own)} bring(s) up testbeds of their own: "
            "not with --host (a real link)",
            file=sys.stderr,
        )
        if not names:
            return 2
        own = []
    if names and names[0] not in EXPERIMENTS:
        known = ", ".join([*EXPERIMENTS, *(m.NAME for m in own_all)])
        print(f"experiment: unknown {ns.name!r}; one of {known}, all, list", file=sys.stderr)
        return 2
    narrowing = ns.values is not None or ns.time is not None
    if narrowing and ns.name == "all":
        raise ConfigError(
            "--values" if ns.values is not None else "--time",
            ns.values if ns.values is not None else ns.time,
            "one experiment's plan, not all's (run each by its name)",
        )
    if ns.time is not None and not 2 <= ns.time <= 3600:
        raise ConfigError("--time", ns.time, "2..3600 s")
    experiments = [narrowed(EXPERIMENTS[n], ns.values, ns.time) for n in names]
    if options_from_args(ns).mode != "esb":
        raise ConfigError(
            "mode",
            ns.mode,
            "esb: the battery starts on ESB (the mode experiment switches to stream and back)",
        )
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    if not names:
        return _own(ns, None, own)
    path, summary = runner.run_experiments(
        experiments,
        ns.quick,
        options_from_args(ns),
        ns.out,
        ns.keep_testbed,
        say=lambda s: print(f"experiment: {s}", flush=True),
        progress=progress("experiment"),
        host=ns.host,
        ports=(ns.port, ns.rtt_port),
        queue=ns.queue,
        loss=loss_from_args(ns),
    )
    print(f"  {'experiment':11s} verdict")
    for name, text in summary["verdicts"].items():
        print(f"  {name:11s} {text}")
    print(f"experiment: {summary['seconds']:.0f} s; CSV, JSON and plots in {path}/")
    if summary.get("interrupted") or summary.get("error"):
        return exit_status(summary)  # (the own-testbed ones not begun)
    code = _own(ns, path, own) if own else 0
    return exit_status(summary) or code


def _own(ns: argparse.Namespace, path: Path | None, own: list[Any]) -> int:
    """The experiments with testbeds of their own (after the battery's, in its folder, with
    ``all``): they choose their settings, so the link options must be the defaults."""
    import time

    from longge.air.loss import AirLoss, loss_from_args
    from longge.measure.experiments import failed_verdict
    from longge.measure.results import ResultsDir, default_dir, read_summary, system_context
    from longge.radio.options import RadioOptions, options_from_args

    names = ", ".join(m.NAME for m in own)
    loss = loss_from_args(ns)
    if (
        options_from_args(ns) != RadioOptions()
        or ns.queue != "fair"
        or loss != AirLoss(seed=loss.seed)
    ):
        raise ConfigError(
            "options",
            names,
            f"the defaults (no link options, fair queue, no loss): {names} choose(s) the "
            "settings of the testbeds they bring up",
        )
    from longge import testbed

    backend = getattr(ns, "backend", "sim")
    if backend != "sim":  # (an experiment's radios: its module's BACKENDS, else the sim's)
        refusing = [m.NAME for m in own if backend not in getattr(m, "BACKENDS", ("sim",))]
        if refusing:
            raise ConfigError("--backend", backend, f"sim for {', '.join(refusing)}")
    if ns.values is not None:  # (refused by name before anything else)
        for m in own:
            m.check_values(ns.values)
    testbed.clear_for(f"experiment {names}", lambda s: print(f"experiment: {s}", flush=True))
    results = ResultsDir(path or ns.out or default_dir("experiment"))
    if path is None:
        results.write_json("context.json", {"system": system_context()})
    # the folder's summary.json, as the battery's (with all: the battery's, its verdicts added)
    battery = read_summary(results.path) if path is not None else {}
    summary: dict[str, Any] = {
        "kind": "experiments",
        "verdicts": dict(battery.get("verdicts") or {}),
        "interrupted": False,
    }

    def say(text: str) -> None:
        print(f"experiment: {text}", flush=True)

    t_all = time.time()
    try:
        for m in own:
            t0 = time.time()
            try:
                got = m.run(
                    ns.quick,
                    results,
                    say,
                    progress("experiment"),
                    values=ns.values,
                    seconds=ns.time,
                    **({"backend": backend} if hasattr(m, "BACKENDS") else {}),
                )
                summary["verdicts"][m.NAME] = got["verdict"]
            except (ConfigError, KeyboardInterrupt):
                raise
            except Exception as exc:  # (as the battery: one that fails does not cost the rest)
                summary["verdicts"][m.NAME] = failed_verdict(exc)
            print(f"  {m.NAME:11s} {summary['verdicts'][m.NAME]}")
            print(f"experiment: {m.NAME}: {time.time() - t0:.0f} s")
    except KeyboardInterrupt:
        summary["interrupted"] = True
        say("interrupted: keeping what was measured")
    finally:
        summary["seconds"] = round(time.time() - t_all + float(battery.get("seconds") or 0), 1)
        results.write_summary({**battery, **summary})
    print(f"experiment: CSV, JSON and plots in {results.path}/")
    return exit_status(summary)


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
    try:
        made = plot_runs([Path(d) for d in ns.dirs], Path(ns.out) if ns.out else None)
        for p in made:
            print(p)
        for d in ns.dirs:  # verdicts judged again from the saved data, never from memory
            for name, text, _ in rejudge_experiments(Path(d), draw=False):
                print(f"{name}: {text}")
            saved = read_summary(d)
            if saved.get("kind") == "tune" and saved.get("grid"):
                print(tune_text(saved))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        # a summary.json edited, cut short or not LongGe's: say which and what, no traceback
        what = f"missing {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        print(
            f"plot: {', '.join(ns.dirs)}: a summary.json that is not a LongGe run's ({what})",
            file=sys.stderr,
        )
        return 2
    if not made:
        print(
            f"plot: nothing to plot in {', '.join(ns.dirs)} (no points, levels or grid)",
            file=sys.stderr,
        )
    return 0 if made else 1
