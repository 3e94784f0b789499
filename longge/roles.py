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


IP_FORWARD = "/proc/sys/net/ipv4/ip_forward"
#: What each base set up here (by TUN name), for its status: "forwarding" below.
FORWARDING: dict[str, dict[str, Any]] = {}


def default_uplink() -> str | None:
    """The interface of the default route (IPv4), if there is one."""
    try:
        out = subprocess.run(
            ["ip", "-j", "route", "show", "default"], capture_output=True, text=True, timeout=10
        ).stdout
        routes = json.loads(out or "[]")
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    for r in routes if isinstance(routes, list) else []:
        dev = r.get("dev") if isinstance(r, dict) else None
        if isinstance(dev, str):
            return dev
    return None


def forward_chain(tun: str) -> str:
    """The base's own FORWARD chain (iptables names: at most 28 characters)."""
    return f"LONGGE-{tun}"[:28]


def input_chain(tun: str) -> str:
    """The base's own INPUT chain: its link address reached only over the link."""
    return f"LONGGE-IN-{tun}"[:28]


def input_rules(tun: str, address: str) -> list[list[str]]:
    """The base's address on the link answers the link (and the base itself) only: a host
    upstream that routes the link's subnet through the base reaches neither the mobiles nor
    the servers on that address (Linux takes a packet for any of its addresses on any
    interface)."""
    own = str(ipaddress.ip_interface(address).ip)
    return [["-i", tun, "-j", "RETURN"], ["-i", "lo", "-j", "RETURN"], ["-d", own, "-j", "DROP"]]


def _chain(chain: str, hook: str, rules: list[list[str]], undo: list[Undo]) -> None:
    """``chain`` made anew with ``rules``, jumped to first from ``hook``; its undo step."""
    _iptables("-N", chain, check=False)  # (left by a daemon killed hard: flushed here)
    _iptables("-F", chain)

    def remove_chain() -> None:
        while _iptables("-D", hook, "-j", chain, check=False):
            pass
        _iptables("-F", chain, check=False)
        _iptables("-X", chain, check=False)

    undo.append(remove_chain)
    for rule in rules:
        _iptables("-A", chain, *rule)
    if not _iptables("-C", hook, "-j", chain, check=False):
        _iptables("-I", hook, "1", "-j", chain)


def forward_rules(tun: str, uplink: str | None, router: bool = True) -> list[list[str]]:
    """The base forwards the link's traffic to the uplink and what comes back on those
    connections; nothing else to or from the link (hosts upstream do not reach the link's
    subnet, link clients reach no other interface: management, VPN, another LAN). Forwarding
    is one switch for every interface (net.ipv4.ip_forward): on a machine that was no
    ``router`` before the daemon, what does not touch the link is dropped too, so that its
    other interfaces forward as they did before (nothing), not because LongGe runs."""
    rules: list[list[str]] = []
    if uplink:
        back = ["-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED"]
        rules += [
            ["-i", tun, "-o", uplink, "-j", "ACCEPT"],
            ["-i", uplink, "-o", tun, *back, "-j", "ACCEPT"],
        ]
    rules += [["-i", tun, "-j", "DROP"], ["-o", tun, "-j", "DROP"]]
    return rules if router else [*rules, ["-j", "DROP"]]


def _nat_rule(cfg: NodeConfig, uplink: str) -> list[str]:
    net = str(ipaddress.ip_interface(cfg.address).network)
    return ["POSTROUTING", "-s", net, "-o", uplink, "-j", "MASQUERADE"]


def setup_base(cfg: NodeConfig) -> list[Undo]:
    """IP forwarding locked to the link: from it to the uplink (``base.uplink``, or the
    default route's interface) and back on the same connections, nothing else (its own FORWARD
    chain, jumped to first); NAT to the uplink only (if ``base.nat``)."""
    undo: list[Undo] = []
    uplink = cfg.uplink or default_uplink()
    chain = forward_chain(cfg.tun)
    with open(IP_FORWARD) as f:
        was = f.read().strip()
    try:
        # the rules first: forwarding is never on without them
        _chain(chain, "FORWARD", forward_rules(cfg.tun, uplink, router=was == "1"), undo)
        _chain(input_chain(cfg.tun), "INPUT", input_rules(cfg.tun, cfg.address), undo)
        with open(IP_FORWARD, "w") as f:
            f.write("1\n")
        if was != "1":  # the base was no router before: it is none after the daemon either

            def restore_forward() -> None:
                with open(IP_FORWARD, "w") as f:
                    f.write(was + "\n")

            undo.append(restore_forward)
        nat = bool(cfg.nat and uplink)
        if nat:
            assert uplink is not None
            rule = _nat_rule(cfg, uplink)
            if not _iptables("-t", "nat", "-C", *rule, check=False):
                _iptables("-t", "nat", "-A", *rule)

                def remove_nat() -> None:
                    _iptables("-t", "nat", "-D", *rule, check=False)

                undo.append(remove_nat)
    except BaseException:  # (iptables missing or refusing: forwarding back as it was)
        _undoing(undo)
        raise
    FORWARDING[cfg.tun] = {
        "uplink": uplink,
        "uplink_from": "base.uplink" if cfg.uplink else "the default route" if uplink else None,
        "nat": nat,
        "chain": chain,
        "rule": (
            f"{cfg.tun} -> {uplink}"
            + (" (NAT)" if nat else "")
            + f" and replies back; everything else to or from {cfg.tun}, and to "
            f"{ipaddress.ip_interface(cfg.address).ip} from elsewhere, dropped"
            + ("" if was == "1" else "; no forwarding between other interfaces (none before)")
            if uplink
            else f"nothing forwarded: no uplink (base.uplink unset, no default route); "
            f"everything to or from {cfg.tun} dropped"
        ),
    }

    def forget() -> None:
        FORWARDING.pop(cfg.tun, None)

    undo.append(forget)
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
            ip("route", "replace", dst, "via", cfg.gateway, "dev", cfg.tun)
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
