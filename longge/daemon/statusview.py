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
    return "auto-ack" if settings["auto_ack"] else "no-ack"


def node_text(st: dict[str, Any]) -> str:
    if "error" in st:
        return f"  {st['error']}"
    n, r, tx, rx = st["node"], st["radio"], st.get("tx", {}), st.get("rx", {})
    heard = st.get("peer_last_heard_s")
    heard_s = "never" if heard is None else f"{heard:.1f} s ago"
    procs = ", ".join(
        f"{k} {'alive' if v['alive'] else 'DEAD'} ({v['restarts']} restarts)"
        for k, v in st.get("processes", {}).items()
    )
    ack = ack_text(r)
    return "\n".join(
        [
            f"  {n['role']} {n['tun']} {n['address']} -> peer {n['peer']}: "
            f"link {st['link'].upper()} (peer last heard {heard_s}), up {st['uptime_s']:.0f} s",
            f"  radio  {r['backend']} {r['rate']} {ack} ARD {r['ard_us']} µs ARC {r['arc']}, "
            f"payload {r['payload']} B, channels tx {r['tx_channel']} / rx {r['rx_channel']}",
            f"  tx     {tx.get('packets_in', 0)} packets in, {tx.get('packets_sent', 0)} sent in "
            f"{tx.get('frames_sent', 0)} frames; {tx.get('retransmissions') or 0} retransmissions, "
            f"{tx.get('max_rt', 0)} MAX_RT, {tx.get('packets_aborted', 0)} packets aborted; "
            f"radio {tx.get('state', '?')}",
            f"  queue  {tx.get('queue_packets', 0)} packets / {tx.get('queue_bytes', 0)} of "
            f"{tx.get('queue_limit_bytes', 0)} bytes, oldest {tx.get('queue_oldest_ms', 0)} ms; "
            f"drops: {_drops(tx.get('queue_drops'))}",
            f"  rx     {rx.get('frames_in', 0)} frames in, {rx.get('packets_out', 0)} packets out, "
            f"{rx.get('keepalives', 0)} keepalives; drops: {_drops(rx.get('drops'))}; "
            f"radio {rx.get('state', '?')}",
            _security_line(tx, rx),
            f"  procs  {procs}; radios waited on: tx {tx.get('waits_on', '?')}, "
            f"rx {rx.get('waits_on', '?')}",
        ]
    )


def _security_line(tx: dict[str, Any], rx: dict[str, Any]) -> str:
    sec = rx.get("security")
    if sec is None and tx.get("sealed") is None:
        return "  secure OFF: open link (insecure = true), frames are not authenticated"
    sec = sec or {}
    return (
        f"  secure ChaCha20-Poly1305: {tx.get('sealed') or 0} sealed (epoch {tx.get('epoch')}), "
        f"{sec.get('opened', 0)} opened; refused: {_drops(sec.get('drops'))}"
    )
