"""Latency under load, one way for every measurement: an iperf3 load in the background, and
once it has settled, isochronous RTT probes from LongGe's own client (``measure/rtt.py``:
kernel-stamped at both ends, the server's processing time taken out) against the base
station's echo server. lTest's levels, tune's ρ 0.5 / 0.9 points and the experiments' RTT all
come from ``load_and_probe`` (the experiments used ``ping`` before: one RTT method now)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from longge.measure.iperf import TrialResult, TrialSpec, parse_result, run_trial
from longge.measure.link import Target

#: How long a load runs before the probes start (the queues reach their steady state).
SETTLE_S = 1.5


def probe_in(target: Target, count: int, interval_s: float, size: int = 60) -> dict[str, Any]:
    """``count`` RTT probes every ``interval_s`` from the clients' side (``target.netns``)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = tmp.name
    cmd = [
        sys.executable,
        "-m",
        "longge.measure.rtt",
        target.host,
        str(target.rtt_port),
        str(count),
        str(interval_s),
        str(size),
        out,
    ]
    if target.netns:
        cmd = ["ip", "netns", "exec", target.netns, *cmd]
    try:
        subprocess.run(cmd, timeout=count * interval_s + 30, capture_output=True)
        with open(out) as f:
            data: dict[str, Any] = json.load(f)
        return data
    except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
        return {"error": f"probe client failed: {exc}", "sent": 0, "received": 0, "records": []}
    finally:
        if os.path.exists(out):
            os.unlink(out)


@dataclass
class LoadProbe:
    """What one load-plus-probe measurement gave."""

    load: TrialResult | None  # None when no load was asked for
    probes: dict[str, Any]  # the probe client's output: sent, received, records, error

    @property
    def rtts(self) -> list[float]:
        """Kernel-stamped RTTs of the probes that came back, ms."""
        return [r["rtt_ms"] for r in self.probes.get("records", []) if r["rtt_ms"] is not None]

    @property
    def sent(self) -> int:
        return int(self.probes.get("sent", 0))

    @property
    def lost(self) -> int:
        return self.sent - len(self.rtts)

    def rtt_ms(self, q: float) -> float | None:
        """The q-quantile of all probes sent, a lost one counted as slower than any that came
        back: None where it falls among the lost (the probes that survived are the fast ones:
        44 of 45 lost once read as an 8 ms RTT)."""
        rtts = sorted(self.rtts)
        pos = q * (len(rtts) + max(0, self.lost) - 1)
        if not rtts or pos > len(rtts) - 1:
            return None
        lo = int(pos)
        hi = min(lo + 1, len(rtts) - 1)
        return rtts[lo] + (rtts[hi] - rtts[lo]) * (pos - lo)


def load_and_probe(
    target: Target,
    load: TrialSpec | None,
    count: int,
    interval_s: float,
    size: int = 60,
    probe: Callable[[], dict[str, Any]] | None = None,
) -> LoadProbe:
    """Run ``load`` (if any) in the background, let it settle, probe (``probe`` replaces the
    plain probe run, for callers that measure around it), wait for the load to end."""
    box: dict[str, Any] = {}
    thread = None
    if load is not None:
        thread = threading.Thread(
            target=lambda: box.update(raw=run_trial(load, target.netns)), daemon=True
        )
        thread.start()
        time.sleep(SETTLE_S)
    probes = probe() if probe is not None else probe_in(target, count, interval_s, size)
    result = None
    if load is not None and thread is not None:
        thread.join(load.duration + 30)
        raw = box.get("raw", {"error": "the load did not finish"})
        result = parse_result(load, raw)
    return LoadProbe(result, probes)
