"""``status --prometheus``: the daemons' counters in Prometheus's text exposition format,
made by prometheus_client from the typed status (``status.py``), one sample set per node.

Served the node_exporter way (its textfile collector): a timer writes the text into the
collector's folder (docs/details.md, "Metrics"); LongGe opens no port of its own for it.
Names follow Prometheus's conventions: ``longge_`` first, counters end in ``_total``, units
in the name (``_bytes``, ``_seconds``), one label ``node`` (the status's name for the daemon:
``mobile``, ``base``, or its control socket's path) and ``reason`` where a counter is split.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from longge.daemon.status import CANNOT_SEAL, NodeStatus

#: (name, help, where it is read: "tx"/"rx" and the field) for the plain counters.
COUNTERS = (
    ("tx_packets", "packets read from the TUN to send", "tx", "packets_in"),
    ("tx_bytes", "bytes read from the TUN to send", "tx", "bytes_in"),
    ("tx_frames", "frames written to the radio", "tx", "frames_sent"),
    ("tx_keepalives", "keepalives sent on an idle link", "tx", "keepalives_sent"),
    ("tx_max_rt", "frames that exhausted their retries (MAX_RT)", "tx", "max_rt"),
    ("tx_packets_aborted", "packets abandoned with a frame that failed", "tx", "packets_aborted"),
    ("tx_preempted", "interactive packets sent between another's frames", "tx", "preempted"),
    (
        "tx_cut_in",
        "interactive packets for another peer sent before the rest of one on its way",
        "tx",
        "cut_in",
    ),
    ("tx_uplink_sent", "uplink grants (a base) or releases (a mobile) sent", "tx", "uplink_sent"),
    ("rx_frames", "frames read from the radio", "rx", "frames_in"),
    ("rx_packets", "packets handed to the TUN", "rx", "packets_out"),
    ("rx_bytes", "bytes handed to the TUN", "rx", "bytes_out"),
    ("rx_keepalives", "keepalives heard", "rx", "keepalives"),
    (
        "rx_missing",
        "packets whose numbers a later packet skipped (lost on the way)",
        "rx",
        "missing",
    ),
    (
        "rx_source_not_allowed",
        "packets from a source outside allowed_ips",
        "rx",
        "source_not_allowed",
    ),
    ("radio_reinits_tx", "TX radio re-initialisations", "tx", "reinits"),
    ("radio_reinits_rx", "RX radio re-initialisations", "rx", "reinits"),
)


#: With ``adapt`` (status's ``tx.adapt``, ``tx.adapt.rate``, ``tx.adapt.power``,
#: ``rx.adapt``): (name, help, the status's part and field) of the decisions' counters,
#: labelled with the direction.
ADAPT_COUNTERS = (
    (
        "adapt_retry_decisions",
        "changes of the retries (ARC) the adaptation made",
        "retry",
        "decisions",
    ),
    ("adapt_rate_switches", "changes of the data rate the sender made", "rate", "switches"),
    (
        "adapt_rate_trials",
        "rates tried by the sender (probes, then kept or left)",
        "rate",
        "probes",
    ),
    ("adapt_rate_trials_failed", "trials that did not carry more", "rate", "failed_probes"),
    ("adapt_rate_fallbacks", "falls back to 250 kbit/s after silence", "rate", "fallbacks"),
    (
        "adapt_rate_scans",
        "from 250 kbit/s to the configured rate after silence there",
        "rate",
        "scans",
    ),
    ("adapt_power_steps_down", "steps down of the TX power tried", "power", "lowered"),
    ("adapt_power_steps_failed", "steps down that did not do as well", "power", "failed_steps"),
    (
        "adapt_rate_announcements",
        "rate announcements heard (probes included)",
        "rate",
        "announcements",
    ),
)
#: the rates in bytes per second (Prometheus's base unit: promtool refuses bits)
RATE_BYTES_S = {"250k": 250e3 / 8, "1M": 1e6 / 8, "2M": 2e6 / 8}


def adapt_parts(st: NodeStatus) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(direction, part, fields) of what the status says of the adaptation: the TX radio's
    retries, its rate (the direction it sends), the RX radio's rate (the one it hears)."""
    tx, rx = st.tx.adapt, st.rx.adapt
    if tx:
        yield "tx", "retry", tx
        if tx.get("rate"):
            yield "tx", "rate", tx["rate"]
        if tx.get("power"):
            yield "tx", "power", tx["power"]
    if rx:
        yield "rx", "rate", rx


class StatusCollector(Collector):
    """The metrics of the statuses given (name -> status), as of when they were asked."""

    def __init__(self, statuses: Mapping[str, NodeStatus | None]) -> None:
        self.statuses = statuses

    def collect(self) -> Iterator[Metric]:
        answered = GaugeMetricFamily(
            "longge_daemon_up", "1 if the daemon answered on its control socket", labels=["node"]
        )
        up = GaugeMetricFamily("longge_link_up", "1 while the peer is heard", labels=["node"])
        heard = GaugeMetricFamily(
            "longge_peer_last_heard_seconds",
            "seconds since the last authentic packet from the peer",
            labels=["node"],
        )
        counters = {
            name: CounterMetricFamily(f"longge_{name}", text, labels=["node"])
            for name, text, _, _ in COUNTERS
        }
        retries = CounterMetricFamily(
            "longge_retransmissions",
            "frames sent again: the radio's retries (ESB) or the ARQ's (stream mode)",
            labels=["node"],
        )
        rx_drops = CounterMetricFamily(
            "longge_rx_drops", "frames the reassembler dropped", labels=["node", "reason"]
        )
        queue_drops = CounterMetricFamily(
            "longge_queue_drops", "packets the send queue dropped", labels=["node", "reason"]
        )
        refused = CounterMetricFamily(
            "longge_security_refused",
            "packets refused by the security layer (auth: forged or another key)",
            labels=["node", "reason"],
        )
        queue_bytes = GaugeMetricFamily(
            "longge_queue_bytes", "bytes waiting in the send queue", labels=["node"]
        )
        queue_packets = GaugeMetricFamily(
            "longge_queue_packets", "packets waiting in the send queue", labels=["node"]
        )
        adapt = {
            name: CounterMetricFamily(f"longge_{name}", text, labels=["node", "direction"])
            for name, text, _, _ in ADAPT_COUNTERS
        }
        arc = GaugeMetricFamily(
            "longge_adapt_arc", "the retry count (ARC) the adaptation runs now", labels=["node"]
        )
        failed = GaugeMetricFamily(
            "longge_adapt_failed_attempts_ratio",
            "the share of attempts that failed, as the adaptation measured it",
            labels=["node"],
        )
        rate = GaugeMetricFamily(
            "longge_adapt_rate_bytes_per_second",
            "the data rate the adaptation runs now (tx: the one sent at; rx: heard at)",
            labels=["node", "direction"],
        )
        power = GaugeMetricFamily(
            "longge_adapt_tx_power_watts",
            "the TX power the adaptation sends at now (its PA level; 0 dBm is 1 mW)",
            labels=["node"],
        )
        for node, st in sorted(self.statuses.items()):
            answered.add_metric([node], 0.0 if st is None else 1.0)
            if st is None:
                continue
            up.add_metric([node], 1.0 if st.link == "up" else 0.0)
            if st.peer_last_heard_s is not None:
                heard.add_metric([node], st.peer_last_heard_s)
            for name, _, part, field in COUNTERS:
                counters[name].add_metric([node], getattr(getattr(st, part), field))
            if st.tx.retransmissions is not None:
                retries.add_metric([node], st.tx.retransmissions)
            for reason, n in sorted(st.rx.drops.items()):
                rx_drops.add_metric([node, reason], n)
            for reason, n in sorted(st.tx.queue_drops.items()):
                queue_drops.add_metric([node, reason], n)
            for reason, n in sorted(((st.rx.security or {}).get("drops") or {}).items()):
                refused.add_metric([node, str(reason)], n)
            queue_bytes.add_metric([node], st.tx.queue_bytes)
            queue_packets.add_metric([node], st.tx.queue_packets)
            for direction, part, fields in adapt_parts(st):
                for name, _, where, key in ADAPT_COUNTERS:
                    if where == part and key in fields:
                        adapt[name].add_metric([node, direction], fields[key])
                if part == "retry":
                    if "arc" in fields:  # (stream mode: no chip retries)
                        arc.add_metric([node], fields["arc"])
                    if fields.get("q") is not None:
                        failed.add_metric([node], fields["q"])
                elif part == "power":
                    power.add_metric([node], 10.0 ** (fields["dbm"] / 10.0) / 1000.0)
                else:
                    rate.add_metric([node, direction], RATE_BYTES_S[fields["rate"]])
        yield answered
        yield up
        yield heard
        yield from counters.values()
        yield from (retries, rx_drops, queue_drops, refused, queue_bytes, queue_packets)
        yield from adapt.values()
        yield from (arc, failed, rate, power)


class HealthCollector(Collector):
    """What an operator alerts on beside the traffic: each radio process up and its restarts
    by the supervisor, sealing stopped (an epoch that cannot be recorded), the channels the
    radios are on, the node's clock (a step shows as a jump), the queue's oldest packet, and
    when the text was written (a collector that stopped writing it keeps serving old text)."""

    def __init__(self, statuses: Mapping[str, NodeStatus | None], written: float) -> None:
        self.statuses, self.written = statuses, written

    def collect(self) -> Iterator[Metric]:
        node_process = ["node", "process"]
        up = GaugeMetricFamily(
            "longge_radio_process_up",
            "1 while the radio process has its radio",
            labels=node_process,
        )
        restarts = CounterMetricFamily(
            "longge_process_restarts",
            "radio processes the supervisor started again after they died",
            labels=node_process,
        )
        sealing = GaugeMetricFamily(
            "longge_sealing_stopped",
            "1 while the TX process seals nothing (a new epoch could not be recorded)",
            labels=["node"],
        )
        channel = GaugeMetricFamily(
            "longge_radio_channel", "the channel each radio is on", labels=["node", "radio"]
        )
        clock = GaugeMetricFamily(
            "longge_clock_offset_seconds",
            "the node's wall clock less its monotonic clock (a jump: the clock stepped)",
            labels=["node"],
        )
        oldest = GaugeMetricFamily(
            "longge_queue_oldest_seconds",
            "how long the send queue's oldest packet waited",
            labels=["node"],
        )
        for node, st in sorted(self.statuses.items()):
            if st is None:
                continue
            for process, part in (("tx", st.tx), ("rx", st.rx)):
                up.add_metric([node, process], 1.0 if part.state == "up" else 0.0)
            for process, about in sorted((st.raw.get("processes") or {}).items()):
                restarts.add_metric([node, str(process)], float(about.get("restarts", 0)))
            sealing.add_metric([node], 1.0 if st.tx.state.startswith(CANNOT_SEAL) else 0.0)
            for radio in ("tx", "rx"):
                value = st.radio.get(f"{radio}_channel")
                if isinstance(value, int):
                    channel.add_metric([node, radio], float(value))
            if st.clock_offset_s is not None:
                clock.add_metric([node], st.clock_offset_s)
            oldest.add_metric([node], st.tx.queue_oldest_ms / 1000.0)
        written = GaugeMetricFamily(
            "longge_metrics_written_timestamp_seconds",
            "when status --prometheus wrote this text (Unix time)",
        )
        written.add_metric([], self.written)
        yield from (up, restarts, sealing, channel, clock, oldest, written)


class PeerCollector(Collector):
    """Each peer of a node (a base's mobiles): heard or not, packets and bytes taken from it,
    packets it lost on the way, packets sent to it and given up on, its queue."""

    def __init__(self, statuses: Mapping[str, NodeStatus | None]) -> None:
        self.statuses = statuses

    def collect(self) -> Iterator[Metric]:
        labels = ["node", "peer"]
        up = GaugeMetricFamily("longge_peer_up", "1 while the peer is heard", labels=labels)
        silent = GaugeMetricFamily(
            "longge_peer_silent_seconds",
            "seconds since the peer's last authentic packet",
            labels=labels,
        )
        counters = {
            name: CounterMetricFamily(f"longge_peer_{name}", text, labels=labels)
            for name, text, _, _ in PEER_COUNTERS
        }
        queued = GaugeMetricFamily(
            "longge_peer_queue_bytes", "bytes waiting in the peer's send queue", labels=labels
        )
        for node, st in sorted(self.statuses.items()):
            for peer in () if st is None else st.peers:
                key = [node, peer.name]
                up.add_metric(key, 1.0 if peer.link == "up" else 0.0)
                if peer.peer_last_heard_s is not None:
                    silent.add_metric(key, peer.peer_last_heard_s)
                for name, _, half, field in PEER_COUNTERS:
                    value = (peer.sent if half == "sent" else peer.received).get(field)
                    if isinstance(value, (int, float)):
                        counters[name].add_metric(key, float(value))
                if isinstance(peer.sent.get("queue_bytes"), int):
                    queued.add_metric(key, float(peer.sent["queue_bytes"]))
        yield up
        yield silent
        yield from counters.values()
        yield queued


#: (name, help, the peer's half in the status, its field) of each peer's counters.
PEER_COUNTERS = (
    ("received_packets", "IP packets taken from the peer", "received", "ip_packets"),
    ("received_bytes", "bytes of the IP packets taken from the peer", "received", "ip_bytes"),
    (
        "missing",
        "the peer's packets whose numbers a later one skipped (lost on the way)",
        "received",
        "missing",
    ),
    ("sent_packets", "packets sent to the peer", "sent", "packets_sent"),
    ("aborted_packets", "packets to the peer given up on (MAX_RT)", "sent", "packets_aborted"),
)


def exposition(statuses: Mapping[str, NodeStatus | None], written: float | None = None) -> str:
    """The statuses as Prometheus text (what ``status --prometheus`` prints); None: a daemon
    that did not answer (``longge_daemon_up`` 0, nothing else for it). ``written``: the Unix
    time it says it was written (now)."""
    registry = CollectorRegistry()
    registry.register(StatusCollector(statuses))
    registry.register(HealthCollector(statuses, time.time() if written is None else written))
    registry.register(PeerCollector(statuses))
    return generate_latest(registry).decode()
