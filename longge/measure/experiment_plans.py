"""The experiments as data (``./run.sh experiment NAME``'s catalogue): each ``Experiment``
names the parameter it varies and its values (full and ``--quick``), the series it compares
(each a set of conditions) and what it measures; every condition value is checked here
(``_check``: a ConfigError naming it and what is allowed) before anything runs. The runner
that applies conditions and measures is experiments.py; the plot and verdict of any
experiment, experiment_report.py."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from longge.errors import ConfigError
from longge.measure.model import IP_UDP_HEADERS, udp_goodput_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions

#: The conditions a point runs under, with their defaults (what the link has when untouched).
DEFAULTS: dict[str, Any] = {
    "protocol": "tcp",
    "ard_us": 250,
    "arc": 2,
    "per": 0.0,
    "delay_ms": 0,
    "window": 0,  # socket buffer limit in bytes; 0 = the system's default
    "cc": "",  # congestion control; "" = the system's default
    "streams": 1,
    "bulk_flows": 0,
    "mode": "",  # the link mode; "" = the one the link runs with
    "probe": "ping",  # the sparse flow measure "ping" probes: PROBES' or "20ms/200B"
    "direction": "up",  # the bulk flows' of measure "ping": up (mobile -> base) or down
}
MEASURES = ("goodput", "goodput+ping", "flows", "ping")
CC_CHOICES = ("reno", "cubic", "bbr", "vegas", "westwood", "htcp", "bic", "illinois")
#: The experiments' RTT probes (measure/loadprobe.py): one every 0.2 s, as the ping they replaced.
PROBE_INTERVAL_S = 0.2
#: The sparse flows measure "ping" can probe with: (interval s, UDP payload bytes). "ping":
#: the probes above (60 bytes, 5 a second); "keystroke": an interactive session's typing
#: (36 bytes, what one SSH keystroke's payload is, 10 a second).
PROBES = {"ping": (PROBE_INTERVAL_S, 60), "keystroke": (0.1, 36)}
#: The interactive flows of ``experiment multiplex``'s grid (issue 70): a packet every 10, 20,
#: 50 or 100 ms (a game, a call's 20-ms frames, a remote desktop), of 64, 200 or 1200 bytes
#: of UDP payload, wherever that is below its fair share beside 3 bulk flows (GRID_BULK).
GRID_INTERVALS_MS = (10, 20, 50, 100)
GRID_SIZES = (64, 200, 1200)
GRID_BULK = 3


def probe_spec(probe: str) -> tuple[float, int]:
    """(interval s, UDP payload bytes) of a probe condition: a name of PROBES or "20ms/200B";
    ValueError for anything else."""
    if probe in PROBES:
        return PROBES[probe]
    m = re.fullmatch(r"(\d{1,4})ms/(\d{1,4})B", probe)
    if m is None or int(m.group(1)) < 1 or not 8 <= int(m.group(2)) <= 1400:
        raise ValueError(probe)
    return int(m.group(1)) / 1000, int(m.group(2))


def interactive_grid(overhead: int) -> tuple[Series, ...]:
    """The multiplex grid's series: each interval and size below its fair share (C / (n + 1)
    with n = GRID_BULK, C the model's bound at 2 Mbit/s in the mode, ``overhead`` the
    security's bytes a packet), each way, ESB then stream mode."""
    out = []
    for mode in ("esb", "stream"):
        capacity = udp_goodput_bps(RadioOptions(mode=mode), 1400, overhead)
        for direction in ("up", "down"):
            for every_ms in GRID_INTERVALS_MS:
                for size in GRID_SIZES:
                    rate = (size + IP_UDP_HEADERS + overhead) * 8 / (every_ms / 1000)
                    if rate >= capacity / (GRID_BULK + 1):
                        continue  # (above its share: not interactive, not in the grid)
                    out.append(
                        Series(
                            f"{every_ms} ms x {size} B, {direction}, {mode}",
                            {
                                "probe": f"{every_ms}ms/{size}B",
                                "direction": direction,
                                "mode": mode,
                            },
                        )
                    )
    return tuple(out)


def _radio_option(name: str, value: Any) -> bool:
    """A radio option is checked where the radio's options are (radio/options.py), which
    raises ConfigError naming it and what it allows."""
    RadioOptions(**{name: value})
    return True


def _probe_ok(value: Any) -> bool:
    try:
        probe_spec(value)
    except (ValueError, TypeError):
        return False
    return True


def _check(name: str, value: Any) -> None:
    """Refuse a condition value the runner cannot apply (named, with what is allowed)."""
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "protocol": (lambda v: v in ("tcp", "udp"), "tcp or udp"),
        "ard_us": (lambda v: _radio_option("ard_us", v), ""),
        "arc": (lambda v: _radio_option("arc", v), ""),
        "per": (lambda v: isinstance(v, (int, float)) and 0 <= v < 1, "0 <= per < 1"),
        "delay_ms": (lambda v: isinstance(v, int) and 0 <= v <= 2000, "0..2000 ms"),
        "window": (
            lambda v: isinstance(v, int) and (v == 0 or 2048 <= v <= 16 << 20),
            "0 or 2 KiB..16 MiB",
        ),
        "cc": (lambda v: v == "" or v in CC_CHOICES, "one of " + ", ".join(CC_CHOICES)),
        "streams": (lambda v: isinstance(v, int) and 1 <= v <= 16, "1..16"),
        "bulk_flows": (lambda v: isinstance(v, int) and 0 <= v <= 8, "0..8"),
        "mode": (lambda v: v == "" or _radio_option("mode", v), ""),
        "probe": (_probe_ok, " or ".join(PROBES) + ', or "20ms/200B" (1..9999 ms, 8..1400 B)'),
        "direction": (lambda v: v in ("up", "down"), "up or down"),
    }
    if name not in checks:
        raise ConfigError("experiment", name, "a condition: " + ", ".join(checks))
    ok, allowed = checks[name]
    if not ok(value):
        raise ConfigError(name, value, allowed)


@dataclass(frozen=True)
class Series:
    label: str
    conditions: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    name: str
    question: str
    vary: str
    values: tuple[Any, ...]
    quick_values: tuple[Any, ...]
    measure: str
    xlabel: str
    series: tuple[Series, ...] = (Series("default"),)
    base: dict[str, Any] = field(default_factory=dict)  # conditions for every point
    log_x: bool = False
    trial_s: int = 10
    quick_trial_s: int = 5
    #: the series --quick runs (labels; None: all)
    quick_series: tuple[str, ...] | None = None

    def validate(self) -> None:
        if self.measure not in MEASURES:
            raise ConfigError(f"{self.name}.measure", self.measure, ", ".join(MEASURES))
        if not self.values or not self.quick_values:
            raise ConfigError(f"{self.name}.values", self.values, "at least one value")
        for v in (*self.values, *self.quick_values):
            _check(self.vary, v)
        for s in self.series:
            for k, v in {**self.base, **s.conditions}.items():
                _check(k, v)
        if self.trial_s < 2 or self.quick_trial_s < 2:
            raise ConfigError(f"{self.name}.trial_s", self.trial_s, ">= 2 s")

    def points(self, quick: bool) -> list[tuple[Series, Any, dict[str, Any]]]:
        """(series, x, full conditions) of every point, in run order."""
        out = []
        for s in self.series:
            if quick and self.quick_series is not None and s.label not in self.quick_series:
                continue
            for x in self.quick_values if quick else self.values:
                out.append((s, x, {**DEFAULTS, **self.base, **s.conditions, self.vary: x}))
        return out


LONG_RETRY = {"ard_us": 1000, "arc": 15}
MULTIPLEX_PINGS = (
    Series("default"),
    Series("keystroke", {"probe": "keystroke"}),
    Series("ping, stream", {"mode": "stream"}),
    Series("keystroke, stream", {"mode": "stream", "probe": "keystroke"}),
)
#: (on a secured link: the testbed's and the examples' default)
MULTIPLEX_GRID = interactive_grid(OVERHEAD)

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "tcp-vs-udp",
            "How much of the link does TCP get, next to UDP and the frame-level bound?",
            vary="protocol",
            values=("udp", "tcp"),
            quick_values=("udp", "tcp"),
            measure="goodput",
            xlabel="protocol",
        ),
        Experiment(
            "loss",
            "How does goodput fall as the frame error rate rises, with short and long retries?",
            vary="per",
            values=(0.0, 0.05, 0.1, 0.15, 0.2, 0.3),
            quick_values=(0.0, 0.1, 0.3),
            measure="goodput",
            xlabel="frame error rate (each attempt, data or ACK)",
            series=(
                Series("TCP, ARD 250 µs ARC 2", {"protocol": "tcp"}),
                Series("TCP, ARD 1000 µs ARC 15", {"protocol": "tcp", **LONG_RETRY}),
                Series("UDP, ARD 250 µs ARC 2", {"protocol": "udp"}),
                Series("UDP, ARD 1000 µs ARC 15", {"protocol": "udp", **LONG_RETRY}),
            ),
        ),
        Experiment(
            "window",
            "How do TCP goodput and RTT depend on the socket buffer (the window)?",
            vary="window",
            values=(2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144),
            quick_values=(2048, 4096, 16384, 262144),
            measure="goodput+ping",
            xlabel="socket buffer limit (bytes, tcp_rmem/tcp_wmem)",
            log_x=True,
        ),
        Experiment(
            "parallel",
            "Do parallel TCP flows share the link fairly (Jain's index)?",
            vary="streams",
            values=(1, 2, 3, 4, 6, 8),
            quick_values=(1, 2, 4, 8),
            measure="flows",
            xlabel="parallel TCP flows",
        ),
        Experiment(
            "multiplex",
            "What RTT does a ping see while bulk TCP flows share the link?",
            vary="bulk_flows",
            values=(0, 1, 2, 3),
            quick_values=(0, 1, 3),  # (four series: `experiment all --quick` in 15 minutes)
            measure="ping",
            xlabel="bulk TCP flows",
            # the ping in ESB is the series "default" (results stay comparable with earlier
            # ones); a keystroke flow beside it, and both in stream mode (issue 43); the
            # interactive grid each way, both modes (issue 70)
            series=(*MULTIPLEX_PINGS, *MULTIPLEX_GRID),
            # (--quick runs the pings alone: `experiment all --quick` stays within its 15
            # minutes; the grid is 36 series, some 40 minutes: `--values 0,3` halves it)
            quick_series=tuple(s.label for s in MULTIPLEX_PINGS),
        ),
        Experiment(
            "cc",
            "Which congestion control keeps goodput on a lossy, slow link: Reno, CUBIC, BBR?",
            vary="per",
            values=(0.0, 0.05, 0.1, 0.2),
            quick_values=(0.0, 0.1),
            measure="goodput",
            xlabel="frame error rate",
            series=tuple(
                Series(f"{cc}{'' if d == 0 else f', +{d} ms'}", {"cc": cc, "delay_ms": d})
                for d in (0, 50)
                for cc in ("reno", "cubic", "bbr")
            ),
        ),
        Experiment(
            "mode",
            "Which link mode carries more, and keeps RTT lower, as frames are lost: ESB (the "
            "chips acknowledge) or stream (LongGe's ARQ)?",
            vary="per",
            values=(0.0, 0.05, 0.1, 0.2, 0.3),
            quick_values=(0.0, 0.1, 0.3),
            measure="goodput+ping",
            xlabel="frame error rate (each frame, data or acknowledgement)",
            series=tuple(
                Series(f"{proto.upper()}, {mode}", {"protocol": proto, "mode": mode})
                for proto in ("udp", "tcp")
                for mode in ("esb", "stream")
            ),
        ),
    )
}


def narrowed(exp: Experiment, values: str | None, seconds: int | None) -> Experiment:
    """``exp`` with only ``values`` (experiment --values: text with commas, each read as the
    definition's own values are) and trials of ``seconds`` (--time), in both its plans."""
    changes: dict[str, Any] = {}
    if values is not None:
        like = type(exp.values[0])
        try:
            picked = tuple(dict.fromkeys(like(t.strip()) for t in values.split(",")))
            for v in picked:
                _check(exp.vary, v)
        except (ValueError, ConfigError):
            raise ConfigError(
                "--values", values, f"{exp.vary} values of {exp.name}, e.g. {exp.values}"
            ) from None
        changes["values"] = changes["quick_values"] = picked
    if seconds is not None:
        changes["trial_s"] = changes["quick_trial_s"] = seconds
    out = replace(exp, **changes)
    out.validate()
    return out
