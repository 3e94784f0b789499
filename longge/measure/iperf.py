"""iperf3 trials: run one in its own process (optionally in a network namespace), and parse
libiperf's JSON into the figures we use. Parsing is pure and tested on captured output.

Goodput is what the *receiver* got: ``end.sum_received`` (never the client's send rate).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrialSpec:
    host: str
    port: int = 5201
    protocol: str = "udp"
    rate_bps: int = 0
    duration: int = 5
    length: int = 1400
    streams: int = 1
    reverse: bool = False  # iperf3 -R: the server sends (base -> mobile)
    bidir: bool = False  # iperf3 --bidir: both at once, each direction at rate_bps
    congestion: str = ""  # TCP congestion control for the test's sockets ("" = default)


@dataclass
class TrialResult:
    offered_bps: float  # what the spec asked for (UDP), or what the client sent (TCP)
    sent_bps: float = 0.0
    received_bps: float = 0.0
    packets: int = 0
    lost_packets: int = 0
    jitter_ms: float = 0.0
    retransmits: int = 0
    stream_received_bps: list[float] = field(default_factory=list)
    #: per stream (a mobile's client, combined: mobiles_ttest): datagrams sent and lost (UDP)
    stream_packets: list[int] = field(default_factory=list)
    stream_lost_packets: list[int] = field(default_factory=list)
    interval_received_bps: list[float] = field(default_factory=list)
    error: str | None = None
    cpu_steal: float = 0.0  # share of CPU time the hypervisor took meanwhile (measure.cpu)
    air_freezes: int = 0  # times the emulated air stopped its clock meanwhile (emulator.py)
    air_frozen_ms: float = 0.0  # for how long in all
    reverse: TrialResult | None = None  # --bidir: the server -> client direction's figures

    @property
    def efficiency(self) -> float:
        return self.received_bps / self.offered_bps if self.offered_bps else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["efficiency"] = self.efficiency
        if self.reverse is not None:
            d["reverse"] = self.reverse.as_dict()
        return d


def parse_result(spec: TrialSpec, raw: dict[str, Any]) -> TrialResult:
    """Figures from libiperf's JSON (iperf 3.9+ field names); with ``bidir`` the server ->
    client direction's in ``reverse`` (the ``*_bidir_reverse`` sums)."""
    offered = float(spec.rate_bps)
    if "error" in raw and "end" not in raw:
        return TrialResult(offered_bps=offered, error=str(raw["error"]))
    res = _direction(spec, raw, "", forward=True)
    if spec.bidir:
        res.reverse = _direction(spec, raw, "_bidir_reverse", forward=False)
    for iv in raw.get("intervals", []):
        res.interval_received_bps.append(iv.get("sum", {}).get("bits_per_second", 0.0))
    if raw.get("error"):
        res.error = str(raw["error"])
    return res


def _direction(spec: TrialSpec, raw: dict[str, Any], suffix: str, forward: bool) -> TrialResult:
    end = raw.get("end", {})
    sent = end.get(f"sum_sent{suffix}", {}).get("bits_per_second", 0.0)
    received = end.get(f"sum_received{suffix}", {}).get("bits_per_second", 0.0)
    res = TrialResult(
        offered_bps=float(spec.rate_bps) or sent, sent_bps=sent, received_bps=received
    )
    if "bits_per_second" not in end.get(f"sum_received{suffix}", {}):
        # not a link that carried nothing: a result without the figure
        res.error = f"iperf3's result has no end.sum_received{suffix}"
    # with --bidir, each stream belongs to the direction whose sender the client is or not
    streams = [
        st for st in end.get("streams", []) if not spec.bidir or _client_sends(st) == forward
    ]
    if spec.protocol == "udp":
        s = end.get(f"sum{suffix}", {})
        res.packets = int(s.get("packets", 0))
        res.lost_packets = max(0, int(s.get("lost_packets", 0)))
        res.jitter_ms = float(s.get("jitter_ms", 0.0))
        for st in streams:
            u = st.get("udp", {})
            lost = u.get("lost_percent", 0.0) or 0.0
            res.stream_received_bps.append(u.get("bits_per_second", 0.0) * (1 - lost / 100))
            res.stream_packets.append(int(u.get("packets", 0) or 0))
            res.stream_lost_packets.append(max(0, int(u.get("lost_packets", 0) or 0)))
    else:
        res.retransmits = int(end.get(f"sum_sent{suffix}", {}).get("retransmits", 0) or 0)
        for st in streams:
            res.stream_received_bps.append(st.get("receiver", {}).get("bits_per_second", 0.0))
    return res


def _client_sends(stream: dict[str, Any]) -> bool:
    part = stream.get("udp") or stream.get("sender") or {}
    return bool(part.get("sender", True))


#: Errors after which the same trial is tried again: the server restarts between tests
#: (a fresh libiperf process each time) and serves one test at a time.
RETRY_ON = ("unable to connect", "server is busy", "Connection refused")


def run_trial(
    spec: TrialSpec, netns: str | None = None, grace_s: float = 15.0, retries: int = 20
) -> dict[str, Any]:
    """Run one client test in a fresh process; kill it if it overstays; try again while the
    server is between tests. Returns the raw JSON (or ``{"error": ...}``)."""
    for _ in range(retries):
        raw = _run_once(spec, netns, grace_s)
        if not any(text in str(raw.get("error", "")) for text in RETRY_ON) or raw.get("end"):
            return raw
        time.sleep(0.25)
    return raw


def _end(proc: subprocess.Popen[bytes], out: str) -> None:
    """The trial's process group killed and its file removed, whichever of them is gone
    already (a Ctrl-C as the trial ends: once a ProcessLookupError took the interrupt's
    place, and the run ended as failed, not interrupted)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(out)


def _run_once(spec: TrialSpec, netns: str | None, grace_s: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = tmp.name
    cmd = [sys.executable, "-m", "longge.measure.iperf_client", json.dumps(asdict(spec)), out]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        _, err = proc.communicate(timeout=spec.duration + grace_s)
    except subprocess.TimeoutExpired:
        _end(proc, out)
        return {"error": f"trial did not finish within {spec.duration + grace_s:.0f} s (killed)"}
    except BaseException:
        _end(proc, out)  # Ctrl-C: libiperf would not stop by itself
        raise
    try:
        with open(out) as f:
            raw: dict[str, Any] = json.load(f)
    except (OSError, ValueError):
        raw = {"error": f"client process failed (exit {proc.returncode}): {err[-300:]!r}"}
    finally:
        if os.path.exists(out):
            os.unlink(out)
    return raw
