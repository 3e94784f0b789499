"""The channel's error model: which frames the air destroys.

Each directed link (transmitter name -> receiver name) gets its own random generator seeded
from the air's seed and the link's names, so the k-th frame on a link meets the same fate in
every run with the same seed, whatever other links do. Data frames and ACKs have their own
rates. Losses are either independent (Bernoulli) or bursty (Gilbert–Elliott with a lossless
good state and a lossy bad state, parametrised by the long-run error rate and the mean burst
length).

A link may also have a path loss (dB): then each frame also meets the noise of a receiver at
the end of that path. Its margin is the sender's output power (RF_PWR) minus the path loss
minus the receiver's sensitivity at the frame's data rate (datasheet: 0.1 % BER at −82, −85,
−94 dBm); the bit error rate follows non-coherent binary FSK's curve, BER = ½·exp(−γ/2)
with γ the signal-to-noise ratio per bit, scaled so that the curve passes through the
datasheet's point (γ = 2·ln 500 at the sensitivity); a frame of n bits survives with
(1 − BER)^n. So each data rate, power level and frame length has its own error rate, from a
separate generator per link and kind (docs/emulator.md, "The channel").
"""

from __future__ import annotations

import argparse
import math
import random
import zlib
from dataclasses import dataclass, field

from longge.air.interferer import WifiSpec, parse_interferer
from longge.chip.datasheet import PA_DBM, SENSITIVITY_BER, SENSITIVITY_DBM
from longge.errors import ConfigError

#: The signal-to-noise ratio per bit at which ½·exp(−γ/2) is the sensitivity's BER (2·ln 500).
GAMMA_AT_SENSITIVITY = -2.0 * math.log(2.0 * SENSITIVITY_BER)
#: Path losses the air accepts, dB (0: antennas touching; 200: far beyond any link).
PATH_LOSS_RANGE = (0.0, 200.0)


def margin_db(path_loss: float, pa_level: int, rate: str) -> float:
    """How far above the receiver's sensitivity a frame arrives (negative: below it)."""
    return PA_DBM[pa_level] - path_loss - SENSITIVITY_DBM[rate]


def frame_error(margin: float, bits: int) -> float:
    """The chance that a frame of ``bits`` bits arriving ``margin`` dB above the sensitivity
    has a bit wrong (its CRC then fails and the receiver drops it)."""
    gamma = GAMMA_AT_SENSITIVITY * 10.0 ** (margin / 10.0)
    ber = 0.5 * math.exp(-gamma / 2.0)
    return 1.0 - (1.0 - ber) ** bits


def _check_rate(key: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfigError(key, value, "a probability in 0..1")


@dataclass(frozen=True)
class LossSpec:
    """Error rates of one link. ``burst`` is the mean length of a loss burst (1 = independent)."""

    data_per: float = 0.0
    ack_per: float = 0.0
    burst: float = 1.0
    #: dB between the sender's antenna and the receiver's (None: close, no noise errors)
    path_loss: float | None = None

    def __post_init__(self) -> None:
        _check_rate("per", self.data_per)
        _check_rate("ack_per", self.ack_per)
        if self.burst < 1.0:
            raise ConfigError("burst", self.burst, "a mean burst length >= 1 frame")
        if self.burst > 1.0 and max(self.data_per, self.ack_per) >= 1.0:
            raise ConfigError("burst", self.burst, "bursts need an error rate below 1")
        check_path_loss(self.path_loss)

    def frame_errors(
        self, rate: str, pa_level: int, data_bits: int, ack_bits: int
    ) -> tuple[float, float]:
        """The long-run error rates of a data frame and of its ACK on this link, both ends
        at ``rate`` and ``pa_level``: its own rates combined with the path's."""
        if self.path_loss is None:
            return self.data_per, self.ack_per
        m = margin_db(self.path_loss, pa_level, rate)
        data = 1.0 - (1.0 - self.data_per) * (1.0 - frame_error(m, data_bits))
        ack = 1.0 - (1.0 - self.ack_per) * (1.0 - frame_error(m, ack_bits))
        return data, ack


def check_path_loss(value: object) -> None:
    lo, hi = PATH_LOSS_RANGE
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError("path_loss", value, f"dB in {lo:g}..{hi:g}, or none")


@dataclass(frozen=True)
class AirLoss:
    """The emulated air's losses as the user gives them (``--per``, ``--ack-per``, ``--burst``,
    ``--seed``, ``--interferer``): the emulator's own settings, apart from the link's
    (radio.options)."""

    per: float = 0.0
    ack_per: float | None = None  # None: same as per
    burst: float = 1.0
    seed: int = 1
    #: a Wi-Fi interferer that destroys the frames it overlaps: "wifi:CHANNEL[:DUTY[:MODEL]]"
    interferer: str | None = None
    #: dB on every link (None: the radios are close: no noise errors)
    path_loss: float | None = None

    def __post_init__(self) -> None:
        for key in ("per", "ack_per", "burst"):
            value = getattr(self, key)
            if value is not None and (
                not isinstance(value, int | float) or isinstance(value, bool)
            ):
                raise ConfigError(key, value, "a number")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError("seed", self.seed, "a whole number")
        self.spec()  # checks per, ack_per, burst
        if self.interferer is not None:
            parse_interferer(self.interferer)

    def wifi(self) -> WifiSpec | None:
        """The interferer's Wi-Fi channel, busy share and model, or None."""
        return None if self.interferer is None else parse_interferer(self.interferer)

    def spec(self) -> LossSpec:
        return LossSpec(
            data_per=self.per,
            ack_per=self.per if self.ack_per is None else self.ack_per,
            burst=self.burst,
            path_loss=self.path_loss,
        )

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "per": self.per,
            "ack_per": self.ack_per,
            "burst": self.burst,
            "seed": self.seed,
        }
        # (absent when unset: testbeds recorded before they existed still match)
        if self.interferer is not None:
            out["interferer"] = self.interferer
        if self.path_loss is not None:
            out["path_loss"] = self.path_loss
        return out


#: The air destroys nothing (the default everywhere).
NO_LOSS = AirLoss()


def add_loss_arguments(parser: argparse.ArgumentParser) -> None:
    """The emulated air's options, for every command that can bring an emulator up."""
    d = AirLoss()
    e = parser.add_argument_group("emulated air")
    e.add_argument("--per", type=float, default=d.per, help="frame error rate, data+ACK")
    e.add_argument("--ack-per", type=float, default=None, help="ACK error rate (=--per)")
    e.add_argument("--burst", type=float, default=d.burst, help="mean loss burst, frames")
    e.add_argument("--seed", type=int, default=d.seed, help="seed of the losses")
    e.add_argument(
        "--interferer",
        metavar="wifi:CHANNEL[:DUTY[:MODEL]]",
        help="a Wi-Fi transmitter on that 2.4 GHz channel (1-13), busy DUTY of the time "
        "(default 0.3), destroying the frames it overlaps; MODEL slots (busy 1-ms slots, the "
        "default) or traffic (bursts of frames and gaps, its load changing)",
    )
    e.add_argument(
        "--path-loss",
        type=float,
        metavar="DB",
        help="dB between the radios' antennas (e.g. 60 in a room, 80+ through walls): "
        "frames arrive at the sender's power (radio.pa_level) minus this and are lost as the "
        "receiver's sensitivity at the data rate says (default: close, no such errors)",
    )


def loss_from_args(ns: argparse.Namespace) -> AirLoss:
    return AirLoss(
        per=ns.per,
        ack_per=ns.ack_per,
        burst=ns.burst,
        seed=ns.seed,
        interferer=getattr(ns, "interferer", None),
        path_loss=getattr(ns, "path_loss", None),
    )


class _Process:
    """One loss process (data or ACK) of one link."""

    def __init__(self, per: float, burst: float, rng: random.Random) -> None:
        self.rng = rng
        self.per = per
        self.bursty = burst > 1.0 and 0.0 < per < 1.0
        # Gilbert–Elliott with e_good = 0, e_bad = 1: P(bad) = p_gb / (p_gb + p_bg) = per.
        self.p_bg = 1.0 / burst
        self.p_gb = per * self.p_bg / (1.0 - per) if per < 1.0 else 1.0
        self.bad = False

    def lost(self) -> bool:
        if not self.bursty:
            return self.per > 0.0 and self.rng.random() < self.per
        if self.bad:
            self.bad = self.rng.random() >= self.p_bg
        else:
            self.bad = self.rng.random() < self.p_gb
        return self.bad


@dataclass
class LossModel:
    """Loss for every link: a default spec, with per-link overrides by (tx name, rx name)."""

    default: LossSpec = field(default_factory=LossSpec)
    seed: int = 1
    links: dict[tuple[str, str], LossSpec] = field(default_factory=dict)
    _procs: dict[tuple[str, str, str], _Process] = field(default_factory=dict, repr=False)
    _paths: dict[tuple[str, str, str], random.Random] = field(default_factory=dict, repr=False)

    def set_default(self, spec: LossSpec) -> None:
        self.default = spec
        self._procs.clear()
        self._paths.clear()

    def set_link(self, tx: str, rx: str, spec: LossSpec) -> None:
        self.links[(tx, rx)] = spec
        for kind in ("data", "ack"):
            self._procs.pop((tx, rx, kind), None)
            self._paths.pop((tx, rx, kind), None)

    def spec(self, tx: str, rx: str) -> LossSpec:
        return self.links.get((tx, rx), self.default)

    def _proc(self, tx: str, rx: str, kind: str) -> _Process:
        key = (tx, rx, kind)
        proc = self._procs.get(key)
        if proc is None:
            spec = self.spec(tx, rx)
            per = spec.data_per if kind == "data" else spec.ack_per
            rng = random.Random(zlib.crc32(f"{self.seed}/{tx}/{rx}/{kind}".encode()))
            proc = self._procs[key] = _Process(per, spec.burst, rng)
        return proc

    def _weak(self, tx: str, rx: str, kind: str, bits: int, rate: str, pa_level: int) -> bool:
        """Did the path's noise destroy this frame? Drawn (from the link's own generator)
        only where the path can."""
        path_loss = self.spec(tx, rx).path_loss
        if path_loss is None:
            return False
        fer = frame_error(margin_db(path_loss, pa_level, rate), bits)
        if fer <= 0.0:
            return False
        key = (tx, rx, kind)
        rng = self._paths.get(key)
        if rng is None:
            label = f"{self.seed}/{tx}/{rx}/{kind}/path"
            rng = self._paths[key] = random.Random(zlib.crc32(label.encode()))
        return rng.random() < fer

    def data_lost(
        self, tx: str, rx: str, bits: int = 0, rate: str = "2M", pa_level: int = 3
    ) -> bool:
        """Is the data frame of ``bits`` bits the sender sends at ``rate`` with ``pa_level``
        lost (its own process first, then the path: both drawn)?"""
        lost = self._proc(tx, rx, "data").lost()
        weak = self._weak(tx, rx, "data", bits, rate, pa_level)
        return lost or weak

    def ack_lost(
        self, tx: str, rx: str, bits: int = 0, rate: str = "2M", pa_level: int = 3
    ) -> bool:
        """The same for its ACK: it travels rx -> tx (at the receiver's ``pa_level``), but
        it belongs to the tx -> rx link's exchange."""
        lost = self._proc(tx, rx, "ack").lost()
        weak = self._weak(tx, rx, "ack", bits, rate, pa_level)
        return lost or weak
