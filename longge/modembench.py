"""``./run.sh modem-bench``: the USB modem's AVR image, the very ``.elf`` that ``make -C firmware
avr`` builds, on a simulated ATmega328P at 16 MHz (simavr), streaming frames each way.

The simulator (``firmware/sim/modem_sim.c``) feeds the USART at the wire's own pace and counts
data overruns, wires SPI, CE and CSN to the chip model (``firmware/native/chip.c``) on an air
in the same virtual time, and plays the host with the modem's protocol. Everything runs in
simulated time: the figures are the AVR's, not this machine's (docs/modem.md).
"""

from __future__ import annotations

import fcntl
import functools
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longge.errors import ConfigError, LongGeError

FIRMWARE = Path(__file__).resolve().parent.parent / "firmware"
F_CPU = 16_000_000
RAM_BYTES = 2048
#: What the static RAM and the deepest stack together may take (docs/modem.md): a quarter of
#: the ATmega328P's 2 KiB left for what no test exercised.
RAM_BUDGET_BYTES = 1536
DEFAULT_BAUD = 2_000_000
RATES = ("2M", "1M", "250k")


class ModemBenchError(LongGeError):
    """The simulation could not be built or run (names what to install or fix)."""


def image_baud(baud: int) -> float:
    """The rate the image really runs at for a requested baud: 16 MHz / (8 (UBRR + 1)), U2X."""
    ubrr = max(0, (F_CPU + 4 * baud) // (8 * baud) - 1)
    return F_CPU / (8 * (ubrr + 1))


def check_baud(baud: int) -> None:
    """A baud rate the ATmega328P makes within 2 % (8N1 tolerates about that), or ConfigError."""
    if not 9_600 <= baud <= DEFAULT_BAUD:
        raise ConfigError("--baud", baud, "9600..2000000")
    real = image_baud(baud)
    if abs(real - baud) > 0.02 * baud:
        raise ConfigError(
            "--baud", baud, f"a rate 16 MHz makes within 2 % (this one comes out at {real:.0f})"
        )


@dataclass(frozen=True)
class ModemBenchPlan:
    seconds: float = 10.0
    baud: int = DEFAULT_BAUD
    no_ack: bool = False
    rate: str = "2M"

    def __post_init__(self) -> None:
        if not 0.05 <= self.seconds <= 600:
            raise ConfigError("--seconds", self.seconds, "0.05..600 (simulated seconds)")
        check_baud(self.baud)
        if self.rate not in RATES:
            raise ConfigError("--rate", self.rate, " | ".join(RATES))


def make_firmware(*args: str) -> subprocess.CompletedProcess[str]:
    """``make -C firmware ARGS``, one at a time on this checkout (every caller: this module,
    the testbed, the tests). Two processes (the test suite's two workers) that each ran make
    relinked a program while the other was starting it (EACCES): modem-sim, and on a fresh
    clone proto-fuzz (one worker's ``make native`` for the testbed's modem, the other's for
    the parser's tests)."""
    lock = FIRMWARE / "build" / ".make.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        return subprocess.run(["make", "-C", str(FIRMWARE), *args], capture_output=True, text=True)


def _make(*args: str) -> None:
    if shutil.which("make") is None:
        raise ModemBenchError("make is missing (Debian: make; ./run.sh installs it as root)")
    r = make_firmware(*args)
    if r.returncode != 0:
        hint = ""
        if "simavr" in r.stderr:
            hint = " (Debian: simavr libsimavr-dev; ./run.sh installs them as root)"
        elif "avr-gcc" in r.stderr:
            hint = " (Debian: gcc-avr avr-libc binutils-avr; ./run.sh installs them as root)"
        raise ModemBenchError(
            f"make -C firmware {' '.join(args)} failed{hint}:\n{r.stderr[-1500:]}"
        )


@functools.cache
def build_simulator() -> Path:
    """firmware/build/modem-sim, built from source on first use (once a process)."""
    _make("sim")
    return FIRMWARE / "build" / "modem-sim"


def build_image(baud: int = DEFAULT_BAUD, extra_cflags: str = "", tag: str = "") -> Path:
    """The AVR image for a baud rate (the default one is `make avr`'s own build/)."""
    if baud == DEFAULT_BAUD and not extra_cflags:
        _make("avr")
        return FIRMWARE / "build" / "longge-modem.elf"
    build = FIRMWARE / "build" / f"avr-{baud}{('-' + tag) if tag else ''}"
    _make("avr", f"BUILD={build}", f"MODEM_BAUD={baud}", f"AVR_EXTRA={extra_cflags}")
    return build / "longge-modem.elf"


def simulate(
    image: Path,
    *,
    seconds: float,
    baud: int = DEFAULT_BAUD,
    direction: str = "tx",
    no_ack: bool = False,
    rate: str = "2M",
    fuzz: int = 0,
) -> dict[str, Any]:
    """One simulated run (one direction): the simulator's JSON object."""
    sim = build_simulator()
    args = [str(sim), str(image), "--seconds", str(seconds), "--baud", str(baud)]
    args += ["--direction", direction, "--rate", rate]
    if no_ack:
        args.append("--no-ack")
    if fuzz:
        args += ["--fuzz", str(fuzz)]
    # simulated time runs several times faster than real time here; allow for a slow machine
    r = subprocess.run(args, capture_output=True, text=True, timeout=60 + 30 * seconds)
    if r.returncode != 0:
        raise ModemBenchError(f"{sim.name} failed:\n{r.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(r.stdout)
    return result


def run_bench(plan: ModemBenchPlan) -> dict[str, Any]:
    """Both directions, one after the other (one radio is half duplex), and a summary."""
    image = build_image(plan.baud)
    ways = {
        d: simulate(
            image,
            seconds=plan.seconds,
            baud=plan.baud,
            direction=d,
            no_ack=plan.no_ack,
            rate=plan.rate,
        )
        for d in ("tx", "rx")
    }
    completed = all(w["completed"] for w in ways.values())
    static = ways["tx"]["static_ram_bytes"]
    stack = max(w["stack_max_bytes"] for w in ways.values())
    return {
        "image": str(image),
        "mode": "no-ack" if plan.no_ack else "esb",
        "rate": plan.rate,
        "baud": plan.baud,
        "seconds": plan.seconds,
        "completed": completed,
        # the modem's figure is its slower way
        "frames_per_s": min(w["frames_per_s"] for w in ways.values()),
        "air_frames_per_s": ways["tx"]["air_frames_per_s"],
        "ratio": min(w["ratio"] for w in ways.values()),
        "uart_overruns": sum(w["uart_overruns"] for w in ways.values()),
        "uart_late_reads": sum(w["uart_late_reads"] for w in ways.values()),
        "ring_drops": sum(w["ring_drops"] for w in ways.values()),
        "stack_max_bytes": stack,
        "static_ram_bytes": static,
        "ram_used_bytes": static + stack,
        "ram_budget_bytes": RAM_BUDGET_BYTES,
        "idle_share": min(w["idle_share"] for w in ways.values()),
        "directions": ways,
    }


def format_result(r: dict[str, Any]) -> str:
    lines = [
        f"modem-bench: the AVR image on a simulated ATmega328P at 16 MHz, "
        f"{r['mode']} at {r['rate']} air, {r['baud']} baud, {r['seconds']:g} simulated s each way",
        f"{'way':<14}{'frames/s':>10}{'air allows':>12}{'ratio':>8}{'overruns':>10}"
        f"{'late':>6}{'stack B':>9}{'idle':>7}",
    ]
    names = {"tx": "host -> air", "rx": "air -> host"}
    for d, w in r["directions"].items():
        if not w["completed"]:
            lines.append(f"{names[d]:<14}the modem stopped answering the host: no figure")
            continue
        lines.append(
            f"{names[d]:<14}{w['frames_per_s']:>10.0f}{w['air_frames_per_s']:>12.0f}"
            f"{w['ratio']:>8.3f}{w['uart_overruns']:>10}{w['uart_late_reads']:>6}"
            f"{w['stack_max_bytes']:>9}{w['idle_share']:>7.2f}"
        )
    lines.append(
        f"RAM: {r['static_ram_bytes']} B static + {r['stack_max_bytes']} B deepest stack = "
        f"{r['ram_used_bytes']} B of {RAM_BYTES} (budget {r['ram_budget_bytes']})"
    )
    if r["ring_drops"]:
        lines.append(f"host bytes lost to a full receive ring: {r['ring_drops']}")
    return "\n".join(lines)
