"""``./run.sh air set``: change a running air's channel live (losses, path loss, a Wi-Fi
interferer), for every link or for one node's.

The air keeps a default loss spec and specs of single links, by the radios' names (a node's
radios are NAME-tx and NAME-rx: ``sim.air_name``, the testbed's mobile1 … mobileN, else the
role). What is given here is laid over what each link has now, so ``--path-loss 80 --node
mobile2`` keeps that link's frame error rate, and ``--per 0.1`` alone keeps every link's
path loss.
"""

from __future__ import annotations

import argparse
from typing import Any

from longge.air import wire
from longge.air.interferer import parse_interferer
from longge.air.loss import LossSpec, check_path_loss
from longge.errors import ConfigError

#: the loss keys a link's spec has (the air's stats and its loss message spell them so)
_KEYS = ("per", "ack_per", "burst", "path_loss")


def path_loss_arg(text: str) -> float | None:
    """``--path-loss DB`` or ``none`` (the radios close again)."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: dB (e.g. 80), or none") from None
    return value


def add_set_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--per", type=float, help="frame error rate, data+ACK")
    p.add_argument("--ack-per", type=float, help="ACK error rate (=--per when --per is given)")
    p.add_argument("--burst", type=float, help="mean loss burst, frames")
    p.add_argument(
        "--path-loss",
        type=path_loss_arg,
        dest="set_path_loss",  # (absent unless given: "none" is a value)
        default=argparse.SUPPRESS,
        metavar="DB|none",
        help="dB between the antennas (none: close again)",
    )
    p.add_argument(
        "--interferer",
        metavar="wifi:CHANNEL[:DUTY[:MODEL]]|none",
        help="the Wi-Fi interferer (replaces any; none: removes it; with --node: heard, and "
        "destroying frames, at that node's radios only)",
    )
    p.add_argument(
        "--node",
        metavar="NAME",
        help="only the links of this node's radios (NAME-tx, NAME-rx: e.g. mobile2 on a "
        "testbed of several mobiles, mobile or base on one of one)",
    )
    p.add_argument("--socket", help="the air's socket (default: the testbed's, or ./run.sh air's)")


def changes_from_args(ns: argparse.Namespace) -> dict[str, Any]:
    """The loss keys given on the command line."""
    out: dict[str, Any] = {}
    for key in ("per", "ack_per", "burst"):
        if getattr(ns, key, None) is not None:
            out[key] = getattr(ns, key)
    if hasattr(ns, "set_path_loss"):
        out["path_loss"] = ns.set_path_loss
    return out


def _overlay(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    spec = {k: current.get(k) for k in _KEYS}
    spec.update(changes)
    if "per" in changes and "ack_per" not in changes:  # (as --per everywhere: data+ACK)
        spec["ack_per"] = changes["per"]
    # checked here, naming the key, before the air sees it
    LossSpec(
        data_per=float(spec["per"] or 0.0),
        ack_per=float(spec["ack_per"] or 0.0),
        burst=float(spec["burst"] or 1.0),
        path_loss=spec["path_loss"],
    )
    return spec


def _node_links(stats: dict[str, Any], node: str) -> list[tuple[str, str]]:
    """Every (tx, rx) pair of attached radios with one end the node's and the other not."""
    radios = [name for name, r in stats["air"]["radios"].items() if r.get("attached", True)]
    mine = [r for r in radios if r.startswith(f"{node}-")]
    if not mine:
        raise ConfigError(
            "--node",
            node,
            f"a node with radios on this air (radios now: {', '.join(sorted(radios)) or 'none'})",
        )
    others = [r for r in radios if r not in mine]
    return [(a, b) for a in mine for b in others] + [(b, a) for a in mine for b in others]


def apply(
    path: str, changes: dict[str, Any], node: str | None = None, interferer: str | None = None
) -> dict[str, Any]:
    """Lay ``changes`` over the links' specs (every link's, or ``node``'s) and set the
    interferer; returns the air's stats afterwards."""
    if interferer is not None and interferer.lower() != "none":
        wifi = parse_interferer(interferer)  # ConfigError naming --interferer
    check_path_loss(changes.get("path_loss"))
    if changes:
        _overlay({}, changes)  # (a bad value refused by name before the air is asked)
    stats = wire.query(path)
    own = {(link["tx"], link["rx"]): link for link in stats.get("links") or []}
    if changes:
        if node is None:
            wire.query(path, wire.loss_message(_overlay(stats["loss"], changes)))
            targets = list(own)
        else:
            targets = _node_links(stats, node)
        for tx, rx in targets:
            spec = _overlay(own.get((tx, rx), stats["loss"]), changes)
            wire.query(path, wire.loss_message({**spec, "tx": tx, "rx": rx}))
    elif node is not None:
        _node_links(stats, node)  # (a wrong name is still refused; an interferer: near it)
    if interferer is not None:
        wire.query(path, wire.CLEAR_INTERFERERS)
        if interferer.lower() != "none":
            msg = wire.interferer_message(wifi.channel, wifi.duty, wifi.model, near=node)
            wire.query(path, msg)
    return wire.query(path)


def describe(stats: dict[str, Any]) -> str:
    """The channel a running air emulates, in a few lines."""

    def one(spec: dict[str, Any]) -> str:
        text = f"per {spec['per']:g}, ack_per {spec['ack_per']:g}, burst {spec['burst']:g}"
        pl = spec.get("path_loss")
        return text + (f", path loss {pl:g} dB" if pl is not None else ", no path loss")

    lines = [f"every link: {one(stats['loss'])}"]
    lines += [f"{s['tx']} -> {s['rx']}: {one(s)}" for s in stats.get("links") or []]
    for w in stats.get("interferers") or []:
        where = f", near {w['near']} only" if w.get("near") else ""
        lines.append(
            f"Wi-Fi interferer centred on channel {w['centre_channel']} "
            f"({w['width_mhz']} MHz), busy {w['duty']:g} of the time "
            f"({w.get('model', 'slots')}){where}"
        )
    return "\n".join(lines)
