"""A node's config as a file: the TOML form of ``NodeConfig`` (``config.py``), read and
written here and nowhere else. Sections ``[node]``, ``[radio]``, ``[rf24]``, ``[serial]``,
``[sim]``, ``[mobile]``, ``[base]``, ``[security]`` and one ``[[peer]]`` table (the node at the
other end: docs/details.md); the form before ``[[peer]]`` is still read. Every wrong value
raises ``ConfigError`` naming the key as the file spells it; unknown keys are refused too.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import tomli_w

from longge.config import NodeConfig, PeerConfig, channels_text, parse_channels
from longge.errors import ConfigError
from longge.protocol.secure import parse_key
from longge.radio.options import LINK_KEYS


def parse_address(key: str, value: object) -> bytes:
    """An address is 3..5 ASCII characters ("LGm2b") or hex with 0x ("0xe7e7e7e7e7")."""
    if not isinstance(value, str):
        raise ConfigError(key, value, "a string: 3..5 characters or 0x-prefixed hex")
    if value.startswith("0x"):
        try:
            return bytes.fromhex(value[2:])
        except ValueError as exc:
            raise ConfigError(key, value, "hex digits after 0x") from exc
    return value.encode()


# Where each TOML key lands: section.key -> NodeConfig field (radio options go to `radio`).
_NODE_KEYS = {
    "node": {
        "role",
        "tun",
        "address",
        "mtu",
        "txqueuelen",
        "queue_ms",
        "queue",
        "control",
        "keepalive_s",
    },
    "radio": {"backend", "pa_level", "tx_channel", "rx_channel", "channels"},
    "sim": {"air", "air_name"},
    "mobile": {"default_route", "routes"},
    "base": {"nat", "uplink"},
    "security": {"insecure", "state_dir"},
    "rf24": {
        "tx_ce_pin",
        "tx_csn_pin",
        "rx_ce_pin",
        "rx_csn_pin",
        "tx_irq_pin",
        "rx_irq_pin",
        "spi_speed",
        "driver",
    },
    "serial": {"tx_port", "rx_port", "baud"},
}
#: A [[peer]] table's keys -> PeerConfig fields.
_PEER_KEYS = {
    "name": "name",
    "address": "address",
    "allowed_ips": "allowed_ips",
    "tx_address": "tx_address",
    "rx_address": "rx_address",
    "key": "key",
    "key_file": "key",
    "previous_key": "previous_key",
    "previous_key_file": "previous_key",
}
#: Where a one-peer file before [[peer]] said what [[peer]] says now (still read).
_OLD_PEER_KEYS = {
    "node.peer": "address",
    "radio.tx_address": "tx_address",
    "radio.rx_address": "rx_address",
    "security.key": "key",
    "security.key_file": "key_file",
    "security.previous_key": "previous_key",
    "security.previous_key_file": "previous_key_file",
}
#: ... and the other way: a check's ``peer.*`` as such a file spells it.
_OLD_NAMES = {f"peer.{v}": k for k, v in _OLD_PEER_KEYS.items() if not v.endswith("_file")}
#: (adapt: the node's own choice, not the link's: each daemon may adapt its retries or not)
_RADIO_KEYS = {*LINK_KEYS, "adapt"}
#: Emulator settings a node's daemon never reads: the emulated air's loss is set on the air.
_AIR_ONLY_KEYS = {"per", "ack_per", "burst", "seed"}


_KEY_SOURCES = {
    "key": "key",
    "key_file": "key",
    "previous_key": "previous_key",
    "previous_key_file": "previous_key",
}


def _read_key(name: str, source: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise ConfigError(name, "<hidden>", "a string")
    if source.endswith("_file"):
        try:
            text = Path(value).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not text"
            raise ConfigError(name, value, f"a readable file holding the key ({why})") from exc
        return parse_key(text, name)
    return parse_key(value, name)


#: A file's radios left unset: resolved for the file's role (NodeConfig.__post_init__).
_UNSET_RADIOS: dict[str, Any] = {
    "tx_channel": -1,
    "rx_channel": -1,
}
_UNSET_PEER_RADIOS = {"tx_address": b"", "rx_address": b""}


def _peer_fields(tables: object, old: dict[str, object]) -> list[dict[str, Any]]:
    """The PeerConfig fields of each of a file's [[peer]] tables. ``old``: the keys the file also
    gave in the form before [[peer]] (refused: one place for each)."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError("peer", tables, "[[peer]] tables")
    if not tables:
        raise ConfigError("peer", "[]", "a [[peer]] table for each link partner")
    if old:
        name, value = next(iter(old.items()))
        raise ConfigError(name, value, f"said once, in [[peer]] ({_OLD_PEER_KEYS[name]} = ...)")
    out = []
    for table in tables:
        fields: dict[str, Any] = {}
        for key, value in table.items():
            name = f"peer.{key}"
            if key not in _PEER_KEYS:
                raise ConfigError(name, value, "one of " + ", ".join(_PEER_KEYS))
            fields[_PEER_KEYS[key]] = _file_value(name, key, value)
        out.append(fields)
    return out


def _old_keys(data: dict[str, Any]) -> dict[str, object]:
    """The keys of the form before [[peer]] that a file gives (``section.key``: value)."""
    old = {}
    for name in _OLD_PEER_KEYS:
        section, key = name.split(".")
        table = data.get(section)
        if isinstance(table, dict) and key in table:
            old[name] = table[key]
    return old


def _old_peer_fields(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A file in the form before [[peer]]: its one peer's fields, taken out of its sections
    (the sections without them are returned beside)."""
    old = _old_keys(data)
    fields = {
        _PEER_KEYS[_OLD_PEER_KEYS[name]]: _file_value(name, _OLD_PEER_KEYS[name], value)
        for name, value in old.items()
    }
    rest = {
        s: {k: v for k, v in t.items() if f"{s}.{k}" not in old} if isinstance(t, dict) else t
        for s, t in data.items()
    }
    return fields, rest


#: The keys whose value is a list in a file (a tuple in NodeConfig), with an example.
_LIST_KEYS = {"routes": '["10.99.0.0/24"]', "allowed_ips": '["10.24.0.2/32"]'}


def _file_value(name: str, key: str, value: object) -> Any:
    """A file's value as NodeConfig holds it: radio addresses parsed, lists made tuples, keys
    read (from their files); anything else as it is (NodeConfig checks it)."""
    if key in ("tx_address", "rx_address"):
        return parse_address(name, value)
    if key in _LIST_KEYS:
        if not isinstance(value, list):
            raise ConfigError(name, value, f"a list like {_LIST_KEYS[key]}")
        return tuple(value)
    if key in _KEY_SOURCES:
        return _read_key(name, key, value)
    if key == "channels":
        return parse_channels(name, value)
    return value


def from_mapping(data: dict[str, Any], base: NodeConfig | None = None) -> NodeConfig:
    """Build a config from parsed TOML (sections as above, and [[peer]]) on top of ``base``."""
    node: dict[str, Any] = {}
    radio: dict[str, Any] = {}
    peer_form = "peer" in data
    if peer_form:
        data = dict(data)
        peers = _peer_fields(data.pop("peer"), _old_keys(data))
    else:
        peer, data = _old_peer_fields(data)
        peers = [peer]
    for section, values in data.items():
        if section not in _NODE_KEYS:
            raise ConfigError(section, "...", "sections: peer, " + ", ".join(_NODE_KEYS))
        if not isinstance(values, dict):
            raise ConfigError(section, values, "a [section] table")
        for key, value in values.items():
            name = f"{section}.{key}"
            if section == "radio" and key in _AIR_ONLY_KEYS:
                raise ConfigError(
                    name,
                    value,
                    "not a node setting: the emulated air's loss is set on the air "
                    "(./run.sh air --per, testbed up --per)",
                )
            if section == "radio" and key in _RADIO_KEYS:
                radio[key] = value
            elif key in _NODE_KEYS[section]:
                node[key] = _file_value(name, key, value)
            else:
                raise ConfigError(name, value, "not a known key (typo?)")
    if base is None:
        # A file says how its link is secured; the template below is only a starting point.
        node.setdefault("insecure", False)
        # and what it leaves unset of its radios is its own role's side of the default pair
        node.update({k: v for k, v in _UNSET_RADIOS.items() if k not in node})
        for peer in peers:
            peer.update({k: v for k, v in _UNSET_PEER_RADIOS.items() if k not in peer})
    cfg = base or NodeConfig(insecure=True)
    try:
        opts = replace(cfg.radio, **radio)
    except ConfigError as exc:
        raise ConfigError(f"radio.{exc.key}", exc.value, exc.allowed) from exc
    except TypeError as exc:
        raise ConfigError("radio", radio, str(exc)) from exc
    if base is None:
        node["peers"] = tuple(PeerConfig(**p) for p in peers)
    elif len(peers) > 1 or peers[0]:
        # (overrides: one peer's keys change the base's first peer, the rest stays)
        node["peers"] = (replace(cfg.peers[0], **peers[0]), *cfg.peers[1:])
    try:
        return replace(cfg, radio=opts, **node)
    except TypeError as exc:
        raise ConfigError("node", node, str(exc)) from exc
    except ConfigError as exc:
        if peer_form or exc.key not in _OLD_NAMES:
            raise
        # (the checks name a key as [[peer]] spells it; this file spells it the older way)
        raise ConfigError(_OLD_NAMES[exc.key], exc.value, exc.allowed) from exc


def _address_text(address: bytes) -> str:
    printable = all(0x21 <= b < 0x7F for b in address) and b'"' not in address
    return address.decode() if printable else "0x" + address.hex()


KeyFiles = str | Sequence[str] | None


def _nth(files: KeyFiles, index: int) -> str | None:
    return files if files is None or isinstance(files, str) else files[index]


def to_mapping(
    cfg: NodeConfig, key_file: KeyFiles = None, previous_key_file: KeyFiles = None
) -> dict[str, Any]:
    """The TOML tables that make ``cfg`` again through from_mapping (the inverse of it). Keys
    are never written out: a secured config names its ``key_file`` (and the previous key's):
    one path, or one for each peer."""
    out: dict[str, dict[str, Any]] = {}
    for section, keys in _NODE_KEYS.items():
        table: dict[str, Any] = {}
        for key in sorted(keys):
            value = getattr(cfg, key)
            if key == "routes":
                value = list(value)
            elif key == "channels":
                value = channels_text(value)
            table[key] = value
        out[section] = table
    out["radio"].update({k: getattr(cfg.radio, k) for k in (*LINK_KEYS, "adapt")})
    peers = []
    for index, p in enumerate(cfg.peers):
        peer: dict[str, Any] = {
            "name": p.name,
            "address": p.address,
            "allowed_ips": list(p.allowed_ips),
            "tx_address": _address_text(p.tx_address),
            "rx_address": _address_text(p.rx_address),
        }
        if p.key is not None:
            if (path := _nth(key_file, index)) is None:
                raise ValueError("a secured config is written with the key_file its key is in")
            peer["key_file"] = path
        if p.previous_key is not None:
            if (path := _nth(previous_key_file, index)) is None:
                raise ValueError("the previous key too needs the file it is in")
            peer["previous_key_file"] = path
        peers.append(peer)
    out["peer"] = peers  # type: ignore[assignment]
    return out


def dumps(
    cfg: NodeConfig,
    key_file: KeyFiles = None,
    previous_key_file: KeyFiles = None,
    header: str = "",
) -> str:
    """``cfg`` as a TOML file (every key, so the file says everything the daemon will use)."""
    text = tomli_w.dumps(to_mapping(cfg, key_file, previous_key_file))
    return "".join(f"# {line}\n" for line in header.splitlines()) + text


def load(path: str | Path, overrides: dict[str, Any] | None = None) -> NodeConfig:
    """Read a TOML file; ``overrides`` has the same shape and wins."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise ConfigError("config", str(path), "an existing TOML file") from exc
    except (OSError, UnicodeDecodeError) as exc:  # a directory, no permission, not text
        raise ConfigError("config", str(path), f"a readable TOML file ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", str(path), f"valid TOML ({exc})") from exc
    cfg = from_mapping(data)
    # (after what is wrong in the values)
    _check_secrets(Path(path), data.get("security"), "security")
    for table in data.get("peer") or ():
        _check_secrets(Path(path), table, "peer")
    return from_mapping(overrides, cfg) if overrides else cfg


def _check_secrets(path: Path, security: object, section: str) -> None:
    """A link key is its owner's alone: a key file readable by others, or a key written into a
    config file others can read, is refused by name (doctor only warned; a loaded config took
    it silently)."""
    if not isinstance(security, dict):
        return
    for key in ("key_file", "previous_key_file"):
        name = security.get(key)
        if isinstance(name, str):
            try:
                st = os.stat(name)
            except OSError:
                continue  # (reading it names what is wrong)
            mode = st.st_mode & 0o777
            if mode & 0o077:
                raise ConfigError(
                    f"{section}.{key}",
                    name,
                    f"a file only its owner can read: it is {mode:03o} (chmod 600 {name})",
                )
            if st.st_uid not in (0, os.geteuid()):
                raise ConfigError(
                    f"{section}.{key}",
                    name,
                    f"a file of root's (or of the user the daemon runs as): it is uid "
                    f"{st.st_uid}'s, who could put another key there (chown root {name})",
                )
    for key in ("key", "previous_key"):
        if key in security:
            mode = path.stat().st_mode & 0o777
            if mode & 0o077:
                raise ConfigError(
                    f"{section}.{key}",
                    "<hidden>",
                    f"in a config file only its owner can read: {path} is {mode:03o} "
                    f"(chmod 600 {path}), or in a key_file",
                )
