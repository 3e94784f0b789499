"""The two roles' networking: the base station forwards and NATs, the mobile unit routes.

Each function returns the undo steps, which the daemon runs at shutdown, so a stopped node
leaves no rule behind.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import subprocess
from collections.abc import Callable
from typing import Any

from longge.config import NodeConfig
from longge.tun import TunError, ip

Undo = Callable[[], None]


def _iptables(*args: str, check: bool = True) -> bool:
    try:
        proc = subprocess.run(["iptables", *args], capture_output=True, text=True, timeout=10)
    except FileNotFoundError as exc:
        raise TunError("iptables is not installed (apt-get install iptables)") from exc
    if check and proc.returncode != 0:
        raise TunError(f"iptables {' '.join(args)}: {proc.stderr.strip()}")
    return proc.returncode == 0


def _nat_rule(cfg: NodeConfig) -> list[str]:
    net = str(ipaddress.ip_interface(cfg.address).network)
    out = ["-o", cfg.uplink] if cfg.uplink else ["!", "-o", cfg.tun]
    return ["POSTROUTING", "-s", net, *out, "-j", "MASQUERADE"]


IP_FORWARD = "/proc/sys/net/ipv4/ip_forward"


def setup_base(cfg: NodeConfig) -> list[Undo]:
    """IP forwarding, and NAT from the radio network to the uplink (if ``base.nat``)."""
    undo: list[Undo] = []
    with open(IP_FORWARD) as f:
        was = f.read().strip()
    with open(IP_FORWARD, "w") as f:
        f.write("1\n")
    if was != "1":  # the base was no router before: it is none after the daemon either

        def restore_forward() -> None:
            with open(IP_FORWARD, "w") as f:
                f.write(was + "\n")

        undo.append(restore_forward)
    try:
        if cfg.nat:
            rule = _nat_rule(cfg)
            if not _iptables("-t", "nat", "-C", *rule, check=False):
                _iptables("-t", "nat", "-A", *rule)

                def remove_nat() -> None:
                    _iptables("-t", "nat", "-D", *rule, check=False)

                undo.append(remove_nat)
    except BaseException:  # (iptables missing or refusing: forwarding back as it was)
        _undoing(undo)
        raise
    return undo


def _hop(h: dict[str, Any]) -> list[str]:
    """``ip route`` words of one next hop as ``ip -j route`` shows it."""
    args: list[str] = []
    via = h.get("gateway")
    if isinstance(via, str):
        args += ["via", via]
    elif isinstance(h.get("via"), dict):  # a gateway of the other family
        args += ["via", str(h["via"].get("family", "inet")), str(h["via"].get("host"))]
    if isinstance(h.get("dev"), str):
        args += ["dev", h["dev"]]
    if isinstance(h.get("weight"), int):
        args += ["weight", str(h["weight"])]
    if "onlink" in (h.get("flags") or []):
        args.append("onlink")
    return args


#: Route metrics ``ip -j route`` shows in milliseconds, which ``ip route`` reads so only with
#: the unit; and the metrics shown under another name than ``ip route`` takes.
_METRIC_MS = ("rtt", "rttvar", "rto_min")
_METRIC_WORD = {"congestion": "congctl"}
#: Route types put back (the link's replace takes their place too: an ``unreachable
#: default`` kill switch, say); others, and routes with what is not rebuilt, are left alone.
_ROUTE_TYPES = ("unicast", "unreachable", "blackhole", "prohibit")
_NOT_REBUILT = ("tos", "encap", "flow_from", "flow_to", "table")


def _route_args(dst: str, r: dict[str, Any]) -> list[str]:
    """``ip route`` arguments that make route ``r`` (``ip -j -d route`` output) again."""
    kind = r.get("type", "unicast")
    args = [dst] if kind == "unicast" else [kind, dst]
    for key, word in (("protocol", "proto"), ("scope", "scope"), ("prefsrc", "src")):
        if isinstance(r.get(key), str):
            args += [word, r[key]]
    for metric in r.get("metrics") or []:  # [{"mtu": 1400}, {"rtt": 100}, {"ecn": null}]
        for k, v in metric.items() if isinstance(metric, dict) else ():
            if k == "ecn":
                args += ["features", "ecn"]
            elif isinstance(v, int):
                args += [k, f"{v}ms" if k in _METRIC_MS else str(v)]
            elif isinstance(v, str) and k in _METRIC_WORD:
                args += [_METRIC_WORD[k], v]
    # the next hops last (ip route reads everything after "nexthop" as the hop's)
    if isinstance(r.get("nhid"), int):
        args += ["nhid", str(r["nhid"])]
    elif isinstance(r.get("nexthops"), list):
        for h in r["nexthops"]:
            args += ["nexthop", *_hop(h if isinstance(h, dict) else {})]
    else:
        args += _hop(r)
    return args


def _routes(dst: str) -> list[dict[str, Any]]:
    """The main table's routes to exactly ``dst`` of metric 0 (``ip -j -d route``)."""
    shown = ip("-j", "-d", "route", "show", "exact", dst, check=False)
    try:
        routes = json.loads(shown.stdout or "[]")
    except ValueError:
        return []
    if not isinstance(routes, list):
        return []
    return [r for r in routes if isinstance(r, dict) and r.get("metric", 0) == 0]


def _via(r: dict[str, Any], tun: str) -> bool:
    """Does route ``r`` go through ``tun`` (one of its next hops)?"""
    nexthops = r.get("nexthops")
    hops: list[Any] = nexthops if isinstance(nexthops, list) else [r]
    return tun in [h.get("dev") for h in hops if isinstance(h, dict)]


def _routes_replaced(dst: str, tun: str) -> list[list[str]]:
    """The routes to exactly ``dst`` that ``ip route replace DST ... dev TUN`` takes the place
    of (metric 0, not the link's own), as ``ip route`` arguments that put them back: a mobile's
    default route of metric 0 (a static one, or some DHCP clients') was gone for good once the
    daemon stopped."""
    return [
        _route_args(dst, r)
        for r in _routes(dst)
        if r.get("type", "unicast") in _ROUTE_TYPES
        and not any(k in r for k in _NOT_REBUILT)
        and not _via(r, tun)
    ]


def setup_mobile(cfg: NodeConfig) -> list[Undo]:
    """Routes through the radio link: the listed networks, and the default route if asked.
    They vanish with the interface; a route of the same prefix and metric they replaced comes
    back at shutdown, unless something else has taken the link's place meanwhile (a newer
    route stays)."""
    undo: list[Undo] = []
    dests = [*cfg.routes, *(["default"] if cfg.default_route else [])]
    try:
        for dst in dests:
            replaced = _routes_replaced(dst, cfg.tun)
            if replaced:

                def put_back(dst: str = dst, replaced: list[list[str]] = replaced) -> None:
                    if all(_via(r, cfg.tun) for r in _routes(dst)):
                        for i, args in enumerate(replaced):  # (others: appended to the first)
                            ip("route", "append" if i else "replace", *args, check=False)

                undo.append(put_back)
            ip("route", "replace", dst, "via", cfg.peer, "dev", cfg.tun)
    except BaseException:
        _undoing(undo)
        raise
    return undo


def setup_role(cfg: NodeConfig) -> list[Undo]:
    return setup_base(cfg) if cfg.role == "base" else setup_mobile(cfg)


def _undoing(undo: list[Undo]) -> None:
    """What a set-up that failed half-way had done, undone (its error goes on)."""
    for u in reversed(undo):
        with contextlib.suppress(Exception):
            u()
