"""What a testbed is made of (``TestbedSpec``: the link's settings, the air's losses, the
daemons' queue, security, backend, the number of mobiles) and where its parts live: the state
folder, each node's control socket and key, each mobile's name, address and radio addresses.
``testbed.py`` builds and removes it."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from longge import configfile
from longge.air.loss import NO_LOSS, AirLoss
from longge.config import MAX_MOBILES, NodeConfig, PeerConfig
from longge.errors import ConfigError
from longge.protocol.secure import KEY_LEN
from longge.radio.options import RadioOptions, downlink_channel

#: The radios' IRQ pins on the rf24 testbed (tx, rx): README's wiring table.
IRQ_PINS = (24, 23)
STATE_DIR = Path(os.environ.get("LONGGE_TESTBED_DIR", "/run/longge/testbed"))
NAMESPACES = ("lg-base", "lg-mobile", "lg-inet")
#: A base's mobiles on the testbed at most: as on a real base (one RX pipe each).
MAX_TESTBED_MOBILES = MAX_MOBILES
BASE_IP, MOBILE_IP, INET_IP, UPLINK_IP = "10.24.0.1", "10.24.0.2", "10.99.0.1", "10.99.0.2"


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
    #: the mobiles' radios are native USB modems (two each, on ptys); with several mobiles
    #: the base's too (a base on modems serving them: firmware 1.2's pipes 2..5). One
    #: mobile's base stays on the sim backend, as the fault matrix has measured it, unless
    #: ``serial_base`` (experiment multinode's one link, against which its cells are judged).
    serial: bool = False
    serial_base: bool = False
    rf24: bool = False  # both nodes run the rf24 backend: the real pyrf24 on emulated chips
    irq: bool = True  # rf24: the radio processes sleep on the radios' IRQ pins (else: polled)
    mobiles: int = 1  # mobiles on the base (1: lg-mobile; more: lg-mobile1 ...)

    def __post_init__(self) -> None:
        n = self.mobiles
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TESTBED_MOBILES:
            raise ConfigError("--mobiles", n, f"1..{MAX_TESTBED_MOBILES}")
        # a wrong queue, queue_ms or mtu: refused here, by name (a stand-in key for the check)
        self.node_config("mobile", bytes(KEY_LEN))

    @property
    def mobile_names(self) -> list[str]:
        return mobile_names(self.mobiles)

    def backend(self, role: str) -> str:
        on_modems = self.serial and (role == "mobile" or self.mobiles > 1 or self.serial_base)
        return "serial" if on_modems else "rf24" if self.rf24 else "sim"

    def modems(self) -> list[Modem]:
        """The USB modems the testbed plugs in: each node on the serial backend has two."""
        nodes = [*self.mobile_names, "base"]
        return [
            Modem(node, which)
            for node in nodes
            if self.backend("base" if node == "base" else "mobile") == "serial"
            for which in ("tx", "rx")
        ]

    def node_config(
        self, role: str, key: bytes | None, keys: list[bytes | None] | None = None, index: int = 0
    ) -> NodeConfig:
        """One node's config (a real node's has the same shape): the base, or mobile
        ``index`` with ``key``; the base takes each mobile's key from ``keys`` (default: all
        ``key``)."""
        mobile = role == "mobile"
        up_ch = self.options.channel
        down_ch = downlink_channel(up_ch)
        names = self.mobile_names
        keys = keys or [key] * len(names)
        if mobile:
            peers: tuple[PeerConfig, ...] = (
                PeerConfig(
                    name="base",
                    address=BASE_IP,
                    tx_address=base_listens(index),
                    rx_address=mobile_listens(index),
                    key=key if self.secured else None,
                ),
            )
        else:
            peers = tuple(
                PeerConfig(
                    name=name,
                    address=mobile_ip(i),
                    tx_address=mobile_listens(i),
                    rx_address=base_listens(i),
                    key=keys[i] if self.secured else None,
                )
                for i, name in enumerate(names)
            )
        radio = replace(self.options, channel=RadioOptions.channel)
        if mobile and index:  # (mobiles that collided on the uplink try again apart)
            radio = replace(radio, ard_us=min(4000, radio.ard_us + 250 * index))
        node: dict[str, Any] = {
            "role": role,
            "tun": "longge0",
            "address": f"{mobile_ip(index) if mobile else BASE_IP}/24",
            "peers": peers,
            "control": str(node_socket(names[index] if mobile else "base")),
            "queue": self.queue,
            "backend": self.backend(role),
            "air": str(paths()["air"]),
            # the nodes' channels are tx_channel/rx_channel; RadioOptions.channel is the one
            # link of radio-bench, not a node setting
            "radio": radio,
            "tx_channel": up_ch if mobile else down_ch,
            "rx_channel": down_ch if mobile else up_ch,
            "default_route": mobile,
            "nat": not mobile,
            "uplink": "" if mobile else "up0",
            "insecure": not self.secured,
            "state_dir": str(STATE_DIR / "security"),
            "driver": "pyrf24",
        }
        if mobile and len(names) > 1:  # (the air tells the mobiles' radios apart)
            node["air_name"] = names[index]
        if self.rf24 and self.irq:  # README's wiring table
            node["tx_irq_pin"], node["rx_irq_pin"] = IRQ_PINS
        if self.backend(role) == "serial":
            name = names[index] if mobile else "base"
            node["tx_port"] = str(Modem(name, "tx").pty)
            node["rx_port"] = str(Modem(name, "rx").pty)
        for name in ("queue_ms", "mtu"):
            if getattr(self, name) is not None:
                node[name] = getattr(self, name)
        return NodeConfig(**node)

    def node_toml(
        self, role: str, key: bytes | None, keys: list[bytes | None] | None = None, index: int = 0
    ) -> str:
        """The node's config file, as the daemon reads it."""
        files = [str(key_path(name, self.mobiles)) for name in self.mobile_names]
        return configfile.dumps(
            self.node_config(role, key, keys, index),
            key_file=(files[index] if role == "mobile" else files) if self.secured else None,
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
            "serial_base": self.backend("base") == "serial",
            "backend": "rf24" if self.rf24 else "sim",
            "irq": self.rf24 and self.irq,
            "mobiles": self.mobiles,
        }


@dataclass(frozen=True)
class Modem:
    """One USB modem of a testbed node: ``which`` radio (tx or rx) of ``node``."""

    node: str
    which: str

    @property
    def process(self) -> str:
        """Its process's name in the testbed's state (a single mobile's: modem-tx, modem-rx,
        the names the fault matrix unplugs)."""
        return f"modem-{self.which}" if self.node == "mobile" else f"modem-{self.node}-{self.which}"

    @property
    def pty(self) -> Path:
        """Where its serial port appears (the node's config names it)."""
        return STATE_DIR / f"{self.node}-{self.which}.pty"

    @property
    def air_name(self) -> str:
        return f"{self.node}-{self.which}"


def mobile_names(n: int) -> list[str]:
    """The mobiles' node names: ``mobile`` alone, ``mobile1`` … ``mobileN`` for several."""
    return ["mobile"] if n == 1 else [f"mobile{i + 1}" for i in range(n)]


def mobile_ip(index: int) -> str:
    return f"10.24.0.{2 + index}"


def base_listens(index: int) -> bytes:
    """Mobile ``index``'s uplink address, the base's pipe index + 1: the chip's pipes 2..5
    differ from pipe 1 in their first byte only."""
    return bytes((ord("L") + index,)) + b"Gm2b"


def mobile_listens(index: int) -> bytes:
    return b"LGb" + bytes((ord("2") + index,)) + b"m"


def node_socket(name: str) -> Path:
    """A node's control socket on the testbed (``base``, ``mobile``, ``mobile2`` …)."""
    return STATE_DIR / f"{name}.sock"


def key_path(name: str, mobiles: int) -> Path:
    """The link key of mobile ``name`` (one testbed key for one mobile: ``key``)."""
    return STATE_DIR / ("key" if mobiles == 1 else f"key-{name}")


def namespaces(mobiles: int) -> tuple[str, ...]:
    return ("lg-base", *(f"lg-{n}" for n in mobile_names(mobiles)), "lg-inet")


def recorded_mobiles() -> list[str]:
    """The running testbed's mobiles' names (["mobile"] when none is up)."""
    with contextlib.suppress(OSError, ValueError):
        state = json.loads(paths()["state"].read_text())
        return mobile_names(int(state.get("mobiles", 1)))
    return ["mobile"]
