"""``./run.sh scan``: a 2.4 GHz channel survey with the radio's received power detector.

For each sweep, every channel 0..125 is listened to for ``dwell_us`` and the RPD read (a
carrier above −64 dBm for 40 µs or more); a channel's occupancy is the share of sweeps in
which it was heard. This is the classic RF24 scanner, with two suggestions on top: the two
quietest channels, well apart, inside the 2.4 GHz ISM band (channels 0..83 = 2400..2483 MHz:
what may be used in most countries).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longge.chip.datasheet import ISM_MAX_CHANNEL

CHANNELS = 126
#: Signal width at 2 Mbit/s is 2 MHz: a channel is judged by its neighbourhood.
GUARD = 2
BARS = " ▁▂▃▄▅▆▇█"


@dataclass
class Survey:
    sweeps: int
    hits: list[int]

    @property
    def occupancy(self) -> list[float]:
        return [h / self.sweeps if self.sweeps else 0.0 for h in self.hits]

    def busy(self, threshold: float = 0.05) -> list[int]:
        return [ch for ch, occ in enumerate(self.occupancy) if occ > threshold]


def sweep(
    radio: Any, sweeps: int, dwell_us: int = 200, progress: Callable[[int], None] | None = None
) -> Survey:
    """Listen on every channel ``sweeps`` times; ``radio`` is any backend (pyrf24 names)."""
    hits = [0] * CHANNELS
    radio.stop_listening()
    for n in range(sweeps):
        for ch in range(CHANNELS):
            radio.channel = ch
            radio.start_listening()
            end = time.perf_counter() + dwell_us / 1e6
            while time.perf_counter() < end:
                pass  # a busy wait: sleeping 200 µs costs a timer slack and a scheduler tick
            hits[ch] += bool(radio.rpd)
            radio.stop_listening()
        if progress is not None:
            progress(n + 1)
    return Survey(sweeps, hits)


def suggest(
    survey: Survey, max_channel: int = ISM_MAX_CHANNEL, min_gap: int = 4
) -> tuple[int, int]:
    """Two quiet channels for the link (uplink, downlink): each judged by the busiest channel
    within ±GUARD of it; among the quietest, the pair farthest apart (at least ``min_gap``)."""
    occ = survey.occupancy
    score = [
        max(occ[max(0, ch - GUARD) : min(CHANNELS, ch + GUARD + 1)])
        for ch in range(max_channel + 1)
    ]
    order = sorted(range(len(score)), key=lambda ch: (score[ch], ch))
    best = score[order[0]]
    quiet = [ch for ch in order if score[ch] <= best + 0.01]
    if len(quiet) >= 2 and max(quiet) - min(quiet) >= min_gap:
        return min(quiet), max(quiet)
    first = order[0]
    second = next(ch for ch in order if abs(ch - first) >= min_gap)
    return tuple(sorted((first, second)))  # type: ignore[return-value]


def render(survey: Survey, marks: Sequence[int] = ()) -> str:
    """Occupancy as a one-line bar chart per 42 channels, with the channel numbers below."""
    occ = survey.occupancy
    lines = []
    for start in range(0, CHANNELS, 42):
        chs = range(start, min(CHANNELS, start + 42))
        bars = "".join(
            BARS[max(1, min(8, round(occ[ch] * 8)))] if occ[ch] > 0 else "·" for ch in chs
        )
        tens = "".join(str(ch // 10 % 10) if ch % 10 == 0 else " " for ch in chs)
        ones = "".join(str(ch % 10) for ch in chs)
        mark = "".join("^" if ch in marks else " " for ch in chs)
        lines += [f"  {bars}", f"  {tens}", f"  {ones}", f"  {mark}".rstrip(), ""]
    return "\n".join(lines).rstrip()


def plot(survey: Survey, out: Path, marks: Sequence[int] = (), title: str = "") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 3.6))
    occ = [100 * o for o in survey.occupancy]
    colours = ["tab:green" if ch in marks else "tab:blue" for ch in range(CHANNELS)]
    ax.bar(range(CHANNELS), occ, width=0.9, color=colours)
    ax.axvspan(ISM_MAX_CHANNEL + 0.5, CHANNELS, color="grey", alpha=0.15, label="outside ISM band")
    for i, ch in enumerate(marks):
        ax.axvline(ch, color="tab:green", lw=2, label="suggested" if i == 0 else None)
        ax.text(ch, 92, str(ch), ha="center", color="tab:green", fontsize=9)
    for wifi, centre in ((1, 12), (6, 37), (11, 62)):
        ax.axvspan(centre - 11, centre + 11, color="orange", alpha=0.06)
        ax.text(centre, 101, f"Wi-Fi {wifi}", ha="center", fontsize=8, color="darkorange")
    ax.set(
        xlim=(-1, CHANNELS),
        ylim=(0, 108),
        xlabel="nRF24 channel (2400 + n MHz)",
        ylabel="occupancy (% of sweeps)",
        title=title or f"channel survey: {survey.sweeps} sweeps (green: suggested)",
    )
    ax.legend(loc="upper right", fontsize=8)
    paths = [out.with_suffix(".png"), out.with_suffix(".svg")]
    for p in paths:
        fig.savefig(p, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return paths


@dataclass
class Done:
    """A finished scan: the survey, where it was made, and the files written."""

    survey: Survey
    where: str
    suggested: tuple[int, int]
    busy: list[int]
    chart: Path
    data: Path


def _daemon_listening(control: str) -> bool | str:
    """Does a daemon listen on this control socket? One a crashed daemon left refuses the
    connection, and blocked the scan for good (False). A socket that cannot be tried (not
    root: the daemon's are root's) counts as a daemon: the reason, as a string."""
    import socket

    if not os.path.exists(control):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(control)
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError as exc:
            return exc.strerror or str(exc) or repr(exc)
    return True


def _installed_config(say: Callable[[str], None]) -> Any:
    """This node's installed config, for its RX radio's pins and control socket. The scan
    needs nothing of its security: a key it cannot read (not root, not copied yet) is left
    out; a file it cannot load at all leaves the wiring table's pins, said."""
    import tomllib

    from longge import config, configfile
    from longge.errors import ConfigError

    path = config.DEFAULT_PATH
    try:
        data = tomllib.loads(Path(path).read_text())
        data["security"] = {"insecure": True}
        for peer in data.get("peer") or ():
            for key in ("key", "key_file", "previous_key", "previous_key_file"):
                peer.pop(key, None)
        cfg = configfile.from_mapping(data)
    except (ConfigError, OSError, ValueError) as exc:
        say(f"{path} not used ({exc}): the default pins")
        return config.NodeConfig(insecure=True)
    say(f"the RX radio's pins from {path} (--config for another)")
    return cfg


def run(
    config_path: str | None,
    backend: str,
    air: str | None,
    sweeps: int,
    dwell_us: int,
    traffic: bool = False,
    wifi: int | None = None,
    duty: float = 0.3,
    out: Path | None = None,
    say: Callable[[str], None] = lambda s: None,
    progress: Callable[[float], None] = lambda f: None,
) -> Done:
    """Survey with the RX radio on SPI (a config, or ``backend = "rf24"``) or with an emulated
    radio on the testbed's air (``traffic``: ping the base station meanwhile; ``wifi``: a
    Wi-Fi-like interferer on that Wi-Fi channel for the scan); write the chart and the JSON
    (``out``, else the results folder). Raises LongGeError with what to do."""
    import contextlib
    import json
    import subprocess

    from longge import testbed
    from longge.air import wire
    from longge.air.wire import query
    from longge.errors import LongGeError
    from longge.measure.results import results_root

    radio: Any
    proc = None
    real = bool(config_path) or backend == "rf24"  # a radio on SPI, else the emulator
    if real:
        from longge import config, configfile
        from longge.radio.rf24 import Rf24Radio

        cfg = config.NodeConfig(insecure=True)
        if config_path:
            cfg = configfile.load(config_path)
        elif os.path.exists(config.DEFAULT_PATH):
            cfg = _installed_config(say)
        listening = _daemon_listening(cfg.control)
        if listening:
            why = "" if listening is True else f" (cannot tell: {listening}; sudo can)"
            raise LongGeError(
                f"the daemon is using the radios ({cfg.control}{why}): systemctl stop longge first"
            )
        radio = Rf24Radio(cfg.rx_ce_pin, cfg.rx_csn_pin, cfg.spi_speed, name="scan")
        where = radio.where
    else:
        from longge.radio.options import RadioOptions, configure
        from longge.radio.sim import SimRadio

        air = air or str(testbed.paths()["air"])
        if not os.path.exists(air):
            raise LongGeError(
                "no radio configured and no emulator running: "
                "sudo ./run.sh testbed up (then scan again), or --air SOCKET"
            )
        radio = SimRadio(air=air, name="scanner")
        where = f"emulated radio on {air}"
        try:  # (what this sets up is undone below, also when it fails half-way)
            if wifi:
                query(air, wire.interferer_message(wifi, duty))
            if traffic and testbed.status().get("up"):
                ping = ["ping", "-q", "-i", "0.01", "-s", "600", "-w", "600", testbed.BASE_IP]
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", "lg-mobile", *ping],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.0)  # the pings flow both ways before the first sweep (RTT ~20 ms)
            if not radio.begin():
                raise LongGeError(f"the emulator at {air} does not answer")
            configure(radio, RadioOptions(), channel=0)
        except BaseException:
            if proc is not None:
                proc.terminate()
            with contextlib.suppress(OSError, ValueError):
                query(air, wire.CLEAR_INTERFERERS)
            raise
    say(f"{sweeps} sweeps of channels 0..125, {dwell_us} µs each, {where}")
    started = time.monotonic()
    try:
        if real:
            radio.begin()
        survey = sweep(radio, sweeps, dwell_us, lambda n: progress(n / sweeps))
    finally:
        if proc is not None:
            proc.terminate()
        if wifi and not real and air:
            with contextlib.suppress(OSError):
                query(air, wire.CLEAR_INTERFERERS)
        close = getattr(radio, "close", None)
        if close is not None:
            close()
    a, b = suggest(survey)
    busy = survey.busy()
    out = out or results_root() / f"{time.strftime('%Y%m%d-%H%M%S')}-scan"
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = plot(survey, out, marks=(a, b))
    data = out.with_suffix(".json")
    record = {
        "sweeps": survey.sweeps,
        "dwell_us": dwell_us,
        "occupancy": survey.occupancy,
        "busy": busy,
        "suggested": [a, b],
        "radio": where,
        "seconds": round(time.monotonic() - started, 2),
    }
    data.write_text(json.dumps(record, indent=1))
    return Done(survey, where, (a, b), busy, paths[0], data)


#: A channel's level as ``scan --link`` draws it (band.py's levels).
LEVEL_MARK = {0: "?", 1: ".", 2: "-", 3: "#"}


def link_view(channels: dict[str, Any]) -> str:
    """What a running agile link sees of the band (its RX process's ``channels`` status), as
    lines: a mark per ISM channel (``.`` quiet, ``-`` some, ``#`` busy, ``?`` not known) for
    this node's power detector and its peer's report, the link's channels under them (U, D),
    and its last decisions."""
    from longge.protocol.band import LEVEL_CHANNELS, parse_levels

    band = channels.get("band") or {}
    up, down = channels.get("uplink"), channels.get("downlink")

    def row(hexed: object) -> str:
        if not isinstance(hexed, str):
            return "(none)"
        try:
            levels = parse_levels(bytes.fromhex(hexed))
        except ValueError:
            return "(unreadable)"
        return "".join(LEVEL_MARK[levels[c]] for c in range(LEVEL_CHANNELS))

    marks = "".join("U" if c == up else "D" if c == down else " " for c in range(LEVEL_CHANNELS))
    ruler = "".join(str(c // 10) if c % 10 == 0 else " " for c in range(LEVEL_CHANNELS))
    lines = [
        f"  channel    {ruler}",
        f"  here       {row(band.get('levels'))}",
        f"  the peer   {row(band.get('peer_levels'))}",
        f"  the link   {marks}   (uplink {up}, downlink {down})",
    ]
    for number, ago, what in channels.get("recent") or []:
        lines.append(f"  {number:>4}  {ago:8.1f} s ago  {what}")
    return "\n".join(lines)
