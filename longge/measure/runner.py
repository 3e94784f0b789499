"""Run tTest / lTest end to end: find the link, record the context, sweep, save, plot.

Where the link is, in this order: ``--host`` (a real base station, clients run here); the
testbed if it is up; a local daemon's peer (``/run/longge/longge0.sock``); otherwise the
emulated testbed is brought up for the run (and taken down after it), which is what a new
user without radios sees first.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from longge import testbed
from longge.air.loss import NO_LOSS, AirLoss
from longge.daemon.control import ControlError
from longge.daemon.status import DaemonClient, NodeStatus
from longge.errors import ConfigError
from longge.measure import plots
from longge.measure.link import Target, frames_of
from longge.measure.ltest import LTest
from longge.measure.results import ResultsDir, default_dir, system_context
from longge.measure.sweep import LTestPlan, Progress, TTestPlan
from longge.measure.ttest import TTest
from longge.radio.options import RadioOptions

LOCAL_CONTROL = "/run/longge/longge0.sock"

Say = Callable[[str], None]


@contextlib.contextmanager
def link_for(
    kind: str,
    host: str | None,
    ports: tuple[int, int],
    opts: RadioOptions,
    keep_testbed: bool,
    say: Say,
    queue: str = "fair",
    loss: AirLoss = NO_LOSS,
    mobiles: int | None = None,
) -> Iterator[tuple[Target, bool]]:
    """The link a ``kind`` run measures (resolve_target), and whatever happens in the run (an
    error anywhere, Ctrl-C, SIGTERM) a testbed it brought up taken down after it, unless asked
    to keep it; one it found running is left as it was."""
    target, started = resolve_target(
        host, *ports, opts, say, queue, loss, mobiles, owner=None if keep_testbed else kind
    )
    try:
        yield target, started
    finally:
        if started and not keep_testbed:
            say("taking the testbed down")
            testbed.down()


def resolve_target(
    host: str | None,
    iperf_port: int,
    rtt_port: int,
    opts: RadioOptions,
    say: Say,
    queue: str = "fair",
    loss: AirLoss = NO_LOSS,
    mobiles: int | None = None,
    owner: str | None = None,
) -> tuple[Target, bool]:
    """The target, and whether we brought the testbed up ourselves (with ``mobiles`` mobiles,
    if given; a running testbed is taken as it is; one left by a run that was killed is said,
    taken down and brought up anew). ``owner``: the run's command, recorded in a testbed it
    brings up to take down after (None: kept, --keep-testbed)."""
    if host is not None:
        check_host(host)
        controls = _local_controls()
        local = (lambda: DaemonClient(LOCAL_CONTROL).status()) if controls else None
        check_asked(opts, loss, queue, local, None)
        return Target(host, iperf_port, rtt_port, None, controls), False
    testbed.down_if_left(say)  # (then this run brings up its own)
    p = testbed.paths()
    if p["state"].exists() and testbed.status().get("up"):
        mobile = str(testbed.node_socket(testbed.recorded_mobiles()[0]))
        check_asked(
            opts, loss, queue, lambda: DaemonClient(mobile).status(), testbed.recorded_spec() or {}
        )
        return testbed_target(), False
    if os.path.exists(LOCAL_CONTROL):
        st = DaemonClient(LOCAL_CONTROL).status()  # (asked once: its peer, its settings)
        check_asked(opts, loss, queue, lambda: st, None)
        return Target(st.node.peer, iperf_port, rtt_port, None, (LOCAL_CONTROL,)), False
    say("no radio configured: bringing up the emulated testbed (./run.sh testbed up)")
    spec = testbed.TestbedSpec(opts, loss, queue, mobiles=mobiles or 1)
    testbed.up(spec, say=lambda s: say(f"testbed: {s}"), owner=owner)
    return testbed_target(), True


def _local_controls() -> tuple[str, ...]:
    """A node's daemon here, with --host (its control socket), or none."""
    return (LOCAL_CONTROL,) if os.path.exists(LOCAL_CONTROL) else ()


#: The radio options' flags, and the key of the running mobile node's settings each must match.
_ASKED = {
    "rate": ("--rate", "rate"),
    "ard_us": ("--ard-us", "ard_us"),
    "arc": ("--arc", "arc"),
    "auto_ack": ("--no-ack", "auto_ack"),
    "payload": ("--payload", "payload"),
    "address_width": ("--address-width", "address_width"),
    "crc": ("--crc", "crc"),
    "channel": ("--channel", "tx_channel"),  # (the mobile sends on the uplink channel)
    "mode": ("--mode", "mode"),
    "adapt": ("--adapt", "adapt"),
}


def check_asked(
    opts: RadioOptions,
    loss: AirLoss,
    queue: str,
    status: Callable[[], NodeStatus] | None,
    testbed_spec: dict[str, Any] | None,
) -> None:
    """Radio, loss and queue options set up a testbed the run brings up. A link that already
    runs (a testbed up, a node's daemon, ``--host``) is measured as it is: an option that asks
    for something else is refused, naming what the link runs and how to change it. (They were
    ignored, and another link was measured than the one asked for.) ``status``: the mobile
    node's status, asked only when an option was given (None: no daemon here);
    ``testbed_spec``: the running testbed's (None: not a testbed)."""
    default = RadioOptions()
    asked = [f for f in _ASKED if getattr(opts, f) != getattr(default, f)]
    if not asked and queue == "fair" and loss == NO_LOSS:
        return  # (nothing asked: nothing to ask the daemon)
    running = status() if status is not None else None
    how = (
        "./run.sh radio set OPTIONS (on the testbed it changes both nodes; on a real link run it "
        "on each node), or ./run.sh testbed down and run again"
    )
    for field_name in asked:
        flag, key = _ASKED[field_name]
        want = getattr(opts, field_name)
        have = None if running is None else running.radio.get(key)
        if have != want:
            where = (
                "there is no daemon here to ask (--host)"
                if running is None
                else f"the running link has {key} = {have!r}"
            )
            raise ConfigError(
                flag, want, f"it sets up a testbed this run brings up; {where}: {how}"
            )
    if queue != "fair" and (running is None or running.node.queue != queue):
        have_q = "?" if running is None else running.node.queue
        raise ConfigError("--queue", queue, f"the running link's queue is {have_q!r}: {how}")
    if loss != NO_LOSS and (testbed_spec or {}).get("loss") != loss.as_dict():
        had = "none (a real link)" if testbed_spec is None else testbed_spec.get("loss")
        raise ConfigError(
            "--per/--ack-per/--burst/--seed",
            loss.as_dict(),
            f"the emulated air's losses are set when the testbed comes up; the running one's: "
            f"{had} (./run.sh testbed down, then run again)",
        )


def check_host(host: str) -> None:
    """A base station's address that resolves (else every trial would fail on its own)."""
    import socket

    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
        if not host.strip():
            raise OSError("empty")
    except (OSError, UnicodeError) as exc:
        raise ConfigError("--host", host, f"the base station's address or name ({exc})") from exc


def testbed_target() -> Target:
    """The testbed as a measurement's target: clients in lg-mobile, servers in lg-base, both
    daemons' control sockets, the air."""
    p = testbed.paths()
    first = testbed.recorded_mobiles()[0]  # (several mobiles: measured from the first, for now)
    return Target(
        testbed.BASE_IP,
        testbed.IPERF_PORT,
        testbed.RTT_PORT,
        f"lg-{first}",
        (str(testbed.node_socket(first)), str(p["base"])),
        str(p["air"]),
    )


def make_context(target: Target, length: int, both_ways: bool = False) -> dict[str, Any]:
    """context.json: the machine, the link (its daemons, the model's capacity for
    ``length``-byte datagrams, each direction's if ``both_ways`` are loaded) and, on the
    testbed, what the testbed was built from."""
    context = {**system_context(), **target.context(length, both_ways)}
    spec = testbed.recorded_spec() if target.air else None
    if spec is not None:
        context["testbed"] = spec
    return context


class Job(Protocol):
    """One measurement the runner runs: tTest, lTest, tune, the battery."""

    def run(self) -> dict[str, Any]:
        """Measure; the whole summary."""
        ...

    def partial(self) -> dict[str, Any]:
        """What was measured so far (after Ctrl-C or an error)."""
        ...


def _measure(
    target: Target,
    results: ResultsDir,
    say: Say,
    start: Callable[[ResultsDir, dict[str, Any]], Job],
    length: int = 1400,
    both_ways: bool = False,
    check: Callable[[ResultsDir, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The skeleton every measurement runs in (inside ``link_for``; ``results`` made before
    it, so that a folder that cannot be one is refused before a testbed comes up): the
    context, the job, and whatever stops the job (Ctrl-C, an error) the part measured kept.
    The caller writes the summary and draws the plots."""
    say(f"results in {results.path}")
    context = make_context(target, length, both_ways)
    if check is not None:  # (before context.json: a folder refused keeps its own)
        check(results, context)
    results.write_json("context.json", context)
    t0 = time.time()
    job = start(results, context)
    summary: dict[str, Any]
    try:
        summary = job.run()
    except KeyboardInterrupt:
        summary = job.partial()
        summary["interrupted"] = True
        say("interrupted: keeping what was measured")
    except Exception as exc:
        summary = job.partial()
        summary["error"] = f"{type(exc).__name__}: {exc}"
        say(f"error: {summary['error']} (keeping what was measured)")
    summary["context"] = context
    summary["seconds"] = round(time.time() - t0, 1)
    return summary


def run(
    kind: str,
    plan: TTestPlan | LTestPlan,
    host: str | None,
    iperf_port: int,
    rtt_port: int,
    opts: RadioOptions,
    out: str | None,
    keep_testbed: bool,
    say: Say,
    progress: Progress,
    queue: str = "fair",
    loss: AirLoss = NO_LOSS,
    mobiles: str | None = None,
) -> tuple[Path, dict[str, Any]]:
    """``mobiles`` (tTest --mobiles): the testbed's mobiles that load the link at once."""
    from longge.measure.mobiles_ttest import MobilesLTest, MobilesTTest, choose, wanted

    if mobiles is not None and host is not None:
        raise ConfigError("--mobiles", mobiles, "the testbed's mobiles: not with --host")
    need = None if mobiles is None else wanted(mobiles)
    results = ResultsDir(out or default_dir(kind))
    with link_for(
        kind, host, (iperf_port, rtt_port), opts, keep_testbed, say, queue, loss, need
    ) as (target, _):
        chosen = None if mobiles is None else choose(mobiles, len(testbed.recorded_mobiles()))

        def start(results: ResultsDir, context: dict[str, Any]) -> Job:
            frames = frames_of(context)
            if isinstance(plan, TTestPlan) and chosen is not None:
                return MobilesTTest(target, plan, results, progress, frames=frames, mobiles=chosen)
            if isinstance(plan, TTestPlan):
                return TTest(target, plan, results, progress, frames=frames)
            if chosen is not None:
                return MobilesLTest(target, plan, results, progress, frames=frames, mobiles=chosen)
            return LTest(target, plan, results, progress, frames=frames)

        length = plan.length or 1400
        both = plan.direction == "both"
        summary = _measure(target, results, say, start, length, both_ways=both)
    results.write_summary(summary)
    plots.plot_runs([results.path])
    return results.path, summary


def run_tune(
    plan: Any,
    opts: RadioOptions,
    out: str | None,
    keep_testbed: bool,
    say: Say,
    progress: Progress,
    host: str | None = None,
    controls: tuple[str, ...] = (),
    ports: tuple[int, int] = (testbed.IPERF_PORT, testbed.RTT_PORT),
    queue: str = "fair",
    loss: AirLoss = NO_LOSS,
) -> tuple[Path, dict[str, Any]]:
    """Tune on the testbed (brought up with ``opts``, e.g. --per), a running one, or a real
    link (``host`` = the base station's address; ``controls`` = the daemons' control sockets,
    both nodes: a setting applied to one radio only would break the link)."""
    from longge.chip.datasheet import per_attempt_failure

    if opts.adapt:
        raise ConfigError(
            "--adapt",
            True,
            "tune measures each fixed ARD/ARC; with --adapt the daemons would choose their own "
            "(run tune without it, or tTest --adapt to measure the adapting link)",
        )
    from longge.measure.model import link_error_rates
    from longge.measure.tune import Tune, check_resume
    from longge.measure.tune_plots import plot_tune, plot_tune_curves

    given = tuple(dict.fromkeys((*_local_controls(), *controls)))
    if host and len(given) < 2:  # (before a results folder is made)
        raise ConfigError(
            "--control",
            list(given),
            "tune on a real link changes ARD/ARC on both radios: give the base station's "
            "control socket too, e.g. forwarded over ssh: ssh -N -L /tmp/base.sock:"
            f"{LOCAL_CONTROL} pi@base & then --control /tmp/base.sock",
        )
    results = ResultsDir(out or default_dir("tune"))
    with link_for("tune", host, ports, opts, keep_testbed, say, queue, loss) as (target, _):
        if controls:
            target = replace(target, controls=tuple(dict.fromkeys((*target.controls, *controls))))
        per, ack_per, burst = link_error_rates(opts, *link_air(target))
        q_hint = per_attempt_failure(per, ack_per)

        def start(results: ResultsDir, context: dict[str, Any]) -> Job:
            say(f"(an interrupted tune resumes with --out {results.path})")
            # (None: the mobile daemon did not say; the model then counts no security bytes)
            overhead = context.get("security_overhead")
            air = (per, ack_per, burst)
            return Tune(target, opts, plan, results, q_hint, progress, overhead, air)

        def check(results: ResultsDir, context: dict[str, Any]) -> None:
            check_resume(results, opts, q_hint, context.get("security_overhead"))

        summary = _measure(target, results, say, start, check=check)
    results.write_summary(summary)
    plot_tune(summary, results.path)
    plot_tune_curves(summary, opts, results.path)
    return results.path, summary


def link_air(target: Target) -> tuple[dict[str, Any], str | int]:
    """What the model needs of the link's channel: the emulated air's losses (the testbed's,
    as it was brought up; none known on a real link: a loss-free channel) and the radios'
    power level (as the mobile's daemon says; the default where it says nothing)."""
    from longge.config import NodeConfig

    loss = ((testbed.recorded_spec() or {}).get("loss") or {}) if target.air else {}
    level: Any = None
    if target.controls:
        with contextlib.suppress(ControlError):
            level = DaemonClient(target.controls[0]).status().radio.get("pa_level")
    return loss, level if isinstance(level, (str, int)) else NodeConfig.pa_level


def run_experiments(
    experiments: list[Any],
    quick: bool,
    opts: RadioOptions,
    out: str | None,
    keep_testbed: bool,
    say: Say,
    progress: Progress,
    host: str | None = None,
    ports: tuple[int, int] = (testbed.IPERF_PORT, testbed.RTT_PORT),
    queue: str = "fair",
    loss: AirLoss = NO_LOSS,
) -> tuple[Path, dict[str, Any]]:
    """Run ``experiments`` (measure.experiments' definitions) on the testbed, or on a real link
    with ``host`` (its servers on ``ports``: iperf3, RTT echo)."""
    from longge.measure.experiments import Link, Runner

    results = ResultsDir(out or default_dir("experiment"))
    with link_for("experiment", host, ports, opts, keep_testbed, say, queue, loss) as (target, _):

        def start(results: ResultsDir, context: dict[str, Any]) -> Job:
            link = Link(target, target.air)
            if target.netns is None:
                link.sender_ns = link.receiver_ns = ""
            overhead = context.get("security_overhead", 0)
            runner = Runner(link, opts, quick, progress, overhead)
            return _Battery(experiments, runner, results, say)

        summary = _measure(target, results, say, start)
    results.write_summary(summary)
    return results.path, summary


class _Battery:
    """The experiments one after the other; one that fails does not cost the others."""

    def __init__(self, experiments: list[Any], runner: Any, results: ResultsDir, say: Say) -> None:
        self.experiments = experiments
        self.runner = runner
        self.results = results
        self.say = say
        self.done: dict[str, dict[str, Any]] = {}

    def run(self) -> dict[str, Any]:
        from longge.measure.experiments import failed_verdict

        for exp in self.experiments:
            self.say(f"{exp.name}: {exp.question}")
            try:
                self.done[exp.name] = self.runner.run(exp, self.results)
            except Exception as exc:
                self.done[exp.name] = {"verdict": failed_verdict(exc)}
            self.say(f"{exp.name}: {self.done[exp.name]['verdict']}")
        return {**self.partial(), "interrupted": False}

    def partial(self) -> dict[str, Any]:
        return {
            "kind": "experiments",
            "verdicts": {k: v["verdict"] for k, v in self.done.items()},
        }
