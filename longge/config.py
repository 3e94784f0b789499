"""Node configuration: a TOML file, overridden by command-line options, checked in one place.

Every wrong value raises ``ConfigError`` naming the key (``radio.arc``, ``node.address``, …)
and what is allowed; unknown keys are refused too, so a typo does not pass silently.
See ``basestation/longge.toml`` and ``mobile/longge.toml`` for annotated examples.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, replace
from typing import Any

from longge.chip import AIR_SOCKET
from longge.chip.datasheet import CHANNEL_MAX, CHANNEL_MIN, ISM_MAX_CHANNEL
from longge.errors import ConfigError
from longge.protocol.fragmenter import MIN_PAYLOAD, check_mtu
from longge.protocol.frame import HEADER_LEN, NUMBER_LEN
from longge.protocol.peer import MAX_PEERS
from longge.protocol.secure import FIRST_HEAD, KEY_LEN
from longge.radio.options import UPLINK_CHANNEL, RadioOptions, downlink_channel
from longge.tun import check_ifname, link_local

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface

#: Where a node's config is installed (README: doctor, scan and the units read it).
DEFAULT_PATH = "/etc/longge/longge.toml"
ROLES = ("base", "mobile")
CSN_PINS = (0, 1, 10, 11, 12)
#: BCM GPIOs of SPI0 (CE1, CE0, MISO, MOSI, SCLK): never an IRQ pin.
SPI_GPIOS = (7, 8, 9, 10, 11)
BACKENDS = ("sim", "rf24", "serial")
#: The default pair's addresses: the uplink's (the mobile sends, the base listens) and the
#: downlink's.
UPLINK_ADDRESS, DOWNLINK_ADDRESS = b"LGm2b", b"LGb2m"
PA_LEVELS = {"min": 0, "low": 1, "high": 2, "max": 3}


@dataclass(frozen=True)
class PeerConfig:
    """One link partner (a ``[[peer]]`` table): its link address (its identity: the direction
    keys derive from it, docs/design.md §5), a name for people, the source networks its
    packets may carry (and the destinations this node sends it: () = by role, a base takes
    its mobile's address and IPv6 link-local ones, a mobile everything, the internet's), the
    radio addresses (``tx_address``: ours to it, the one its RX radio listens on;
    ``rx_address``: its to us; b"": the role's side of the default pair), its link key and a
    previous one still accepted while rotating. NodeConfig resolves the defaults and checks
    every value by the name a file gives it (``peer.address`` ...)."""

    name: str = "peer"
    address: str = "10.24.0.1"
    allowed_ips: tuple[str, ...] = ()
    tx_address: bytes = b""
    rx_address: bytes = b""
    key: bytes | None = field(default=None, repr=False)
    previous_key: bytes | None = field(default=None, repr=False)

    @property
    def secured(self) -> bool:
        return self.key is not None

    def resolved(self, role: str, iface: IPInterface, width: int, insecure: bool) -> PeerConfig:
        """This peer with the role's defaults filled in, or ConfigError naming ``peer.*``."""
        try:
            if not isinstance(self.address, str):  # ipaddress takes an int (or true) as one
                raise ValueError
            peer = ipaddress.ip_address(self.address)
        except ValueError as exc:
            raise ConfigError("peer.address", self.address, "an IP address") from exc
        if peer not in iface.network or peer == iface.ip:
            raise ConfigError("peer.address", self.address, f"another address in {iface.network}")
        if not isinstance(self.name, str) or not _PEER_NAME.fullmatch(self.name):
            raise ConfigError("peer.name", self.name, "1..32 letters, digits, - or _")
        allowed = self.allowed_ips
        if allowed == ():  # (unset: by role)
            own_sources = (f"{peer}/{peer.max_prefixlen}", f"{link_local(peer)}/128")
            allowed = own_sources if role == "base" else _ANY_SOURCE
        if not isinstance(allowed, tuple):
            raise ConfigError("peer.allowed_ips", allowed, 'a list like ["10.24.0.2/32"]')
        networks = []
        for net in allowed:
            try:
                if not isinstance(net, str):
                    raise ValueError
                networks.append(ipaddress.ip_network(net))
            except ValueError as exc:
                raise ConfigError(
                    "peer.allowed_ips", net, "networks like 10.24.0.2/32 (host bits zero)"
                ) from exc
        if not any(peer in n for n in networks):
            raise ConfigError("peer.allowed_ips", list(allowed), f"networks that hold {peer}")
        to_base, to_mobile = UPLINK_ADDRESS, DOWNLINK_ADDRESS
        mine = (to_base, to_mobile) if role == "mobile" else (to_mobile, to_base)
        tx_address, rx_address = (
            given or default
            for given, default in zip((self.tx_address, self.rx_address), mine, strict=True)
        )
        for key, addr in (("peer.tx_address", tx_address), ("peer.rx_address", rx_address)):
            if not isinstance(addr, bytes) or len(addr) != width:
                raise ConfigError(key, addr, f"{width} bytes (radio.address_width)")
        if tx_address == rx_address:
            raise ConfigError("peer.rx_address", rx_address, "different from tx_address")
        if self.key is None and not insecure:
            raise ConfigError(
                "peer.key",
                None,
                'a link key: key_file = "/etc/longge/key" (make one with ./run.sh keygen, '
                "the same on both nodes), or [security] insecure = true to run an open link "
                "that anyone with a radio can inject into",
            )
        if self.key is not None and insecure:
            raise ConfigError("security.insecure", True, "false when a key is given")
        for name, k in (("peer.key", self.key), ("peer.previous_key", self.previous_key)):
            if k is not None and (not isinstance(k, bytes) or len(k) != KEY_LEN):
                raise ConfigError(name, "<hidden>", f"{KEY_LEN} bytes")
        if self.previous_key is not None and self.key is None:
            raise ConfigError("peer.previous_key", "<key>", "only together with a key")
        return replace(self, allowed_ips=allowed, tx_address=tx_address, rx_address=rx_address)


@dataclass(frozen=True)
class NodeConfig:
    role: str = "mobile"
    tun: str = "longge0"
    address: str = "10.24.0.2/24"
    mtu: int = 1500
    txqueuelen: int = 32
    queue_ms: int = 100
    queue: str = "fair"  # "fair" (flow queueing) or "fifo" (one queue, for comparison)
    control: str = "/run/longge/longge0.sock"
    keepalive_s: float = 1.0
    backend: str = "sim"
    air: str = AIR_SOCKET
    #: the radios' names on the emulated air (NAME-tx, NAME-rx; "": the role), where the air's
    #: per-link losses (./run.sh air set --node NAME) find them
    air_name: str = ""
    radio: RadioOptions = field(default_factory=RadioOptions)
    pa_level: str = "low"
    # the mobile's tx = the base's rx = the uplink; in the ISM band (0..83), >= 2 apart.
    # Unset (-1 and b""): the role's side of the default pair, so two default configs talk.
    tx_channel: int = -1
    rx_channel: int = -1
    #: the channels the link may use (its home pair, tx/rx_channel above, among them, when it
    #: moves off a busy one by itself: radio.agile, docs/design.md §6)
    channels: tuple[int, ...] = tuple(range(ISM_MAX_CHANNEL + 1))
    default_route: bool = False
    routes: tuple[str, ...] = ()
    nat: bool = True
    uplink: str = ""
    # The link partners ([[peer]] in a file; one until a base serves several mobiles).
    peers: tuple[PeerConfig, ...] = (PeerConfig(),)
    # [security]: an explicit opt-out of keys (every peer then has none), and where the nonce
    # epochs and replay marks survive restarts.
    insecure: bool = False
    state_dir: str = "/var/lib/longge"
    # [rf24]: two radios on a Raspberry Pi's SPI bus (BCM GPIO numbers for CE; CSN = the
    # spidev chip select: 0 -> /dev/spidev0.0, 1 -> /dev/spidev0.1, 10..12 -> spidev1.x).
    tx_ce_pin: int = 22
    tx_csn_pin: int = 0
    rx_ce_pin: int = 25
    rx_csn_pin: int = 1
    spi_speed: int = 10_000_000
    # The radios' IRQ pins (BCM GPIO): the radio processes sleep until the pin falls instead of
    # polling the chip every 0.2 ms. -1: not wired (polled).
    tx_irq_pin: int = -1
    rx_irq_pin: int = -1
    driver: str = "pyrf24"  # "sim": the rf24 backend's code over emulated chips (tests)
    # [serial]: two USB radio modems (firmware/), one per direction; "auto" = the first and
    # second USB serial device found.
    tx_port: str = "auto"
    rx_port: str = "auto"
    baud: int = 2_000_000

    def _check_channels(self) -> None:
        why = f'channels {CHANNEL_MIN}..{CHANNEL_MAX}: "0-83", "1-13,40-60" or a list [2, 5, 9]'
        ok = isinstance(self.channels, tuple) and all(
            type(c) is int and CHANNEL_MIN <= c <= CHANNEL_MAX for c in self.channels
        )
        if not ok or not self.channels:
            raise ConfigError("radio.channels", channels_text(self.channels), why)
        if self.radio.agile:
            home = [c for c in (self.tx_channel, self.rx_channel) if c not in self.channels]
            if home:
                raise ConfigError(
                    "radio.channels",
                    channels_text(self.channels),
                    f"the link's own channels among them with agile = true (not {home[0]})",
                )
            if len(set(self.channels)) < 4:
                raise ConfigError(
                    "radio.channels",
                    channels_text(self.channels),
                    "4 channels at least with agile = true (two for the link, room to move)",
                )

    def warnings(self) -> list[str]:
        """What is allowed but a user should know before it happens (printed at start)."""
        out = []
        for key, ch in (
            ("radio.tx_channel", self.tx_channel),
            ("radio.rx_channel", self.rx_channel),
        ):
            if ch > ISM_MAX_CHANNEL:
                out.append(
                    f"{key} = {ch} ({2400 + ch} MHz) is outside the 2.4 GHz ISM band "
                    f"(0..{ISM_MAX_CHANNEL}): transmitting there is not allowed in most countries"
                )
        if self.radio.agile and self.insecure:
            out.append(
                "radio.agile = true on a link without security: it stays on its channels (a "
                "move could be anyone's to send; give the link a key to let it move)"
            )
        if self.role == "mobile" and self.default_route:
            out.append(
                "mobile.default_route = true: ALL of this node's traffic (its SSH, updates, "
                "internet) now goes over the radio link (~0.5 Mbit/s at best); keep your own "
                "network reachable with mobile.routes or a route on another interface"
            )
        return out

    def __post_init__(self) -> None:
        _one_of("node.role", self.role, ROLES)
        if self.air_name != "" and (
            not isinstance(self.air_name, str) or not _PEER_NAME.fullmatch(self.air_name)
        ):
            raise ConfigError("sim.air_name", self.air_name, "1..32 letters, digits, - or _")
        up, down = UPLINK_CHANNEL, downlink_channel(UPLINK_CHANNEL)
        mine = (up, down) if self.role == "mobile" else (down, up)
        for key, default in zip(("tx_channel", "rx_channel"), mine, strict=True):
            value = getattr(self, key)
            if type(value) is int and value == -1:  # (not -1.0: refused below, by name)
                object.__setattr__(self, key, default)
        if not isinstance(self.tun, str):
            raise ConfigError("node.tun", self.tun, "an interface name of 1..15 characters")
        check_ifname(self.tun)
        try:
            if not isinstance(self.address, str):  # ipaddress takes an int (or true) as one
                raise ValueError
            iface = ipaddress.ip_interface(self.address)
        except ValueError as exc:
            raise ConfigError("node.address", self.address, "an address/prefix") from exc
        _in_range("node.mtu", self.mtu, 576, 9000)
        check_mtu(self.mtu)
        _in_range("node.txqueuelen", self.txqueuelen, 1, 10_000)
        _in_range("node.queue_ms", self.queue_ms, 1, 10_000)
        _one_of("node.queue", self.queue, ("fair", "fifo"))
        number = isinstance(self.keepalive_s, int | float) and not isinstance(
            self.keepalive_s, bool
        )
        if not number or not 0.1 <= self.keepalive_s <= 60:
            raise ConfigError("node.keepalive_s", self.keepalive_s, "0.1..60 s")
        _one_of("radio.backend", self.backend, BACKENDS)
        _one_of("radio.pa_level", self.pa_level, tuple(PA_LEVELS))
        if self.radio.payload < MIN_PAYLOAD:
            raise ConfigError("radio.payload", self.radio.payload, f"{MIN_PAYLOAD}..32 bytes")
        for key, ch in (
            ("radio.tx_channel", self.tx_channel),
            ("radio.rx_channel", self.rx_channel),
        ):
            _in_range(key, ch, CHANNEL_MIN, CHANNEL_MAX)
        if abs(self.tx_channel - self.rx_channel) < 2:
            raise ConfigError(
                "radio.rx_channel", self.rx_channel, "at least 2 channels from radio.tx_channel"
            )
        self._check_channels()
        for key, flag in (("mobile.default_route", self.default_route), ("base.nat", self.nat)):
            if not isinstance(flag, bool):
                raise ConfigError(key, flag, "true or false")
        if not isinstance(self.uplink, str) or not _IFNAME.fullmatch(self.uplink):
            raise ConfigError(
                "base.uplink", self.uplink, 'an interface name (1..15 characters), or "" for auto'
            )
        for key, path in (
            ("node.control", self.control),
            ("sim.air", self.air),
            ("security.state_dir", self.state_dir),
        ):
            if not isinstance(path, str) or not path.startswith("/"):
                raise ConfigError(key, path, "an absolute path")
        if not isinstance(self.routes, tuple) or not all(isinstance(r, str) for r in self.routes):
            raise ConfigError("mobile.routes", self.routes, 'a list like ["10.99.0.0/24"]')
        for route in self.routes:
            try:
                net = ipaddress.IPv4Network(route)  # (through the peer, an IPv4 address)
            except ValueError as exc:
                raise ConfigError(
                    "mobile.routes", route, "IPv4 networks like 10.99.0.0/24"
                ) from exc
            if "/" in route and route.split("/")[1] != str(net.prefixlen):  # a mask: ip refuses
                raise ConfigError("mobile.routes", route, f"a prefix length: {net}")
        if not isinstance(self.insecure, bool):
            raise ConfigError("security.insecure", self.insecure, "true or false")
        if not isinstance(self.peers, tuple) or not all(
            isinstance(p, PeerConfig) for p in self.peers
        ):
            raise ConfigError("peer", self.peers, "[[peer]] tables")
        most = MAX_MOBILES if self.role == "base" else 1
        if not 1 <= len(self.peers) <= most:
            raise ConfigError(
                "peer",
                f"{len(self.peers)} [[peer]] tables",
                "one: a mobile's base"
                if self.role == "mobile"
                else f"1..{MAX_MOBILES} mobiles (one RX pipe each: pipes 1..5)",
            )
        if len(self.peers) > 1:
            _check_mobiles(self.peers)
        width = self.radio.address_width
        object.__setattr__(
            self,
            "peers",
            tuple(p.resolved(self.role, iface, width, self.insecure) for p in self.peers),
        )
        if len(self.peers) > 1:
            _check_pipes(self.peers)
            _check_keys(self.peers)
        least = HEADER_LEN + NUMBER_LEN + FIRST_HEAD  # a packet's first frame proves itself
        if self.radio.payload < least and not self.insecure:
            raise ConfigError(
                "radio.payload",
                self.radio.payload,
                f"{least}..32 bytes on a secured link (a packet's first frame holds its proof)",
            )
        for name in ("tx_ce_pin", "rx_ce_pin"):
            _in_range(f"rf24.{name}", getattr(self, name), 0, 27)
        for name in ("tx_csn_pin", "rx_csn_pin"):
            value = getattr(self, name)
            if isinstance(value, bool) or value not in CSN_PINS:
                raise ConfigError(f"rf24.{name}", value, "0 or 1 (SPI0 CE0/CE1), 10..12 (SPI1)")
        if self.tx_ce_pin == self.rx_ce_pin:
            raise ConfigError("rf24.rx_ce_pin", self.rx_ce_pin, "a GPIO other than tx_ce_pin")
        if self.tx_csn_pin == self.rx_csn_pin:
            raise ConfigError("rf24.rx_csn_pin", self.rx_csn_pin, "a CSN other than tx_csn_pin")
        _in_range("rf24.spi_speed", self.spi_speed, 500_000, 10_000_000)
        taken = {self.tx_ce_pin: "tx_ce_pin", self.rx_ce_pin: "rx_ce_pin"}
        taken.update({p: "the SPI bus" for p in SPI_GPIOS})
        for name in ("tx_irq_pin", "rx_irq_pin"):
            pin = getattr(self, name)
            if type(pin) is int and pin == -1:
                continue
            _in_range(f"rf24.{name}", pin, 0, 27)
            if pin in taken:
                raise ConfigError(f"rf24.{name}", pin, f"a GPIO not used by {taken[pin]}")
            taken[pin] = name
        _one_of("rf24.driver", self.driver, ("pyrf24", "sim"))
        for name in ("tx_port", "rx_port"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(f"serial.{name}", getattr(self, name), "a device path or auto")
        if self.tx_port == self.rx_port and self.tx_port != "auto":
            raise ConfigError("serial.rx_port", self.rx_port, "a port other than tx_port")
        _in_range("serial.baud", self.baud, 9600, 4_000_000)

    @property
    def secured(self) -> bool:
        return not self.insecure

    @property
    def gateway(self) -> str:
        """A mobile's one peer, its base: where its routes lead."""
        return self.peers[0].address

    @property
    def pa_value(self) -> int:
        return PA_LEVELS[self.pa_level]


CHANNEL_KEYS = ("tx_channel", "rx_channel")


def _live_type(key: str) -> type:
    """The type a live option must have: that of its default (channels are ints)."""
    return int if key in CHANNEL_KEYS else type(getattr(RadioOptions(), key))


def check_live_types(options: dict[str, Any]) -> dict[str, Any]:
    """A control request's live options (the caller has refused unknown keys), refused with a
    ConfigError naming the key unless each value has the right JSON type (a bool is not an int
    here, a string is not a number: the control socket must never turn one into a crash)."""
    for key, value in options.items():
        want = _live_type(key)
        ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise ConfigError(key, value, f"a JSON {want.__name__}")
    return options


def with_live_options(cfg: NodeConfig, options: dict[str, Any]) -> NodeConfig:
    """``cfg`` with radio settings changed while the link runs (RadioOptions fields and the
    two channels). Raises ConfigError for a value out of range, TypeError for an unknown key."""
    radio = {k: v for k, v in options.items() if k not in CHANNEL_KEYS}
    channels = {k: v for k, v in options.items() if k in CHANNEL_KEYS}
    for key, ch in channels.items():
        _in_range(
            key, ch, CHANNEL_MIN, CHANNEL_MAX
        )  # (-1, the file's "the role's default", is no live channel)
    return replace(cfg, radio=replace(cfg.radio, **radio), **channels)


#: A base's mobiles at most: its RX radio gives each one pipe (protocol/peer.py).
MAX_MOBILES = MAX_PEERS


def _check_mobiles(peers: tuple[PeerConfig, ...]) -> None:
    """A base's several mobiles, before their defaults: each names its radio addresses (the
    default pair is one mobile's), and each is another."""
    for key in ("tx_address", "rx_address"):
        if any(getattr(p, key) == b"" for p in peers):
            raise ConfigError(
                f"peer.{key}", "(unset)", "set for each mobile when a base has several"
            )
    for key in ("name", "address", "tx_address", "rx_address"):
        values = [getattr(p, key) for p in peers]
        twice = next((v for v in values if values.count(v) > 1), None)
        if twice is not None:
            shown = twice if isinstance(twice, str) else twice.decode(errors="replace")
            raise ConfigError(f"peer.{key}", shown, "a different one for each mobile")


def _check_keys(peers: tuple[PeerConfig, ...]) -> None:
    """A base's mobiles each with a key of their own: the direction keys derive from the key
    and the two link addresses, which anyone can see, so a mobile that holds another's key can
    read that mobile's packets and send as it. Refused, naming both, with the fix (the key
    material itself is never shown)."""
    seen: dict[bytes, str] = {}
    for p in peers:
        for k in (p.key, p.previous_key):
            if k is None:
                continue
            other = seen.get(k)
            if other is not None and other != p.name:
                raise ConfigError(
                    "peer.key",
                    f"{other} and {p.name}: the same key",
                    "a key of its own for each mobile: a mobile that holds another's key reads "
                    "that mobile's packets and can send as it (the keys each direction uses "
                    "derive from the key and the link addresses, which are no secret). Make one "
                    f"per mobile (./run.sh keygen --out /etc/longge/key-{p.name}), set it as "
                    f"key_file of [[peer]] {p.name} here and of the mobile's own config",
                )
            seen[k] = p.name


def _check_pipes(peers: tuple[PeerConfig, ...]) -> None:
    """Pipes 2..5 of the chip keep only their first byte (the least significant, sent last);
    the rest is pipe 1's (datasheet §7.6): each mobile's ``rx_address`` differs from the
    first's in its first byte only."""
    first = peers[0].rx_address
    for p in peers[1:]:
        if p.rx_address[1:] != first[1:]:
            raise ConfigError(
                "peer.rx_address",
                p.rx_address.decode(errors="replace"),
                f"the first mobile's ({first.decode(errors='replace')}) with another first "
                "byte: the chip's pipes 2..5 differ from pipe 1 in that byte only",
            )


#: A peer's name in a config: for people (status, logs) and for telling peers apart.
_PEER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
#: A mobile's base may hand it packets from anywhere (the internet through its NAT).
_ANY_SOURCE = ("0.0.0.0/0", "::/0")


#: A Linux interface name (IFNAMSIZ - 1 characters, no "/", ":" or white space), or "".
_IFNAME = re.compile(r"[^/:\s]{0,15}")


def _one_of(key: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(key, value, "one of " + ", ".join(allowed))


def _in_range(key: str, value: int, lo: int, hi: int) -> None:
    """A whole number (not a bool: TOML's true is no GPIO or channel) in lo..hi."""
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(key, value, f"{lo}..{hi}")


def parse_channels(key: str, value: object) -> tuple[int, ...]:
    """A file's allowed channels: "0-83", "1-13,40-60", or a list of numbers."""
    why = f'channels {CHANNEL_MIN}..{CHANNEL_MAX}: "0-83", "1-13,40-60" or a list [2, 5, 9]'
    if isinstance(value, list):
        if not all(type(c) is int for c in value):
            raise ConfigError(key, value, why)
        return tuple(sorted(set(value)))
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, value, why)
    out: set[int] = set()
    for part in value.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise ConfigError(key, value, why) from None
        if not CHANNEL_MIN <= first <= last <= CHANNEL_MAX:
            raise ConfigError(key, value, why)
        out.update(range(first, last + 1))
    return tuple(sorted(out))


def channels_text(channels: object) -> str:
    """The allowed channels as a file writes them ("0-83", "1-13,40-60")."""
    if not isinstance(channels, tuple) or not all(type(c) is int for c in channels):
        return repr(channels)
    runs: list[list[int]] = []
    for c in sorted(set(channels)):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)
