"""The one-machine testbed: three network namespaces, the air emulator, two link daemons.

    lg-mobile                       lg-base                            lg-inet
    longge0 10.24.0.2 ~~radio~~ longge0 10.24.0.1 ── NAT ── up0 10.99.0.2 ── eth0 10.99.0.1

With ``mobiles`` N > 1 (a base for several mobiles, ESB): lg-mobile1 … lg-mobileN at 10.24.0.2
… 10.24.0.(N+1), each its own daemon and key, all [[peer]]s of the base's.

The air emulator runs in the root namespace; the radios reach it through a Unix socket in
``STATE_DIR``. ``lg-inet`` stands for the internet: it has no route to 10.24.0.0/24, so the
mobile unit reaches it only through the base station's NAT. ``down`` removes everything ``up``
made, also after a crash (it finds processes by namespace and by their use of ``STATE_DIR``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from longge.air import native
from longge.air.wire import query
from longge.daemon.control import ControlError
from longge.daemon.status import DaemonClient
from longge.errors import LongGeError
from longge.keeper import running, spawn, write_state
from longge.protocol.secure import generate_key, parse_key
from longge.testbed_spec import (
    BASE_IP,
    INET_IP,
    MAX_TESTBED_MOBILES,
    MOBILE_IP,
    NAMESPACES,
    STATE_DIR,
    UPLINK_IP,
    TestbedSpec,
    key_path,
    mobile_ip,
    mobile_names,
    namespaces,
    node_socket,
    paths,
    recorded_mobiles,
)

__all__ = [
    "BASE_IP",
    "INET_IP",
    "IPERF_PORT",
    "MOBILE_IP",
    "NAMESPACES",
    "PRELOAD",
    "RTT_PORT",
    "STATE_DIR",
    "UPLINK_IP",
    "TestbedError",
    "TestbedSpec",
    "build_preload",
    "clear_for",
    "down",
    "down_if_left",
    "key_path",
    "leftover",
    "mobile_ip",
    "mobile_names",
    "node_socket",
    "paths",
    "recorded_mobiles",
    "recorded_spec",
    "running",
    "status",
    "up",
]

FIRMWARE = Path(__file__).resolve().parents[1] / "firmware"
#: LD_PRELOAD for the rf24 backend on emulated chips (make -C firmware preload)
PRELOAD = FIRMWARE / "build" / "longge-spidev.so"

UP_TIMEOUT_S = 20.0
IPERF_PORT, RTT_PORT = 5201, 7770


class TestbedError(LongGeError):
    """The testbed could not be built (names what failed)."""


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    except FileNotFoundError as exc:
        raise TestbedError(
            f"{cmd[0]} not found: the testbed needs iproute2 (./run.sh help)"
        ) from exc
    if check and proc.returncode != 0:
        raise TestbedError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def _netns(ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run("ip", "netns", "exec", ns, *cmd, check=check)


def build_preload() -> None:
    """The spidev/GPIO library through which the real pyrf24 reaches emulated chips."""
    _make("preload")


def _make(target: str) -> None:
    """Build a firmware/ target the testbed runs (the native modem, the spidev library)."""
    from longge.modembench import make_firmware  # (one make at a time: it holds the lock)

    build = make_firmware(target)
    if build.returncode != 0:
        raise TestbedError(f"make -C firmware {target} failed:\n{build.stderr[-1500:]}")


def _start(
    state: dict[str, Any], name: str, args: list[str], log: Path, env: dict[str, str] | None = None
) -> int:
    """Start one of the testbed's processes, recorded for the keeper (keeper.py) to start
    again should it die."""
    state["procs"][name] = {"args": args, "log": str(log), "env": env}
    pid = state["pids"][name] = spawn(args, log, env)
    return pid


def up(
    spec: TestbedSpec, say: Callable[[str], None] = lambda s: None, owner: str | None = None
) -> dict[str, Any]:
    """Build the testbed ``spec`` describes (taking down any earlier one first). ``owner``:
    the command of a run that brings it up for itself and takes it down after (recorded with
    this process, so that a run that finds it after this one was killed knows: ``leftover``);
    None: the user's, kept until ``testbed down``."""
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, TUN devices)")
    down()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    p = paths()
    state: dict[str, Any] = {
        **spec.as_dict(),
        "pids": {},
        "procs": {},
        "restarts": {},
        "started": time.time(),
    }
    if owner is not None:
        state["owner"] = {"command": owner, "pid": os.getpid(), "since": _started_at(os.getpid())}
    names = spec.mobile_names
    keys: list[bytes | None] = [None] * len(names)
    if spec.secured:  # a fresh key for each testbed, and fresh nonce/replay state with it
        shutil.rmtree(STATE_DIR / "security", ignore_errors=True)
        for i, name in enumerate(names):
            path = key_path(name, spec.mobiles)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            text = generate_key()
            with os.fdopen(fd, "w") as f:
                f.write(text + "\n")
            keys[i] = parse_key(text, "key")
            say(f"link key generated: {path} (ChaCha20-Poly1305; --insecure for an open link)")
    nodes = ["base", *names]
    try:
        say("creating namespaces " + ", ".join(namespaces(spec.mobiles)))
        for ns in namespaces(spec.mobiles):
            _run("ip", "netns", "add", ns)
            _netns(ns, "ip", "link", "set", "lo", "up")
        _run(
            "ip",
            "link",
            "add",
            "up0",
            "netns",
            "lg-base",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            "lg-inet",
        )
        _netns("lg-base", "ip", "addr", "add", f"{UPLINK_IP}/24", "dev", "up0")
        _netns("lg-base", "ip", "link", "set", "up0", "up")
        _netns("lg-inet", "ip", "addr", "add", f"{INET_IP}/24", "dev", "eth0")
        _netns("lg-inet", "ip", "link", "set", "eth0", "up")
        py = sys.executable
        say("starting the air emulator")
        air_args = native.command(str(p["air"]), spec.loss)
        _start(state, "air", air_args, STATE_DIR / "air.log")
        _wait_for(lambda: native.serving(p["air"]), "the air emulator", STATE_DIR / "air.log")
        modems = spec.modems()
        if modems:
            on = sorted({m.node for m in modems}, key=lambda n: n == "base")
            say(f"building the modem firmware (native) and plugging two modems into {on}")
            _make("native")
            firmware = str(FIRMWARE / "build" / "modem-native-fast")
            for m in modems:
                log = STATE_DIR / f"{m.process}.log"
                _start(state, m.process, [firmware, str(p["air"]), m.air_name, str(m.pty)], log)
                _wait_for(m.pty.exists, f"the {m.node}'s {m.which} modem", log)
        env = None
        if spec.rf24:
            say("building the spidev/GPIO library pyrf24 reaches the emulated chips through")
            build_preload()
        for node in nodes:
            role = "base" if node == "base" else "mobile"
            index = names.index(node) if role == "mobile" else 0
            conf = STATE_DIR / f"{node}.toml"
            conf.write_text(spec.node_toml(role, keys[index], keys, index))
            if spec.rf24:
                env = {
                    "LD_PRELOAD": str(PRELOAD),
                    "LONGGE_AIR": str(p["air"]),
                    "LONGGE_CHIP_PREFIX": f"{role}-",  # its radios: base-spidev0.0, ...
                }
            say(f"starting the {node} daemon in lg-{node}")
            _start(
                state,
                node,
                [
                    "ip",
                    "netns",
                    "exec",
                    f"lg-{node}",
                    py,
                    "-m",
                    "longge",
                    "daemon",
                    "--config",
                    str(conf),
                ],
                STATE_DIR / f"{node}.log",
                env,
            )
        say("starting the measurement servers in lg-base (iperf3, RTT echo)")
        log = STATE_DIR / "servers.log"
        since = log.stat().st_size if log.exists() else 0  # (logs are kept across testbeds)
        _start(
            state,
            "servers",
            [
                "ip",
                "netns",
                "exec",
                "lg-base",
                py,
                "-m",
                "longge",
                "servers",
                "--iperf-port",
                str(IPERF_PORT),
                "--rtt-port",
                str(RTT_PORT),
                "--log-dir",
                str(STATE_DIR),
                # the link's address only, and not as root (docs/design.md, "Exposure")
                "--bind",
                BASE_IP,
                "--user",
                "nobody",
            ],
            STATE_DIR / "servers.log",
        )
        write_state(p["state"], state)
        for node in nodes:
            _wait_for(
                partial(_link_up, node_socket(node)),
                f"the {node} daemon's link",
                STATE_DIR / f"{node}.log",
                state["pids"][node],
            )
        ready = partial(_says, log, "servers: iperf3 server on port", since)
        _wait_for(ready, "the measurement servers", log, state["pids"]["servers"])
        say("starting the keeper (a process of the testbed's that dies is started again)")
        keeper = spawn([py, "-m", "longge.keeper", str(p["state"])], STATE_DIR / "keeper.log")
        _wait_for(partial(_keeping, keeper), "the keeper", STATE_DIR / "keeper.log", keeper)
    except BaseException:  # Ctrl-C and SIGTERM too: nothing made so far is left behind
        down()
        raise
    return status()


def _started_at(pid: int) -> int | None:
    """The process's start time (clock ticks since boot: /proc/PID/stat's 22nd field), which
    tells it from a later process that got its pid again; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[-1].split()[19])


def leftover() -> str | None:
    """A testbed that a run brought up for itself and that run is gone (killed: kill -9, a
    lost terminal), said in words; None when there is none (no testbed, the user's own, or its
    run still going)."""
    try:
        owner = json.loads(paths()["state"].read_text()).get("owner")
        pid, command, since = int(owner["pid"]), str(owner["command"]), owner.get("since")
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if running(pid) and _started_at(pid) == since:
        return None
    return f"left by {command} (pid {pid}), which ended without taking it down"


def down_if_left(say: Callable[[str], None]) -> bool:
    """A testbed left by a killed run (``leftover``) said and taken down; was there one?"""
    left = leftover()
    if left is not None:
        say(f"found a testbed {left}: taking it down")
        down()
    return left is not None


def clear_for(command: str, say: Callable[[str], None]) -> None:
    """Before ``command`` brings up testbeds of its own: one left by a killed run is said and
    taken down; one the user brought up (or a run still going) is left as it is and refused,
    naming how to go on."""
    if not down_if_left(say) and (_our_namespaces() or paths()["state"].exists()):
        raise TestbedError(
            f"{command} brings up testbeds of its own, and a testbed is up (./run.sh testbed "
            "status says whose): ./run.sh testbed down first, then run again"
        )


def _keeping(pid: int) -> bool:
    """The keeper ``pid`` has recorded itself in the state file: it watches."""
    with contextlib.suppress(OSError, ValueError):
        return bool(json.loads(paths()["state"].read_text()).get("keeper") == pid)
    return False


def _stop_keeper() -> None:
    """First of all in ``down``: the keeper would start again what down stops."""
    pids = _running_with(b"longge.keeper")  # (one not recorded yet too: a testbed half up)
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):  # (no keeper yet)
        pids.add(int(json.loads(paths()["state"].read_text())["keeper"]))
    _end(pids)


def take_away(name: str) -> None:
    """Node ``name`` gone for good, as a mobile that left (experiment hostile's ``absent``):
    the keeper stopped (it would start it again) and the processes in its namespace ended; the
    rest runs on, and ``down`` takes it all down as ever."""
    _stop_keeper()
    _end(_pids_in(f"lg-{name}"))


def _running_with(marker: bytes) -> set[int]:
    """The processes (other than this one) whose command line holds ``marker``."""
    pids: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes():
                    pids.add(int(entry.name))
    return pids


def _end(pids: set[int]) -> None:
    """SIGTERM, up to 3 s for them to go, then SIGKILL and 3 s more."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3
        while pids and time.monotonic() < deadline:
            pids = {pid for pid in pids if running(pid)}
            time.sleep(0.05)
        if not pids:
            break


def _says(log: Path, line: str, since: int = 0) -> bool:
    """``log`` has ``line`` after its first ``since`` bytes."""
    if not log.exists():
        return False
    with open(log, "rb") as f:
        f.seek(since)
        return line.encode() in f.read()


#: The last answer a daemon gave that was not a status (said if its link never comes up).
_last_status_error: dict[Path, str] = {}


def _link_up(path: Path) -> bool:
    try:
        up = DaemonClient(str(path), timeout=1).status().link == "up"
    except ControlError as exc:
        _last_status_error[path] = str(exc)
        return False
    _last_status_error.pop(path, None)
    return up


def _wait_for(ok: Callable[[], bool], what: str, log: Path, pid: int | None = None) -> None:
    """Until ``ok()``; a TestbedError with the log's tail after UP_TIMEOUT_S, or at once when
    the process ``pid`` that should bring it has exited."""
    deadline = time.monotonic() + UP_TIMEOUT_S
    why = f"did not come up within {UP_TIMEOUT_S:.0f} s"
    while time.monotonic() < deadline:
        if ok():
            return
        if pid is not None and not running(pid):
            why = "exited"
            break
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"
    said = "".join(f"\n{p}: {e}" for p, e in _last_status_error.items())
    raise TestbedError(
        f"{what} {why}; log:\n{tail}" + (f"\nlast status asked:{said}" if said else "")
    )


def _pids_in(ns: str) -> set[int]:
    """The processes in namespace ``ns`` (none if it is gone)."""
    return {int(x) for x in _run("ip", "netns", "pids", ns, check=False).stdout.split()}


def _testbed_pids() -> set[int]:
    """Every process of ours: in the namespaces, or using STATE_DIR (the air, ip netns exec)."""
    pids: set[int] = set()
    for ns in _our_namespaces():
        pids |= _pids_in(ns)
    pids |= _running_with(str(STATE_DIR).encode())
    pids.discard(os.getpid())
    return pids


def down() -> list[str]:
    """Remove everything the testbed made. Safe to call any time, also after a crash."""
    removed: list[str] = []
    _stop_keeper()
    _end(_testbed_pids())
    for ns in _our_namespaces():
        _run("ip", "netns", "del", ns, check=False)
        removed.append(ns)
    if STATE_DIR.exists():
        for f in STATE_DIR.iterdir():
            with contextlib.suppress(OSError):
                f.unlink()
    return removed


def _our_namespaces() -> list[str]:
    """The testbed's namespaces that exist (lg-mobile1 … too, whatever the testbed was)."""
    listed = _run("ip", "netns", "list", check=False).stdout.split()
    extra = [f"lg-{n}" for n in mobile_names(MAX_TESTBED_MOBILES)]
    return [ns for ns in (*NAMESPACES, *extra) if ns in listed]


def recorded_spec() -> dict[str, Any] | None:
    """What the running testbed was built from (TestbedSpec.as_dict()), if one is up."""
    try:
        state = json.loads(paths()["state"].read_text())
    except (OSError, ValueError):
        return None
    return {k: state.get(k) for k in TestbedSpec().as_dict()}


def status() -> dict[str, Any]:
    p = paths()
    existing = _run("ip", "netns", "list", check=False).stdout.split()
    names = recorded_mobiles()
    out: dict[str, Any] = {
        "namespaces": {ns: ns in existing for ns in namespaces(len(names))},
        "addresses": {
            "base": BASE_IP,
            **{n: mobile_ip(i) for i, n in enumerate(names)},
            "internet": INET_IP,
        },
        "nodes": {},
    }
    if p["state"].exists():
        out["state"] = json.loads(p["state"].read_text())
    for node in ("base", *names):
        try:
            out["nodes"][node] = DaemonClient(str(node_socket(node))).status().raw
        except ControlError as exc:
            out["nodes"][node] = {"error": str(exc)}
    try:
        out["air"] = query(str(p["air"]))
    except OSError as exc:
        out["air"] = {"error": str(exc)}
    out["up"] = all(out["namespaces"].values()) and all(
        n.get("link") == "up" for n in out["nodes"].values()
    )
    out["leftover"] = leftover()
    return out
