"""Retry tuning: sweep ARD × ARC live on the running link, measure, compare with the model,
recommend. Each grid point is applied to both daemons through their control sockets (the
interface stays up), then measured: capacity (a short search around the model's prediction),
RTT p95 at ρ ≈ 0.5 and 0.9 (probes over background load), datagram loss at ρ ≈ 0.9, and the
per-attempt failure rate q from the radio's own counters (retransmissions / frames).

Results go to ``grid.csv`` as each point ends, so an interrupted tune resumes where it stopped.
With ``--vs-stream`` the link is then switched to stream mode (both daemons, live), measured
the same way, and switched back: the summary says which mode carries more at what RTT.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from dataclasses import asdict, replace
from typing import Any

from longge.errors import ConfigError
from longge.measure import analysis, floor
from longge.measure.disturbance import unspoilt
from longge.measure.iperf import TrialSpec, parse_result, run_trial
from longge.measure.link import Target
from longge.measure.loadprobe import load_and_probe, probe_in
from longge.measure.model import IP_UDP_HEADERS, datagram_frames, lossy_model, udp_goodput_bps
from longge.measure.results import ResultsDir
from longge.measure.sweep import Progress
from longge.measure.tune_plan import TunePlan
from longge.measure.tune_verdict import mode_verdict, recommend
from longge.protocol.frame import frames_for
from longge.radio.options import RadioOptions

GRID_FIELDS = [
    "ard_us",
    "arc",
    "capacity_bps",
    "model_capacity_bps",
    "q_measured",
    "rtt_p95_05_ms",
    "rtt_p95_09_ms",
    "model_rtt_p95_05_ms",
    "model_rtt_p95_09_ms",
    "rtt_median_05_ms",
    "rtt_median_09_ms",
    "loss_09",
    "model_residual_loss",
    "loss_floor",
    "loss_floor_low",
    "loss_floor_high",
    "model_loss_floor",
    "curve",
    "cpu_steal",
    "disturbed",
    "error",
]
PROBE_BYTES = 60


def model_capacity(opts: RadioOptions, q: float, length: int = 1400, overhead: int = 0) -> float:
    """UDP payload rate the model expects at per-attempt failure q (measure/model.py's lossy
    model, shared with tTest and lTest: a packet is delivered when all its F frames get through,
    each lost with r = q^(ARC+1); the daemon abandons a packet at its first lost frame)."""
    return lossy_model(replace(opts, mode="esb"), q, 0.0, 1.0, length, overhead)[0]


def mode_capacity(opts: RadioOptions, q: float, overhead: int = 0) -> float:
    """model_capacity in ESB mode; in stream mode the ARQ sends each lost frame again (and
    only it), so the loss-free rate shrinks by the share of frames that get through."""
    return lossy_model(opts, q, 0.0, 1.0, 1400, overhead)[0]


def _frames(udp_payload: int, opts: RadioOptions) -> int:
    return frames_for(udp_payload + IP_UDP_HEADERS, opts.payload)


def packet_service_ms(opts: RadioOptions, q: float, length: int = 1400, overhead: int = 0) -> float:
    """Mean air time of one ``length``-byte datagram's frames at per-attempt failure q."""
    t = opts.timing()
    slow = t.expected_service_ns(q) / t.expected_service_ns(0.0)
    return length * 8 / udp_goodput_bps(opts, length, overhead) * slow * 1e3


def model_rtt_ms(
    opts: RadioOptions,
    q: float,
    rho: float,
    idle_ms: float,
    idle_opts: RadioOptions,
    pct: float = 0.95,
    overhead: int = 0,
) -> float:
    """The ``pct`` quantile of probe RTT at load ρ, as the model sees it.

    Idle: the measured idle RTT (taken at ``idle_opts``), moved by what the probe's own frames
    (both ways) cost more or less at this setting. Under load: the daemon's fair queue serves
    the sparse probe flow first, so a probe waits only for the datagram in service, if any
    (non-preemptive priority): with probability ρ it arrives during a service of mean length
    S and waits a uniform share of it. The quantile of that wait is S·(1 − (1−pct)/ρ), or 0
    when ρ ≤ 1 − pct. A FIFO queue (``--queue fifo``) would add the whole queue instead.
    """

    def probe_ns(o: RadioOptions) -> float:
        return 2 * _frames(PROBE_BYTES + overhead, o) * o.timing().expected_service_ns(q)

    idle = idle_ms + (probe_ns(opts) - probe_ns(idle_opts)) / 1e6
    if rho <= 1 - pct:
        return idle
    return idle + packet_service_ms(opts, q, 1400, overhead) * (1 - (1 - pct) / min(rho, 1.0))


def failure_rate(frames: int, retrans: int, max_rt: int) -> float:
    """Per-attempt failure q from the radio's counters: every retransmission follows a failed
    attempt, and so does every MAX_RT (the last attempt failed too); attempts = frames +
    retransmissions."""
    attempts = max(1, frames) + retrans
    return (retrans + max_rt) / attempts


def tune_link(base: RadioOptions, q_hint: float, overhead: int | None) -> dict[str, Any]:
    """What a grid's points depend on besides ARD and ARC (each row has its own)."""
    link = {k: v for k, v in asdict(base).items() if k not in ("ard_us", "arc")}
    return {**link, "security_overhead": overhead, "q_hint": round(q_hint, 6)}


def check_resume(
    out: ResultsDir,
    base: RadioOptions,
    q_hint: float,
    overhead: int | None,
    rows: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A folder resumed must hold a tune of the same link: points measured at another rate,
    payload, mode, security or loss would be judged and drawn as one grid. ConfigError naming
    what differs; else the link to record (what is not known now, e.g. the security of a daemon
    that did not answer, taken from the folder). ``rows``: the grid's (None: read here; a folder
    whose grid has no row yet is anybody's). Called before the run writes its context.json too,
    so that a refused folder keeps its own."""
    link = tune_link(base, q_hint, overhead)
    path = out.path / "tune_link.json"
    if rows is None:
        try:
            with open(out.path / "grid.csv", newline="") as f:
                rows = list(csv.DictReader(f))
        except (OSError, UnicodeDecodeError, csv.Error):
            rows = []  # (none, or not readable: Tune's own reading names it)
    if not rows:
        return link
    if not path.exists():
        return link  # a grid from before this file: resumed as it was
    try:
        had = json.loads(path.read_text())
        if not isinstance(had, dict):
            raise ValueError("not an object")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            "tune_link.json", str(path), f"what an earlier tune wrote ({exc})"
        ) from exc
    # (None, either side: not known then or now, e.g. a daemon that did not answer)
    differ = [
        f"{k} {had[k]!r} there, {v!r} here"
        for k, v in link.items()
        if v is not None and had.get(k) is not None and had[k] != v
    ]
    if differ:
        raise ConfigError(
            "--out",
            str(out.path),
            "a folder to resume with the same link as its grid ("
            + "; ".join(differ)
            + "): choose another --out",
        )
    return {k: had.get(k) if v is None else v for k, v in link.items()}


class Tune:
    def __init__(
        self,
        target: Target,
        base: RadioOptions,
        plan: TunePlan,
        out: ResultsDir,
        q_hint: float,
        progress: Progress = lambda m, f: None,
        overhead: int | None = 0,
        loss: tuple[float, float, float] = (0.0, 0.0, 1.0),
    ) -> None:
        self.target = target
        # the emulated air's (per, ack_per, burst): what the model predicts each point from
        self.loss = loss
        self.base = base
        self.plan = plan
        self.out = out
        self.q_hint = q_hint
        # security bytes per packet on this link (for the model; None: not known)
        self.overhead = overhead or 0
        self._overhead_known = overhead
        self.progress = progress
        self.grid_csv = out.path / "grid.csv"
        self.rows = self._load()
        self._check_link()
        self.idle_rtt_ms = math.nan
        self.stream: dict[str, Any] | None = None  # stream mode's point (--vs-stream)
        stream_json = out.path / "stream.json"
        if stream_json.exists():  # resuming: measured already
            self.stream = json.loads(stream_json.read_text())

    def _check_link(self) -> None:
        """The folder's grid is of this link (check_resume); tune_link.json says which."""
        link = check_resume(self.out, self.base, self.q_hint, self._overhead_known, self.rows)
        self.out.write_json("tune_link.json", link)

    def _load(self) -> list[dict[str, Any]]:
        self.fields = GRID_FIELDS
        if not self.grid_csv.exists():
            with open(self.grid_csv, "w", newline="") as f:
                csv.DictWriter(f, GRID_FIELDS).writeheader()
            return []
        try:
            with open(self.grid_csv, newline="") as f:
                reader = csv.DictReader(f)
                rows = [{k: _num(v) for k, v in r.items()} for r in reader]
                self.fields = list(reader.fieldnames or [])  # resuming: keep its columns
            if not {"ard_us", "arc", "capacity_bps", "error"} <= set(self.fields):
                raise ValueError(f"columns {self.fields}")
            for r in rows:
                if not all(isinstance(r[k], float) for k in ("ard_us", "arc")):
                    raise ValueError(f"row {r}")
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                "grid.csv",
                str(self.grid_csv),
                f"a grid an earlier tune wrote, to resume ({exc}); move it away to start afresh",
            ) from exc
        return rows

    def _spec(self, rate: float, seconds: int) -> TrialSpec:
        return TrialSpec(
            host=self.target.host,
            port=self.target.iperf_port,
            rate_bps=int(rate),
            duration=seconds,
            length=1400,
        )

    def _trial(self, rate: float, seconds: int) -> Any:
        spec = self._spec(rate, seconds)
        return parse_result(spec, run_trial(spec, self.target.netns))

    def _rtt(self, rate: float) -> tuple[float, float]:
        """(median, p95) RTT of probes over ``rate`` of background load."""
        count = int(self.plan.probe_s / 0.05)
        load = self._spec(rate, self.plan.probe_s + 3)
        measured = load_and_probe(self.target, load, count, 0.05, PROBE_BYTES)
        self.target.drain()
        # a quantile among the lost probes is none (NaN: such a point meets no RTT rule)
        median, p95 = measured.rtt_ms(0.5), measured.rtt_ms(0.95)
        return (math.nan if median is None else median, math.nan if p95 is None else p95)

    def _point_unspoilt(self, ard: int, arc: int) -> dict[str, Any]:
        """A grid point, measured once more if the machine spoilt it (measure.disturbance)."""
        row, disturbed, _ = unspoilt(lambda: self.point(ard, arc), air=self.target.air)
        row["cpu_steal"] = round(disturbed.steal, 4)
        # still spoilt after the repeat: kept, said, and never recommended
        row["disturbed"] = disturbed.reason or ""
        return row

    def point(self, ard: int, arc: int) -> dict[str, Any]:
        self.target.set_radio({"ard_us": ard, "arc": arc})
        return {"ard_us": ard, "arc": arc, **self._measure(replace(self.base, ard_us=ard, arc=arc))}

    def stream_point(self) -> dict[str, Any]:
        """Stream mode measured as a grid point is (ARD/ARC play no part in it), the link
        switched there and back to the mode it had."""
        had = self.target.mode()
        self.target.set_mode("stream")
        try:
            row, disturbed, _ = unspoilt(
                lambda: self._measure(replace(self.base, mode="stream")), air=self.target.air
            )
        finally:
            self.target.set_mode(had)
        return {"mode": "stream", **row, "cpu_steal": round(disturbed.steal, 4)}

    def _model(self, opts: RadioOptions, q: float) -> float:
        return mode_capacity(opts, q, self.overhead)

    def _predict(self, opts: RadioOptions) -> tuple[float, float]:
        """(C, loss floor of 1400-byte datagrams) the lossy model gives this setting on the
        emulated air's losses (none known: a loss-free link)."""
        per, ack_per, burst = self.loss
        return lossy_model(opts, per, ack_per, burst, 1400, self.overhead)

    def _measure(self, opts: RadioOptions) -> dict[str, Any]:
        """Capacity on the loss floor's model (measure/floor.py, as tTest): loads at 0.6, 0.9,
        1.05 and 1.3 of the predicted C, each divided by the share the predicted floor lets
        through (a setting that loses packets at every load saturates only there); what
        contradicts C measured once more, or a load above, as tTest does."""
        self.target.drain()
        predicted, p0 = self._predict(opts)
        share = max(0.05, 1.0 - p0)
        frames = datagram_frames(opts, 1400, self.overhead)
        f0, r0, m0 = self.target.tx_counters()
        pts: dict[float, floor.Sample] = {}
        loss = math.nan

        def measure(rate: float) -> Any:
            res = self._trial(rate, self.plan.trial_s)
            self.target.drain()
            pts[rate] = floor.Sample(rate, res.received_bps, res.packets, res.lost_packets, frames)
            return res

        for factor in (0.6, 0.9, 1.05, 1.3):
            res = measure(factor * predicted / share)
            if factor == 0.9:
                loss = res.lost_packets / res.packets if res.packets else math.nan
        judged = floor.judge_lossy(list(pts.values()))
        if judged.verdict.capacity_bps is None:  # measure what contradicts C once more, or higher
            for rate in judged.verdict.contradicting:
                measure(rate)
            if judged.verdict.needs_load_above:
                measure(1.8 * max(pts) / 1.3)
            judged = floor.judge_lossy(list(pts.values()))
        f1, r1, m1 = self.target.tx_counters()
        q = failure_rate(f1 - f0, r1 - r0, m1 - m0)
        if judged.verdict.capacity_bps is None:
            raise RuntimeError(f"no capacity: {judged.verdict.reason}")
        capacity = judged.verdict.capacity_bps
        med05, p95_05 = self._rtt(0.5 * capacity)
        med09, p95_09 = self._rtt(0.9 * capacity)
        curve = {
            "load": [
                [round(p.offered_bps, 1), round(p.received_bps, 1)]
                for p in sorted(pts.values(), key=lambda p: p.offered_bps)
            ],
            "rtt": [[0.5, med05, p95_05], [0.9, med09, p95_09]],
        }
        lo, hi = judged.loss_floor_ci95
        return {
            "capacity_bps": capacity,
            "model_capacity_bps": self._model(opts, q),
            "q_measured": q,
            "rtt_p95_05_ms": p95_05,
            "rtt_p95_09_ms": p95_09,
            "model_rtt_p95_05_ms": self._model_rtt(opts, q, 0.5),
            "model_rtt_p95_09_ms": self._model_rtt(opts, q, 0.9),
            "rtt_median_05_ms": med05,
            "rtt_median_09_ms": med09,
            "loss_09": loss,
            "model_residual_loss": 0.0 if opts.mode == "stream" else opts.timing().residual_loss(q),
            "loss_floor": judged.loss_floor,
            "loss_floor_low": lo,
            "loss_floor_high": hi,
            "model_loss_floor": lossy_model(opts, q, 0.0, 1.0, 1400, self.overhead)[1],
            "curve": json.dumps(curve),
            "error": "",
        }

    def _model_rtt(self, opts: RadioOptions, q: float, rho: float) -> float:
        return model_rtt_ms(opts, q, rho, self.idle_rtt_ms, self.base, overhead=self.overhead)

    def run(self) -> dict[str, Any]:
        self.progress("idle RTT", 0.0)
        probes = probe_in(self.target, 40, 0.05)
        self.idle_rtt_ms = analysis.percentile(
            [r["rtt_ms"] for r in probes.get("records", []) if r["rtt_ms"] is not None], 0.5
        )
        done = {(int(r["ard_us"]), int(r["arc"])) for r in self.rows}
        grid = list(itertools.product(self.plan.ard_us, self.plan.arc))
        had = self.target.retry_settings()  # what each node had: put back whatever happens
        try:
            for i, (ard, arc) in enumerate(grid):
                if (ard, arc) in done:
                    continue
                self.progress(f"ARD {ard} µs ARC {arc}", i / len(grid))
                try:
                    row = self._point_unspoilt(ard, arc)
                except Exception as exc:  # record and go on: one bad point must not cost all
                    row = {"ard_us": ard, "arc": arc, "error": f"{type(exc).__name__}: {exc}"}
                self.rows.append(row)
                with open(self.grid_csv, "a", newline="") as f:
                    csv.DictWriter(f, self.fields, extrasaction="ignore").writerow(row)
        finally:  # also on Ctrl-C: never leave the link at a grid point (ARC 0 loses packets)
            Target.restore(had)
        if self.plan.vs_stream and self.stream is None:
            self.progress("stream mode", 0.99)
            try:
                self.stream = self.stream_point()
            except Exception as exc:
                self.stream = {"mode": "stream", "error": f"{type(exc).__name__}: {exc}"}
            self.out.write_summary(self.stream, "stream.json")
        self.progress("done", 1.0)
        return self.summary()

    def partial(self) -> dict[str, Any]:
        """The grid points measured so far (runner: after Ctrl-C or an error)."""
        return self.summary()

    def summary(self) -> dict[str, Any]:
        ok = [r for r in self.rows if not r.get("error") and not r.get("disturbed")]
        best, why, good = recommend(ok, self.plan, self.idle_rtt_ms)
        rule = (
            f"among the settings whose loss floor is at most {self.plan.pdr_loss:.1%} (datagrams "
            "lost at every load; if none, the lowest floor), the highest capacity with datagram "
            f"loss at ρ 0.9 <= {self.plan.max_loss:.1%} and RTT p95 at ρ 0.9 <= "
            f"max({self.plan.max_rtt_factor:g} × idle, idle + 25 ms) (if none meets those, the "
            "highest capacity)"
        )
        return {
            "kind": "tune",
            "stream": self.stream,
            "mode_verdict": mode_verdict(best, self.stream),
            # the settings the grid varied ARD/ARC around: the curves' model is drawn from them
            "options": self.base.as_dict(),
            "idle_rtt_ms": self.idle_rtt_ms,
            "q_hint": self.q_hint,
            "security_overhead": self.overhead,
            "grid": self.rows,
            "recommendation": best,
            "rule": rule,
            "rule_met": bool(good),
            "why": why,
            "apply": None
            if best is None
            else (
                f"./run.sh radio set --ard-us {int(best['ard_us'])} --arc {int(best['arc'])} on "
                "both nodes (on the testbed one call sets both); permanently: "
                f"ard_us = {int(best['ard_us'])}, arc = {int(best['arc'])} in the [radio] section "
                "of both nodes' longge.toml"
            ),
        }


def _num(v: str) -> Any:
    if v == "":
        return ""
    try:
        return float(v)
    except ValueError:
        return v
