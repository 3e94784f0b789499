"""The channel's error model: which frames the air destroys.

Each directed link (transmitter name -> receiver name) gets its own random generator seeded
from the air's seed and the link's names, so the k-th frame on a link meets the same fate in
every run with the same seed, whatever other links do. Data frames and ACKs have their own
rates. Losses are either independent (Bernoulli) or bursty (Gilbert–Elliott with a lossless
good state and a lossy bad state, parametrised by the long-run error rate and the mean burst
length).
"""

from __future__ import annotations

import argparse
import random
import zlib
from dataclasses import dataclass, field

from longge.air.interferer import parse_interferer
from longge.errors import ConfigError


def _check_rate(key: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfigError(key, value, "a probability in 0..1")


@dataclass(frozen=True)
class LossSpec:
    """Error rates of one link. ``burst`` is the mean length of a loss burst (1 = independent)."""

    data_per: float = 0.0
    ack_per: float = 0.0
    burst: float = 1.0

    def __post_init__(self) -> None:
        _check_rate("per", self.data_per)
        _check_rate("ack_per", self.ack_per)
        if self.burst < 1.0:
            raise ConfigError("burst", self.burst, "a mean burst length >= 1 frame")
        if self.burst > 1.0 and max(self.data_per, self.ack_per) >= 1.0:
            raise ConfigError("burst", self.burst, "bursts need an error rate below 1")


@dataclass(frozen=True)
class AirLoss:
    """The emulated air's losses as the user gives them (``--per``, ``--ack-per``, ``--burst``,
    ``--seed``, ``--interferer``): the emulator's own settings, apart from the link's
    (radio.options)."""

    per: float = 0.0
    ack_per: float | None = None  # None: same as per
    burst: float = 1.0
    seed: int = 1
    #: a Wi-Fi interferer that destroys the frames it overlaps: "wifi:CHANNEL[:DUTY]"
    interferer: str | None = None

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

    def wifi(self) -> tuple[int, float] | None:
        """The interferer's (Wi-Fi channel, busy share), or None."""
        return None if self.interferer is None else parse_interferer(self.interferer)

    def spec(self) -> LossSpec:
        return LossSpec(
            data_per=self.per,
            ack_per=self.per if self.ack_per is None else self.ack_per,
            burst=self.burst,
        )

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "per": self.per,
            "ack_per": self.ack_per,
            "burst": self.burst,
            "seed": self.seed,
        }
        if self.interferer is not None:  # (absent without one: testbeds recorded before match)
            out["interferer"] = self.interferer
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
        metavar="wifi:CHANNEL[:DUTY]",
        help="a Wi-Fi transmitter on that 2.4 GHz channel (1-13), busy DUTY of the time "
        "(default 0.3), destroying the frames it overlaps",
    )


def loss_from_args(ns: argparse.Namespace) -> AirLoss:
    return AirLoss(
        per=ns.per,
        ack_per=ns.ack_per,
        burst=ns.burst,
        seed=ns.seed,
        interferer=getattr(ns, "interferer", None),
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

    def set_default(self, spec: LossSpec) -> None:
        self.default = spec
        self._procs.clear()

    def set_link(self, tx: str, rx: str, spec: LossSpec) -> None:
        self.links[(tx, rx)] = spec
        for kind in ("data", "ack"):
            self._procs.pop((tx, rx, kind), None)

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

    def data_lost(self, tx: str, rx: str) -> bool:
        return self._proc(tx, rx, "data").lost()

    def ack_lost(self, tx: str, rx: str) -> bool:
        # The ACK travels rx -> tx, but it belongs to the tx -> rx link's exchange.
        return self._proc(tx, rx, "ack").lost()
