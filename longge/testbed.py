"""The one-machine testbed: three network namespaces, the air emulator, two link daemons.

    lg-mobile                       lg-base                            lg-inet
    longge0 10.24.0.2 ~~radio~~ longge0 10.24.0.1 ── NAT ── up0 10.99.0.2 ── eth0 10.99.0.1

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
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from longge import configfile
from longge.air import native
from longge.air.loss import NO_LOSS, AirLoss
from longge.air.wire import query
from longge.config import NodeConfig, PeerConfig
from longge.daemon.control import ControlError
from longge.daemon.status import DaemonClient
from longge.errors import LongGeError
from longge.protocol.secure import KEY_LEN, generate_key, parse_key
from longge.radio.options import RadioOptions, downlink_channel

FIRMWARE = Path(__file__).resolve().parents[1] / "firmware"
#: The radios' IRQ pins on the rf24 testbed (tx, rx): README's wiring table.
IRQ_PINS = (24, 23)
#: LD_PRELOAD for the rf24 backend on emulated chips (make -C firmware preload)
PRELOAD = FIRMWARE / "build" / "longge-spidev.so"

STATE_DIR = Path(os.environ.get("LONGGE_TESTBED_DIR", "/run/longge/testbed"))
NAMESPACES = ("lg-base", "lg-mobile", "lg-inet")
BASE_IP, MOBILE_IP, INET_IP, UPLINK_IP = "10.24.0.1", "10.24.0.2", "10.99.0.1", "10.99.0.2"
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


def paths() -> dict[str, Path]:
    return {
        "air": STATE_DIR / "air.sock",
        "base": STATE_DIR / "base.sock",
        "mobile": STATE_DIR / "mobile.sock",
        "state": STATE_DIR / "state.json",
        "key": STATE_DIR / "key",
    }


@dataclass(frozen=True)
class TestbedSpec:
    """Everything a testbed is made of: the link's settings, the air's losses, what the two
    daemons are told (queue, queue_ms, mtu: None keeps the daemon's default), security and the
    radios' backend. It writes both nodes' configs with the config module's own writer and is
    recorded in the testbed's state and in each results folder's context."""

    options: RadioOptions = field(default_factory=RadioOptions)
    loss: AirLoss = NO_LOSS
    queue: str = "fair"
    queue_ms: int | None = None
    mtu: int | None = None
    secured: bool = True
    serial: bool = False  # the mobile's radios are two native USB modems (on ptys)
    rf24: bool = False  # both nodes run the rf24 backend: the real pyrf24 on emulated chips
    irq: bool = True  # rf24: the radio processes sleep on the radios' IRQ pins (else: polled)

    def __post_init__(self) -> None:
        # a wrong queue, queue_ms or mtu: refused here, by name (a stand-in key for the check)
        self.node_config("mobile", bytes(KEY_LEN))

    def backend(self, role: str) -> str:
        return "serial" if self.serial and role == "mobile" else "rf24" if self.rf24 else "sim"

    def node_config(self, role: str, key: bytes | None) -> NodeConfig:
        """One node's config (a real node's has the same shape)."""
        p = paths()
        mobile = role == "mobile"
        up_ch = self.options.channel
        down_ch = downlink_channel(up_ch)
        node: dict[str, Any] = {
            "role": role,
            "tun": "longge0",
            "address": f"{MOBILE_IP if mobile else BASE_IP}/24",
            "peers": (
                PeerConfig(
                    name="base" if mobile else "mobile",
                    address=BASE_IP if mobile else MOBILE_IP,
                    tx_address=b"LGm2b" if mobile else b"LGb2m",
                    rx_address=b"LGb2m" if mobile else b"LGm2b",
                    key=key if self.secured else None,
                ),
            ),
            "control": str(p[role]),
            "queue": self.queue,
            "backend": self.backend(role),
            "air": str(p["air"]),
            # the nodes' channels are tx_channel/rx_channel; RadioOptions.channel is the one
            # link of radio-bench, not a node setting
            "radio": replace(self.options, channel=RadioOptions.channel),
            "tx_channel": up_ch if mobile else down_ch,
            "rx_channel": down_ch if mobile else up_ch,
            "default_route": mobile,
            "nat": not mobile,
            "uplink": "" if mobile else "up0",
            "insecure": not self.secured,
            "state_dir": str(STATE_DIR / "security"),
            "driver": "pyrf24",
        }
        if self.rf24 and self.irq:  # README's wiring table
            node["tx_irq_pin"], node["rx_irq_pin"] = IRQ_PINS
        if self.backend(role) == "serial":
            node["tx_port"] = str(STATE_DIR / "mobile-tx.pty")
            node["rx_port"] = str(STATE_DIR / "mobile-rx.pty")
        for name in ("queue_ms", "mtu"):
            if getattr(self, name) is not None:
                node[name] = getattr(self, name)
        return NodeConfig(**node)

    def node_toml(self, role: str, key: bytes | None) -> str:
        """The node's config file, as the daemon reads it."""
        return configfile.dumps(
            self.node_config(role, key),
            key_file=str(paths()["key"]) if self.secured else None,
            header=f"written by ./run.sh testbed up ({role})",
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "options": self.options.as_dict(),
            "loss": self.loss.as_dict(),
            "queue": self.queue,
            "queue_ms": self.queue_ms,
            "mtu": self.mtu,
            "secured": self.secured,
            "serial": self.serial,
            "backend": "rf24" if self.rf24 else "sim",
            "irq": self.rf24 and self.irq,
        }


def build_preload() -> None:
    """The spidev/GPIO library through which the real pyrf24 reaches emulated chips."""
    _make("preload")


def _make(target: str) -> None:
    """Build a firmware/ target the testbed runs (the native modem, the spidev library)."""
    build = subprocess.run(["make", "-C", str(FIRMWARE), target], capture_output=True, text=True)
    if build.returncode != 0:
        raise TestbedError(f"make -C firmware {target} failed:\n{build.stderr[-1500:]}")


def _spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> int:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    return proc.pid


def up(spec: TestbedSpec, say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Build the testbed ``spec`` describes (taking down any earlier one first)."""
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, TUN devices)")
    down()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    p = paths()
    state: dict[str, Any] = {
        **spec.as_dict(),
        "pids": {},
        "started": time.time(),
    }
    key = None
    if spec.secured:  # a fresh key for each testbed, and fresh nonce/replay state with it
        shutil.rmtree(STATE_DIR / "security", ignore_errors=True)
        fd = os.open(p["key"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        text = generate_key()
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        key = parse_key(text, "key")
        say(f"link key generated: {p['key']} (ChaCha20-Poly1305; --insecure for an open link)")
    try:
        say("creating namespaces lg-base, lg-mobile, lg-inet")
        for ns in NAMESPACES:
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
        state["pids"]["air"] = _spawn(air_args, STATE_DIR / "air.log")
        _wait_for(lambda: native.serving(p["air"]), "the air emulator", STATE_DIR / "air.log")
        if spec.serial:
            say("building the modem firmware (native) and plugging two modems into the mobile")
            _make("native")
            for which in ("tx", "rx"):
                link = STATE_DIR / f"mobile-{which}.pty"
                state["pids"][f"modem-{which}"] = _spawn(
                    [
                        str(FIRMWARE / "build" / "modem-native-fast"),
                        str(p["air"]),
                        f"mobile-{which}",
                        str(link),
                    ],
                    STATE_DIR / f"modem-{which}.log",
                )
                _wait_for(link.exists, f"the {which} modem", STATE_DIR / f"modem-{which}.log")
        env = None
        if spec.rf24:
            say("building the spidev/GPIO library pyrf24 reaches the emulated chips through")
            build_preload()
        for role in ("base", "mobile"):
            conf = STATE_DIR / f"{role}.toml"
            conf.write_text(spec.node_toml(role, key))
            if spec.rf24:
                env = {
                    **os.environ,
                    "LD_PRELOAD": str(PRELOAD),
                    "LONGGE_AIR": str(p["air"]),
                    "LONGGE_CHIP_PREFIX": f"{role}-",  # its radios: base-spidev0.0, ...
                }
            say(f"starting the {role} daemon in lg-{role}")
            state["pids"][role] = _spawn(
                [
                    "ip",
                    "netns",
                    "exec",
                    f"lg-{role}",
                    py,
                    "-m",
                    "longge",
                    "daemon",
                    "--config",
                    str(conf),
                ],
                STATE_DIR / f"{role}.log",
                env,
            )
        say("starting the measurement servers in lg-base (iperf3, RTT echo)")
        log = STATE_DIR / "servers.log"
        since = log.stat().st_size if log.exists() else 0  # (logs are kept across testbeds)
        state["pids"]["servers"] = _spawn(
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
        p["state"].write_text(json.dumps(state, indent=2))
        for role in ("base", "mobile"):
            sock = p[role]
            _wait_for(
                partial(_link_up, sock),
                f"the {role} daemon's link",
                STATE_DIR / f"{role}.log",
                state["pids"][role],
            )
        ready = partial(_says, log, "servers: iperf3 server on port", since)
        _wait_for(ready, "the measurement servers", log, state["pids"]["servers"])
    except BaseException:  # Ctrl-C and SIGTERM too: nothing made so far is left behind
        down()
        raise
    return status()


def _says(log: Path, line: str, since: int = 0) -> bool:
    """``log`` has ``line`` after its first ``since`` bytes."""
    if not log.exists():
        return False
    with open(log, "rb") as f:
        f.seek(since)
        return line.encode() in f.read()


def running(pid: int) -> bool:
    """Alive (not gone, not a zombie): /proc says, whoever the parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


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


def _testbed_pids() -> set[int]:
    """Every process of ours: in the namespaces, or using STATE_DIR (the air, ip netns exec)."""
    pids: set[int] = set()
    for ns in NAMESPACES:
        out = _run("ip", "netns", "pids", ns, check=False).stdout
        pids |= {int(x) for x in out.split()}
    marker = str(STATE_DIR).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes():
                    pids.add(int(entry.name))
    pids.discard(os.getpid())
    return pids


def down() -> list[str]:
    """Remove everything the testbed made. Safe to call any time, also after a crash."""
    removed: list[str] = []
    pids = _testbed_pids()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3
        while pids and time.monotonic() < deadline:
            pids = {pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)}
            time.sleep(0.05)
        if not pids:
            break
    existing = _run("ip", "netns", "list", check=False).stdout.split()
    for ns in NAMESPACES:
        if ns in existing:
            _run("ip", "netns", "del", ns, check=False)
            removed.append(ns)
    if STATE_DIR.exists():
        for f in STATE_DIR.iterdir():
            with contextlib.suppress(OSError):
                f.unlink()
    return removed


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


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
    out: dict[str, Any] = {
        "namespaces": {ns: ns in existing for ns in NAMESPACES},
        "addresses": {"base": BASE_IP, "mobile": MOBILE_IP, "internet": INET_IP},
        "nodes": {},
    }
    if p["state"].exists():
        out["state"] = json.loads(p["state"].read_text())
    for role in ("base", "mobile"):
        try:
            out["nodes"][role] = DaemonClient(str(p[role])).status().raw
        except ControlError as exc:
            out["nodes"][role] = {"error": str(exc)}
    try:
        out["air"] = query(str(p["air"]))
    except OSError as exc:
        out["air"] = {"error": str(exc)}
    out["up"] = all(out["namespaces"].values()) and all(
        n.get("link") == "up" for n in out["nodes"].values()
    )
    return out
