"""tTest from several mobiles at once (``tTest --mobiles all|LIST``, issue 41): each load is
shared equally by the chosen mobiles of the testbed, each with its own iperf3 client in its
namespace and its own server in lg-base (a port each: one iperf3 server serves one test at a
time), all started together. The search, the loss floor and the capacity verdict are tTest's,
on the aggregate; each load's row also says each mobile's rate (``mobiles_bps``), its loss
(``mobiles_loss``: its client's datagrams lost) and Jain's index over the rates, and the
summary each mobile's share of the saturated loads.

The aggregate is what the receivers' TUN counters saw in the trial's middle (``multinode``:
the iperf3 receivers' windows differ, and their rates' sum read a three-mobile uplink as up to
1.12 of the air's bound), so trials last at least MIN_DURATION_S; datagrams sent and lost are
the clients' sums (they do not depend on a window).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from longge import testbed
from longge.errors import ConfigError
from longge.measure import analysis
from longge.measure.iperf import TrialResult, TrialSpec, parse_result, run_trial
from longge.measure.loadprobe import SETTLE_S, LoadProbe, probe_in
from longge.measure.ltest import LTest
from longge.measure.model import IP_UDP_HEADERS
from longge.measure.multinode import PORT, steady_bps
from longge.measure.sweep import Progress, TTestPlan
from longge.measure.ttest import TTest

#: The shortest trial: STEADY_SKIP_S at its start and a second at its end are not counted.
MIN_DURATION_S = 6
SERVER = ("ip", "netns", "exec", "lg-base", "iperf3", "-s")


def wanted(selection: str) -> int:
    """How many mobiles a testbed brought up for ``--mobiles`` has: the highest number it
    names (``all``: 3)."""
    if selection.strip() == "all":
        return 3
    try:
        return max(1, *(int(x) for x in selection.split(",") if x.strip()))
    except ValueError:
        raise ConfigError(
            "--mobiles", selection, "all, or mobile numbers with commas (e.g. 1,3)"
        ) from None


def choose(selection: str, mobiles: int) -> list[int]:
    """The 0-based indices ``--mobiles`` names: ``all``, or numbers 1..N with commas."""
    if selection.strip() == "all":
        return list(range(mobiles))
    try:
        picked = [int(x) for x in selection.split(",") if x.strip()]
    except ValueError:
        picked = []
    if not picked or any(not 1 <= i <= mobiles for i in picked) or len(set(picked)) < len(picked):
        raise ConfigError(
            "--mobiles", selection, f"all, or mobile numbers 1..{mobiles} with commas (e.g. 1,3)"
        )
    return [i - 1 for i in picked]


def chosen_names(direction: str, mobiles: list[int]) -> list[str]:
    """The running testbed's names of the mobiles indexed, for a sweep in ``direction``."""
    if direction == "both":
        raise ConfigError("--bidir", True, "not with --mobiles (one direction at a time)")
    every = testbed.recorded_mobiles()
    return [every[i] for i in mobiles]


class MobilesTTest(TTest):
    def __init__(self, *args: Any, mobiles: list[int], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.mobiles, self.names = mobiles, chosen_names(self.plan.direction, mobiles)
        if self.plan.duration < MIN_DURATION_S:
            self.plan = replace(self.plan, duration=MIN_DURATION_S)

    def run(self) -> dict[str, Any]:
        with servers(self.mobiles):
            return super().run()

    def trial(self, spec: TrialSpec) -> TrialResult:
        """Every chosen mobile offers its equal part of ``spec`` at once (``run_split``)."""
        return run_split(spec, self.mobiles, self.names)

    def point_extra(self, ok: list[TrialResult]) -> dict[str, Any]:
        k = len(self.names)
        rates = [t.stream_received_bps for t in ok if len(t.stream_received_bps) == k]
        if not rates:
            return {"mobiles_bps": None}
        whole = [t for t in ok if len(t.stream_packets) == len(t.stream_lost_packets) == k]
        sent = [sum(t.stream_packets[i] for t in whole) for i in range(k)]
        lost = [sum(t.stream_lost_packets[i] for t in whole) for i in range(k)]
        return {
            "mobiles_bps": [sum(col) / len(col) for col in zip(*rates, strict=True)],
            # (each mobile's datagrams lost: the link's and its queue's drops, as ``loss``)
            "mobiles_loss": [x / n if n else None for x, n in zip(lost, sent, strict=True)]
            if whole
            else None,
        }

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        sat = [p for p in out.get("points", []) if p["saturated"] and p.get("mobiles_bps")]
        each = [sum(col) / len(col) for col in zip(*(p["mobiles_bps"] for p in sat), strict=True)]
        total = sum(each)
        out["mobiles"] = self.names
        out["mobile_shares"] = [x / total for x in each] if total else None
        out["mobiles_jain"] = analysis.jain_index(each) if total else None
        return out


@contextlib.contextmanager
def servers(mobiles: list[int]) -> Iterator[None]:
    """An iperf3 server in lg-base for each mobile (its own port), for the whole run."""
    procs = [
        subprocess.Popen(
            [*SERVER, "-p", str(PORT + i), "-B", testbed.BASE_IP],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in mobiles
    ]
    time.sleep(1.0)
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def split(spec: TrialSpec, mobiles: list[int]) -> list[TrialSpec]:
    """Each mobile's equal part of ``spec``, to its own server."""
    k = len(mobiles)
    return [
        replace(spec, host=testbed.BASE_IP, port=PORT + i, rate_bps=int(spec.rate_bps / k))
        for i in mobiles
    ]


def run_split(spec: TrialSpec, mobiles: list[int], names: list[str]) -> TrialResult:
    """Every mobile's part of ``spec`` at once; their sum, the aggregate by the receivers'
    counters."""
    specs = split(spec, mobiles)
    receivers = [f"lg-{n}" for n in names] if spec.reverse else ["lg-base"]  # (down: -R)
    share = spec.length / (spec.length + IP_UDP_HEADERS) if spec.protocol == "udp" else 1.0
    with ThreadPoolExecutor(len(specs) + 1) as pool:
        runs = [pool.submit(run_trial, s, f"lg-{n}") for s, n in zip(specs, names, strict=True)]
        steady = pool.submit(_steady_bps, receivers, spec.duration, share)
        results = [parse_result(s, r.result()) for s, r in zip(specs, runs, strict=True)]
        aggregate = steady.result()
    return combine(spec, names, results, aggregate)


class MobilesLTest(LTest):
    """lTest from several mobiles at once: the capacity by MobilesTTest, each level's load
    shared equally by the mobiles, RTT probes from every mobile (pooled for the level's
    figures; each mobile's p95 in ``mobiles_rtt_p95_ms``)."""

    def __init__(self, *args: Any, mobiles: list[int], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.mobiles, self.names = mobiles, chosen_names(self.plan.direction, mobiles)

    def capacity_ttest(self, plan: TTestPlan, progress: Progress) -> TTest:
        return MobilesTTest(
            self.target, plan, self.out, progress, frames=self.frames, mobiles=self.mobiles
        )

    def run(self) -> dict[str, Any]:
        out = super().run()
        out["mobiles"] = self.names
        return out

    def load_and_probe(
        self,
        spec: TrialSpec | None,
        count: int,
        interval: float,
        probe: Callable[[], dict[str, Any]],
    ) -> LoadProbe:
        if spec is None:
            return LoadProbe(None, probe())
        with servers(self.mobiles), ThreadPoolExecutor(1) as pool:
            load = pool.submit(run_split, spec, self.mobiles, self.names)
            time.sleep(SETTLE_S)
            probes = probe()
            return LoadProbe(load.result(), probes)

    def probes(self, count: int, interval: float) -> dict[str, Any]:
        with ThreadPoolExecutor(len(self.names)) as pool:
            each = [
                pool.submit(
                    probe_in,
                    replace(self.target, netns=f"lg-{n}"),
                    count,
                    interval,
                    self.plan.probe_bytes,
                )
                for n in self.names
            ]
            got = [f.result() for f in each]
        errors = [
            f"{n}: {g['error']}" for n, g in zip(self.names, got, strict=True) if g.get("error")
        ]
        return {
            "sent": sum(int(g.get("sent", 0)) for g in got),
            "received": sum(int(g.get("received", 0)) for g in got),
            "records": [r for g in got for r in g.get("records", [])],
            "error": "; ".join(errors) or None,
            "per_mobile": got,
        }

    def level_extra(self, probes: dict[str, Any]) -> dict[str, Any]:
        p95 = []
        for g in probes.get("per_mobile", []):
            p95.append(LoadProbe(None, g).rtt_ms(0.95))
        probes.pop("per_mobile", None)
        return {"mobiles_rtt_p95_ms": p95}


def _steady_bps(receivers: list[str], duration: int, share: float) -> float | None:
    """The receivers' payload bit/s in sum, in the middle of a trial that starts now (None:
    nothing came, or no middle)."""
    rates = steady_bps(receivers, duration, share)
    return sum(rates) if rates and sum(rates) > 0 else None


def combine(
    spec: TrialSpec, names: list[str], results: list[TrialResult], aggregate: float | None
) -> TrialResult:
    """The mobiles' trials as one: the aggregate received (the counters', or the receivers'
    sum without them), datagrams and retransmits summed, each mobile's rate in
    ``stream_received_bps``; an error if any mobile's trial failed."""
    failed = [f"{n}: {r.error}" for n, r in zip(names, results, strict=True) if r.error]
    out = TrialResult(
        offered_bps=float(spec.rate_bps) or sum(r.offered_bps for r in results),
        sent_bps=sum(r.sent_bps for r in results),
        received_bps=aggregate if aggregate is not None else sum(r.received_bps for r in results),
        packets=sum(r.packets for r in results),
        lost_packets=sum(r.lost_packets for r in results),
        jitter_ms=max((r.jitter_ms for r in results), default=0.0),
        retransmits=sum(r.retransmits for r in results),
        stream_received_bps=[r.received_bps for r in results],
        stream_packets=[r.packets for r in results],
        stream_lost_packets=[r.lost_packets for r in results],
        error="; ".join(failed) or None,
    )
    return out
