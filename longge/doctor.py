"""``./run.sh doctor``: is this machine ready to be a LongGe node? A pass/fail list, with the
fix for each failure. Exits non-zero only for real problems: a machine without radios whose
config does not ask for them is fine (it can run the emulator)."""

from __future__ import annotations

import ctypes.util
import importlib
import multiprocessing
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from longge import config, configfile
from longge.daemon.control import ControlError
from longge.daemon.status import DaemonClient, NodeStatus
from longge.errors import ConfigError, HardwareError, LongGeError

DEFAULT_CONFIG = config.DEFAULT_PATH

PASS, FAIL, WARN, INFO = "PASS", "FAIL", "WARN", "INFO"


@dataclass(frozen=True)
class Check:
    status: str
    what: str
    detail: str = ""
    fix: str = ""


def _modules() -> list[Check]:
    out = []
    for mod, why in (
        ("pyrf24", "radio driver (rf24 backend)"),
        ("iperf3", "python-iperf3 (tTest)"),
        ("cryptography", "link security"),
        ("matplotlib", "plots"),
    ):
        try:
            importlib.import_module(mod)
            out.append(Check(PASS, f"python module {mod}", why))
        except ImportError as exc:
            out.append(Check(FAIL, f"python module {mod}", str(exc), "./run.sh help (installs)"))
    return out


def _tools() -> list[Check]:
    out = []
    for tool, pkg, needed in (
        ("iperf3", "iperf3", True),
        ("ip", "iproute2", True),
        ("iptables", "iptables", True),
        ("irtt", "irtt", False),
    ):
        if shutil.which(tool):
            out.append(Check(PASS, f"{tool} installed"))
        else:
            out.append(
                Check(
                    FAIL if needed else WARN, f"{tool} installed", "not found", f"apt install {pkg}"
                )
            )
    lib = ctypes.util.find_library("iperf")
    out.append(
        Check(PASS, "libiperf installed", lib)
        if lib
        else Check(FAIL, "libiperf installed", "not found", "apt install libiperf0")
    )
    return out


def _tun() -> Check:
    if not os.path.exists("/dev/net/tun"):
        return Check(FAIL, "TUN device", "/dev/net/tun missing", "modprobe tun")
    if os.geteuid() != 0:
        return Check(WARN, "TUN device", "present; creating one needs root", "sudo ./run.sh doctor")
    from longge.tun import LinuxTun

    try:
        tun = LinuxTun("lgdoctor0", 1500)
        tun.close()
    except OSError as exc:
        return Check(FAIL, "TUN device", f"cannot create one: {exc}", "modprobe tun; run as root")
    return Check(PASS, "TUN device", "created and removed lgdoctor0")


def _config(path: str | None) -> tuple[list[Check], config.NodeConfig | None]:
    target = path or DEFAULT_CONFIG
    if not os.path.exists(target):
        if path:
            return [
                Check(FAIL, "node config", f"{target} not found", "give an existing file")
            ], None
        return [
            Check(
                INFO,
                "node config",
                f"no {DEFAULT_CONFIG}: not set up as a node",
                "README 'Building a real link' (or try the emulator: ./run.sh testbed up)",
            )
        ], None
    try:
        cfg = configfile.load(target)
    except ConfigError as exc:
        return [Check(FAIL, "node config", f"{target}: {exc}", "fix that key")], None
    checks = [Check(PASS, "node config", f"{target}: {cfg.role}, backend {cfg.backend}")]
    if not cfg.secured:
        checks.append(
            Check(WARN, "link security", "insecure = true: anyone with a radio can inject")
        )
    else:
        # (a key file others can read failed the load above: configfile._check_secrets)
        checks.append(Check(PASS, "link security", "key set (ChaCha20-Poly1305)"))
    return checks, cfg


#: How long one radio's check may take (begin, settings, read-back: well under a second).
RADIO_CHECK_S = 20.0


def _radios(cfg: config.NodeConfig | None) -> list[Check]:
    """Each radio checked as the daemon uses it: in a process of its own (the daemon runs one
    radio per process), which also keeps a hung SPI driver from hanging the doctor."""
    from longge.radio.rf24 import spidev

    wants_rf24 = cfg is not None and cfg.backend == "rf24" and cfg.driver == "pyrf24"
    pins = (
        [
            ("tx", cfg.tx_ce_pin, cfg.tx_csn_pin, cfg.tx_irq_pin),
            ("rx", cfg.rx_ce_pin, cfg.rx_csn_pin, cfg.rx_irq_pin),
        ]
        if cfg is not None
        else [("tx", 22, 0, -1), ("rx", 25, 1, -1)]
    )
    found = [_in_own_process(_radio, which, ce, csn, irq, cfg) for which, ce, csn, irq in pins]
    if all(c is None for c in found):
        if wants_rf24:
            return [
                Check(
                    FAIL,
                    "SPI devices",
                    "backend = rf24 but no " + ", ".join(spidev(p[2]) for p in pins),
                    "enable SPI: sudo raspi-config nonint do_spi 0, then reboot",
                )
            ]
        return [
            Check(
                INFO,
                "radios",
                "no SPI bus (/dev/spidev*): no radios on this machine",
                "use the emulator: ./run.sh testbed up, ./run.sh tTest",
            )
        ]
    return [
        c
        if c is not None
        else Check(FAIL, f"{which} radio", f"{spidev(csn)} missing", "enable SPI / fix CSN")
        for c, (which, _, csn, _) in zip(found, pins, strict=True)
    ]


def _ask_daemon(cfg: config.NodeConfig | None) -> NodeStatus | ControlError | None:
    """The running daemon's status, asked once for the checks that read it: None when no
    control socket is here, the error when one is but does not answer."""
    if cfg is None or not os.path.exists(cfg.control):
        return None
    try:
        return DaemonClient(cfg.control, timeout=5).status()
    except ControlError as exc:
        return exc


def _radios_of_daemon(st: NodeStatus | ControlError | None, control: str) -> list[Check] | None:
    """A running daemon holds the radios: RF24 takes their CE lines, and a second open of a line
    is refused as busy (a probe of our own would fail both radios, blaming the wiring). Their
    states come from the daemon's status (``st``, _ask_daemon) instead; None when no daemon
    control socket is here."""
    if st is None:
        return None
    if isinstance(st, ControlError):
        # (not root, a daemon too busy to answer, or a socket a crash left): a probe of our
        # own would fail on lines a daemon holds, blaming the wiring
        return [
            Check(
                WARN,
                "radios",
                f"not probed: a daemon's control socket is here but did not answer ({st})",
                f"sudo ./run.sh doctor; if no daemon runs (a socket left by a crash): sudo rm "
                f"{control}",
            )
        ]
    out = []
    for which, state in (("tx", st.tx.state), ("rx", st.rx.state)):
        status = PASS if state == "up" else WARN if state in ("starting", "?") else FAIL
        out.append(
            Check(
                status,
                f"{which} radio",
                f"held by the running daemon: {state}",
                "sudo journalctl -u longge; to probe it here instead: sudo systemctl stop "
                "longge, then sudo ./run.sh doctor",
            )
        )
    return out


def _radio(which: str, ce: int, csn: int, irq: int, cfg: config.NodeConfig | None) -> Check | None:
    """One radio: None if its spidev does not exist, else what it answered."""
    from longge.radio.rf24 import Rf24Radio, spidev

    path = spidev(csn)
    try:
        os.close(os.open(path, os.O_RDWR))
    except FileNotFoundError:
        return None
    except PermissionError:
        return Check(
            FAIL,
            f"{which} radio",
            f"{path}: permission denied",
            "sudo ./run.sh doctor (the daemon runs as root), or add the user to group spi",
        )
    except OSError as exc:
        return Check(
            FAIL, f"{which} radio", f"{path} cannot be opened: {exc.strerror}", "enable SPI"
        )
    try:
        radio = Rf24Radio(ce, csn, cfg.spi_speed if cfg else 10_000_000, name=which, irq_pin=irq)
    except HardwareError as exc:  # (pyrf24 missing)
        return Check(FAIL, f"{which} radio", str(exc), "sudo ./run.sh help")
    try:
        radio.begin()
        if cfg is not None:
            from longge.daemon.radio_owner import RadioOwner

            RadioOwner().set_up(radio, cfg, which)  # the RX radio listens: it draws current now
            if which == "tx":
                # a frame to nobody (MAX_RT expected): sending draws the most current, and a
                # radio on a weak supply restarts with its power-on settings right then
                radio.take_edges()  # (any edge from before the frame)
                radio.write(b"longge doctor")
                radio.verify(cfg.radio, cfg.tx_channel, cfg.pa_value)  # (did they stick?)
                edges = radio.take_edges()  # the edges since
                if irq >= 0 and not edges:
                    return Check(
                        FAIL,
                        f"{which} radio",
                        f"answers on {radio.where}, but its IRQ pin (GPIO{irq}) did not fall "
                        "when a frame ended",
                        f"wire the radio's IRQ to GPIO{irq} (or set {which}_irq_pin = -1 to poll)",
                    )
        plus = radio.is_plus_variant
        return Check(
            PASS,
            f"{which} radio",
            f"answers on {radio.where}; settings stick; "
            f"{'nRF24L01+' if plus else 'nRF24L01 (no 250 kbit/s)'}"
            + (
                f"; IRQ on GPIO{irq}" + (" falls when a frame ends" if which == "tx" else "")
                if irq >= 0
                else "; no IRQ pin (polled)"
            ),
        )
    except (LongGeError, RuntimeError) as exc:
        fix = "see the wiring table in README 'Building a real link'"
        return Check(FAIL, f"{which} radio", str(exc), fix)
    finally:
        radio.close()


def _in_own_process(fn: Callable[..., Check | None], *args: object) -> Check | None:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def run() -> None:
        child.send(fn(*args))

    proc = ctx.Process(target=run, daemon=True)
    proc.start()
    child.close()
    what = f"{args[0]} radio"
    try:
        if not parent.poll(RADIO_CHECK_S):
            return Check(
                FAIL,
                what,
                f"no answer within {RADIO_CHECK_S:.0f} s (the SPI driver hangs)",
                "reboot; check the wiring",
            )
        got: Check | None = parent.recv()
        return got
    except EOFError:
        proc.join(5)
        return Check(FAIL, what, f"the check crashed (exit code {proc.exitcode})", "")
    finally:
        proc.join(1)
        if proc.is_alive():
            proc.kill()
        parent.close()


def _routing(cfg: config.NodeConfig | None) -> list[Check]:
    if cfg is None or cfg.role != "base":
        return []
    out = []
    forward = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
    running = os.path.exists(cfg.control)
    if forward == "1":
        out.append(Check(PASS, "IP forwarding"))
    else:
        out.append(
            Check(
                FAIL if running else INFO,
                "IP forwarding",
                "off" + ("" if running else " (the daemon turns it on when it starts)"),
                "sysctl -w net.ipv4.ip_forward=1",
            )
        )
    if cfg.nat and shutil.which("iptables") and os.geteuid() == 0:
        rules = subprocess.run(
            ["iptables", "-t", "nat", "-S", "POSTROUTING"], capture_output=True, text=True
        ).stdout
        network = str(__import__("ipaddress").ip_interface(cfg.address).network)
        if "MASQUERADE" in rules and network in rules:
            out.append(Check(PASS, "NAT", f"MASQUERADE for {network}"))
        else:
            out.append(
                Check(
                    FAIL if running else INFO,
                    "NAT",
                    f"no MASQUERADE rule for {network}"
                    + ("" if running else " (the daemon adds it when it starts)"),
                    "start the daemon (systemctl start longge)",
                )
            )
    return out


def _daemon(cfg: config.NodeConfig | None, st: NodeStatus | ControlError | None) -> list[Check]:
    """The daemon, from its status as _ask_daemon found it."""
    if cfg is None:
        return []
    if st is None:
        return [Check(INFO, "daemon", "not running", "systemctl start longge")]
    if isinstance(st, ControlError):
        return [
            Check(FAIL, "daemon", f"control socket does not answer: {st}", "journalctl -u longge")
        ]
    link = st.raw.get("link", "?")
    return [
        Check(
            PASS if link == "up" else WARN,
            "daemon",
            f"running, link {link}",
            "" if link == "up" else "is the peer running, on the mirrored channels/addresses?",
        )
    ]


def _scheduling() -> Check:
    """Can a radio process become real-time (longge/realtime.py)? Tried in a child process."""
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))",
            ],
            capture_output=True,
            timeout=30,
        )
        ok = r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if ok:
        return Check(PASS, "real-time scheduling", "allowed: the radio processes run SCHED_FIFO")
    return Check(
        WARN,
        "real-time scheduling",
        "not allowed here: the radio processes fall back to nice and miss the receive FIFO's "
        "1.4 ms deadline more often (MAX_RT, lost packets at 2 Mbit/s)",
        "run the daemon as root (the systemd units do), or give it CAP_SYS_NICE",
    )


def run(config_path: str | None = None) -> list[Check]:
    checks: list[Check] = []
    steps: list[Callable[[], list[Check]]] = [
        _modules,
        _tools,
        lambda: [_tun()],
        lambda: [_scheduling()],
    ]
    for step in steps:
        checks.extend(step())
    cfg_checks, cfg = _config(config_path)
    checks.extend(cfg_checks)
    daemon = _ask_daemon(cfg)
    checks.extend(_radios_of_daemon(daemon, cfg.control if cfg else "") or _radios(cfg))
    checks.extend(_routing(cfg))
    checks.extend(_daemon(cfg, daemon))
    return checks


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        line = f"  {c.status:4s}  {c.what}" + (f": {c.detail}" if c.detail else "")
        if c.fix and c.status in (FAIL, WARN, INFO):
            line += f"\n          -> {c.fix}"
        lines.append(line)
    fails = sum(c.status == FAIL for c in checks)
    lines.append(
        f"doctor: {fails} problem{'s' if fails != 1 else ''}"
        + ("" if fails else ", ready (INFO lines are not problems)")
    )
    return "\n".join(lines)
