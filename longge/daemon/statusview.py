"""Status objects (from the control socket) as text for people."""

from __future__ import annotations

from typing import Any


def _drops(d: dict[str, Any] | None) -> str:
    if not d:
        return "none"
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items()))


def ack_text(settings: dict[str, Any]) -> str:
    """How a radio's frames are acknowledged (its settings as the daemon reports them), in
    words (status, radio set)."""
    if settings.get("mode") == "stream":
        return "stream (ARQ)"
    ack = settings.get("auto_ack")
    return "?" if ack is None else "auto-ack" if ack else "no-ack"


def _part(st: dict[str, Any], key: str) -> dict[str, Any]:
    """An object of the status, or {} (a daemon of another version may lack it: said as ?)."""
    v = st.get(key)
    return v if isinstance(v, dict) else {}


def _number(v: Any, spec: str) -> str:
    return format(v, spec) if isinstance(v, int | float) and not isinstance(v, bool) else "?"


def node_text(st: dict[str, Any]) -> str:
    if "error" in st:
        return f"  {st['error']}"
    n, r, tx, rx = (_part(st, k) for k in ("node", "radio", "tx", "rx"))
    heard = st.get("peer_last_heard_s")
    heard_s = "never" if heard is None else f"{_number(heard, '.1f')} s ago"
    procs = ", ".join(
        f"{k} {'alive' if v.get('alive') else 'DEAD'} ({v.get('restarts', '?')} restarts)"
        for k, v in _part(st, "processes").items()
        if isinstance(v, dict)
    )
    ack = ack_text(r)
    n = {k: n.get(k, "?") for k in ("role", "tun", "address", "peer")}
    r = {
        **dict.fromkeys(
            ("backend", "rate", "ard_us", "arc", "payload", "tx_channel", "rx_channel"), "?"
        ),
        **r,
    }
    return "\n".join(
        [
            f"  {n['role']} {n['tun']} {n['address']} -> peer {n['peer']}: "
            f"link {str(st.get('link', '?')).upper()} (peer last heard {heard_s}), "
            f"up {_number(st.get('uptime_s'), '.0f')} s",
            f"  radio  {r['backend']} {r['rate']} {ack} ARD {r['ard_us']} µs ARC {r['arc']}, "
            f"payload {r['payload']} B, channels tx {r['tx_channel']} / rx {r['rx_channel']}",
            f"  tx     {tx.get('packets_in', 0)} packets in, {tx.get('packets_sent', 0)} sent in "
            f"{tx.get('frames_sent', 0)} frames; {tx.get('retransmissions') or 0} retransmissions, "
            f"{tx.get('max_rt', 0)} MAX_RT, {tx.get('packets_aborted', 0)} packets aborted, "
            f"{tx.get('preempted', 0)} sent between another's frames; radio {tx.get('state', '?')}",
            f"  queue  {tx.get('queue_packets', 0)} packets / {tx.get('queue_bytes', 0)} of "
            f"{tx.get('queue_limit_bytes', 0)} bytes, oldest {tx.get('queue_oldest_ms', 0)} ms; "
            f"drops: {_drops(tx.get('queue_drops'))}",
            f"  rx     {rx.get('frames_in', 0)} frames in, {rx.get('packets_out', 0)} packets out, "
            f"{rx.get('keepalives', 0)} keepalives; drops: {_drops(rx.get('drops'))}; "
            f"radio {rx.get('state', '?')}",
            _security_line(tx, rx),
            *_uplink_line(tx.get("uplink")),
            *_adapt_line(tx.get("adapt"), rx.get("adapt")),
            *_channels_line(rx.get("channels")),
            f"  procs  {procs}; radios waited on: tx {tx.get('waits_on', '?')}, "
            f"rx {rx.get('waits_on', '?')}",
            *_forwarding_lines(st.get("forwarding")),
            *_peer_lines(st.get("peers")),
        ]
    )


def _channels_line(ch: object) -> list[str]:
    """With ``agile``: the link's channels now, its moves and the last one's why, the band."""
    if not isinstance(ch, dict):
        return []
    band: dict[str, Any] = ch["band"] if isinstance(ch.get("band"), dict) else {}
    recent = ch.get("recent") or []
    last = recent[-1] if recent and isinstance(recent[-1], list) and len(recent[-1]) == 3 else None
    why = f"; last: {last[2]} ({_number(last[1], '.1f')} s ago)" if last else ""
    searching = " SEARCHING for the base" if ch.get("searching") else ""
    busy = band.get("busy") or []
    return [
        f"  moves  uplink {ch.get('uplink')} / downlink {ch.get('downlink')}{searching}, "
        f"move {ch.get('seq')}{why}; band: {band.get('known', 0)} channels known, busy "
        f"{_channel_runs(busy) if busy else 'none'}, {ch.get('dwells', 0)} dwells"
    ]


def _channel_runs(channels: list[Any]) -> str:
    runs: list[list[int]] = []
    for c in sorted(c for c in channels if isinstance(c, int)):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)


def _adapt_line(adapt: object, rx: object = None) -> list[str]:
    """With ``adapt``: the retries the TX radio runs now, why, since when; the rate each
    radio runs at (a link with one peer)."""
    if not isinstance(adapt, dict):
        return []
    q = adapt.get("q")
    failed = "?" if q is None else format(q, ".3f")
    if adapt.get("mode") == "stream":  # (no chip retries: the ARQ's frames are judged)
        lines = [f"  adapt  stream: the ARQ's frames judged; failed attempts {failed}"]
    else:
        lines = [
            f"  adapt  ARD {adapt.get('ard_us')} µs ARC {adapt.get('arc')} for "
            f"{_number(adapt.get('since_s'), '.1f')} s: {adapt.get('why')}; failed attempts "
            f"{failed}, {adapt.get('decisions', 0)} decisions"
        ]
    rate = adapt.get("rate")
    if isinstance(rate, dict):
        lines.append(
            f"  rate   tx {rate.get('rate')} for {_number(rate.get('since_s'), '.1f')} s: "
            f"{rate.get('why')} ({rate.get('switches', 0)} switches, {rate.get('probes', 0)} "
            f"trials, {rate.get('fallbacks', 0)} fallbacks, {rate.get('scans', 0)} scans)"
        )
    power = adapt.get("power")
    if isinstance(power, dict):
        lines.append(
            f"  power  tx {power.get('dbm')} dBm (at most {power.get('ceiling_dbm')}) for "
            f"{_number(power.get('since_s'), '.1f')} s: {power.get('why')} "
            f"({power.get('lowered', 0)} steps down, {power.get('failed_steps', 0)} failed)"
        )
    if isinstance(rx, dict):
        lines.append(
            f"  rate   rx {rx.get('rate')} for {_number(rx.get('since_s'), '.1f')} s: "
            f"{rx.get('why')} ({rx.get('announcements', 0)} announcements heard, "
            f"{rx.get('fallbacks', 0)} fallbacks, {rx.get('scans', 0)} scans)"
        )
    return lines


def _uplink_line(uplink: object) -> list[str]:
    """The shared uplink's line, where there is one (a base with several mobiles, a mobile
    that heard grants)."""
    if not isinstance(uplink, dict) or not uplink:
        return []
    if "granted" in uplink:
        how = "sends in its grants" if uplink.get("granted") else "sends freely (no grant heard)"
        return [f"  uplink {how}; {uplink.get('grants', 0)} grants heard"]
    return [
        f"  uplink granted in turn: {uplink.get('grants', 0)} grants, "
        f"{uplink.get('releases', 0)} released, {uplink.get('silent', 0)} unanswered"
    ]


def _peer_lines(peers: object) -> list[str]:
    """A line per peer where a node has several (a base's mobiles)."""
    if not isinstance(peers, list) or len(peers) < 2:
        return []
    out = []
    for p in peers:
        if not isinstance(p, dict):
            continue
        sent, got = _part(p, "sent"), _part(p, "received")
        heard = p.get("peer_last_heard_s")
        heard_s = "never" if heard is None else f"{_number(heard, '.1f')} s ago"
        out.append(
            f"  peer   {p.get('name', '?')} {p.get('address', '?')}: "
            f"link {str(p.get('link', '?')).upper()} (heard {heard_s}); "
            f"{sent.get('packets_sent', 0)} packets sent, {sent.get('max_rt', 0)} MAX_RT, "
            f"{sent.get('backoffs', 0)} backoffs, queue {sent.get('queue_packets', 0)} packets; "
            f"refused {_drops(_part(got, 'security').get('drops'))}"
        )
    return out


def _forwarding_lines(fwd: object) -> list[str]:
    """A base's forwarding (roles.py), in one line; nothing on a mobile."""
    if not isinstance(fwd, dict):
        return []
    return [f"  fwd    {fwd.get('rule', '?')} (iptables chain {fwd.get('chain', '?')})"]


def _security_line(tx: dict[str, Any], rx: dict[str, Any]) -> str:
    sec = rx.get("security")
    if sec is None and tx.get("sealed") is None:
        return "  secure OFF: open link (insecure = true), frames are not authenticated"
    sec = sec or {}
    line = (
        f"  secure ChaCha20-Poly1305: {tx.get('sealed') or 0} sealed (epoch {tx.get('epoch')}), "
        f"{sec.get('opened', 0)} opened; refused: {_drops(sec.get('drops'))}"
    )
    if tx.get("epoch_skips") or tx.get("floors_sent"):  # (a state_dir restored: secure.py)
        line += (
            f"; epochs skipped (ours stale) {tx.get('epoch_skips', 0)}, "
            f"floors sent (peer stale) {tx.get('floors_sent', 0)}"
        )
    return line
