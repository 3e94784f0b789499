"""The long soak (issue 44): the testbed at saturation both ways for MINUTES, a ping beside it,
and every testbed process's memory, descriptors and CPU sampled each minute. Run by hand, as
root (``python -m tools.faults --soak MINUTES`` calls it):

    .venv/bin/python -m tools.soak MINUTES [--mode esb|stream] [--out DIR]

Load: stock iperf3 from lg-mobile, UDP 1400-byte datagrams, ``--bidir``, each direction
offered ``LOAD_RATIO`` × the model's capacity (past saturation), in runs of ``RUN_S`` back to
back (the servers end a test after 600 s); a ping from lg-mobile at 5 per second beside it.
Each minute: per process (each daemon, its TX and RX radio processes, the air, the servers
and their iperf3 test process, the keeper) RSS, open descriptors and CPU over the minute;
a process started again since the last sample (a new pid) is said. The figure is the trend:
growth from the first sample after ``WARM_MIN`` minutes (the allocators' first fill) to the
last, per process. Written to DIR (samples.jsonl, summary.json, soak.png).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from longge import testbed
from longge.measure.model import udp_goodput_both_ways_bps
from longge.measure.results import ResultsDir, default_dir
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions

LOAD_RATIO = 1.3
RUN_S = 290
#: a run this much past its time has lost its control connection: ended (Load.poll)
RUN_GRACE_S = 10
SAMPLE_EVERY_S = 60.0
WARM_MIN = 1
#: targets (issue 44): RSS growth per process, descriptors flat
RSS_GROWTH_KIB = 1024
TICKS = os.sysconf("SC_CLK_TCK")


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def children(pid: int, comm: str | None = None) -> list[int]:
    """The processes ``pid`` started (those named ``comm``, if given)."""
    try:
        tasks = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(t) for t in tasks if comm is None or _comm_or_none(int(t)) == comm]


def processes() -> dict[str, int]:
    """Name -> pid of every testbed process: the recorded ones, the daemons' radio processes,
    the servers' iperf3 server and its test's process (a new one each test)."""
    state = json.loads(testbed.paths()["state"].read_text())
    found = {n: int(p) for n, p in state["pids"].items()}
    if state.get("keeper"):
        found["keeper"] = int(state["keeper"])
    for name, pid in list(found.items()):
        for child in children(pid):
            comm = _comm_or_none(child)
            if comm in ("longge-tx", "longge-rx"):
                found[f"{name}-{comm[7:]}"] = child
            elif comm and name == "servers":  # the iperf3 server, and the process of its test
                found["servers-iperf3"] = child
                for test in children(child):
                    found["servers-iperf3-test"] = test
    return found


def _comm_or_none(pid: int) -> str | None:
    try:
        return _comm(pid)
    except OSError:
        return None


def usage(pid: int) -> dict[str, int] | None:
    """RSS KiB, open descriptors, CPU ticks (user + system) of ``pid``; None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    m = re.search(r"VmRSS:\s+(\d+)", status)
    return {"rss_kib": int(m.group(1)) if m else 0, "fds": fds,
            "ticks": int(stat[11]) + int(stat[12])}  # fmt: skip


def _ns(namespace: str, *cmd: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ip", "netns", "exec", namespace, *cmd],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


class Load:
    """iperf3 --bidir runs back to back, and a ping, until ``stop``; what each run carried. Each
    run's JSON goes to a file (a pipe left unread until the run ends would fill, and iperf3
    would wait on it for ever)."""

    def __init__(self, rate_bps: float, out: Path, run_s: int = RUN_S) -> None:
        self.rate_bps = rate_bps
        self.out = out
        self.run_s = run_s
        self.runs: list[dict[str, Any]] = []
        self.iperf: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.ping = _ns(
            "lg-mobile", "ping", "-q", "-n", "-i", "0.2", testbed.BASE_IP
        )  # (-q: only its summary)

    def _json(self) -> Path:
        return self.out / f"iperf3-{len(self.runs) + 1:03d}.json"

    def poll(self) -> None:
        """Start the next run once the last has ended (and record what it carried). A run
        that outlives its time by RUN_GRACE_S (its control connection lost in a fault: iperf3
        then waits for ever) is ended, so that the load goes on."""
        if self.iperf is not None:
            if self.iperf.poll() is None:
                if time.monotonic() - self.started < self.run_s + RUN_GRACE_S:
                    return
                self.iperf.kill()
                self.iperf.wait()
            self.runs.append(_run_result(self._json().read_text(errors="replace")))
        self.started = time.monotonic()
        with open(self._json(), "wb") as f:
            self.iperf = subprocess.Popen(
                ["ip", "netns", "exec", "lg-mobile", "iperf3", "-c", testbed.BASE_IP,
                 "-p", str(testbed.IPERF_PORT), "-u", "-l", "1400", "-b", str(int(self.rate_bps)),
                 "--bidir", "-t", str(self.run_s), "--connect-timeout", "3000", "-J"],
                stdout=f, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def carried_s(self) -> float:
        """Seconds of the runs so far in which data came back (the reverse direction's
        intervals with something received): how long the load really ran."""
        total = 0.0
        for n in range(1, len(self.runs) + 2):
            path = self.out / f"iperf3-{n:03d}.json"
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                for iv in json.loads(path.read_text(errors="replace"))["intervals"]:
                    back = iv.get("sum_bidir_reverse") or {}
                    if back.get("bits_per_second", 0) > 0:
                        total += back.get("seconds", 0.0)
        return total

    def stop(self) -> dict[str, Any]:
        for proc in (self.iperf, self.ping):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        if self.iperf is not None:
            self.iperf.wait(timeout=30)
            self.runs.append(_run_result(self._json().read_text(errors="replace")))
        out = self.ping.communicate(timeout=10)[0]
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        rtt = re.search(r"= [0-9.]+/([0-9.]+)/([0-9.]+)/", out)
        return {"ping_sent": int(m.group(1)) if m else None,
                "ping_answered": int(m.group(2)) if m else None,
                "ping_avg_ms": float(rtt.group(1)) if rtt else None}  # fmt: skip


def _run_result(out: str) -> dict[str, Any]:
    """Each direction's received rate: sent × (1 − lost) (iperf3 3.12's --bidir JSON gives both
    "sum_received" entries the same figure)."""
    try:
        end = json.loads(out)["end"]
        up, down = end["sum"], end["sum_bidir_reverse"]
        return {
            "up_bps": up["bits_per_second"] * (1 - up["lost_percent"] / 100),
            "down_bps": down["bits_per_second"] * (1 - down["lost_percent"] / 100),
            "seconds": up["seconds"],
        }
    except (ValueError, KeyError, TypeError):
        return {"error": out.strip()[-300:]}


def trend(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per process: RSS and descriptors at the first sample after warm-up and at the last, the
    growth, and the pids it had (more than one: it was started again)."""
    out: dict[str, dict[str, Any]] = {}
    warm = [s for s in samples if s["minute"] >= WARM_MIN] or samples
    names = sorted({n for s in samples for n in s["procs"]})
    for name in names:
        seen = [s["procs"][name] for s in warm if name in s["procs"]]
        pids = sorted({s["procs"][name]["pid"] for s in samples if name in s["procs"]})
        if name.endswith("-test") and seen:  # a new process each test: its last one's trend
            seen = [u for u in seen if u["pid"] == seen[-1]["pid"]]
        if not seen:
            continue
        first, last = seen[0], seen[-1]
        out[name] = {
            "pids": pids,
            "rss_first_kib": first["rss_kib"], "rss_last_kib": last["rss_kib"],
            "rss_growth_kib": last["rss_kib"] - first["rss_kib"],
            "rss_max_kib": max(u["rss_kib"] for u in seen),
            "fds_first": first["fds"], "fds_last": last["fds"],
            "fds_max": max(u["fds"] for u in seen),
            "cpu_median": sorted(u["cpu"] for u in seen)[len(seen) // 2],
        }  # fmt: skip
    return out


def plot(samples: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for s in samples for n in s["procs"]})
    fig, axes = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    for name in names:
        pts = [(s["minute"], s["procs"][name]) for s in samples if name in s["procs"]]
        xs = [m for m, _ in pts]
        axes[0].plot(xs, [u["rss_kib"] / 1024 for _, u in pts], marker=".", label=name)
        axes[1].plot(xs, [u["fds"] for _, u in pts], marker=".", label=name)
        axes[2].plot(xs, [u["cpu"] * 100 for _, u in pts], marker=".", label=name)
    axes[0].set_ylabel("RSS (MiB)")
    axes[1].set_ylabel("open descriptors")
    axes[2].set_ylabel("CPU over the minute (%)")
    axes[2].set_xlabel("minutes at saturation")
    axes[0].legend(fontsize="small", ncol=3)
    axes[0].set_title(title)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def soak(minutes: float, mode: str, out: Path) -> dict[str, Any]:
    opts = RadioOptions(mode=mode)
    capacity = udp_goodput_both_ways_bps(opts, 1400, OVERHEAD)
    results = ResultsDir(out)
    testbed.up(testbed.TestbedSpec(opts))
    samples: list[dict[str, Any]] = []
    load = Load(LOAD_RATIO * capacity, out)
    try:
        start = time.monotonic()
        last: dict[str, tuple[int, int, float]] = {}
        minute = 0
        while True:
            now = time.monotonic()
            procs: dict[str, Any] = {}
            for name, pid in processes().items():
                u = usage(pid)
                if u is None:
                    continue
                before = last.get(name)
                cpu = (
                    (u["ticks"] - before[1]) / TICKS / (now - before[2])
                    if before and before[0] == pid
                    else 0.0
                )
                last[name] = (pid, u["ticks"], now)
                procs[name] = {"pid": pid, **u, "cpu": round(cpu, 4)}
            sample = {"minute": minute, "t": round(now - start, 1), "procs": procs}
            samples.append(sample)
            with open(out / "samples.jsonl", "a") as f:
                f.write(json.dumps(sample) + "\n")
            print(f"minute {minute}: " + ", ".join(
                f"{n} {p['rss_kib'] // 1024}M/{p['fds']}fd/{p['cpu'] * 100:.0f}%"
                for n, p in sorted(procs.items())), flush=True)  # fmt: skip
            if minute >= minutes:
                break
            minute += 1
            while time.monotonic() < start + minute * SAMPLE_EVERY_S:
                load.poll()
                time.sleep(1.0)
        ping = load.stop()
    finally:
        if load.iperf is not None and load.iperf.poll() is None:
            load.iperf.kill()
        if load.ping.poll() is None:
            load.ping.kill()
        testbed.down()
    per_proc = trend(samples)
    # (the last run, stopped early, has no result from the far end: not counted)
    carried = [r for r in load.runs if "up_bps" in r and r["seconds"] >= RUN_S - 5]
    summary = {
        "mode": mode, "minutes": minutes, "capacity_bps": capacity,
        "offered_bps_each_way": LOAD_RATIO * capacity,
        "runs": load.runs, **ping,
        "up_ratio": [round(r["up_bps"] / capacity, 3) for r in carried],
        "down_ratio": [round(r["down_bps"] / capacity, 3) for r in carried],
        "processes": per_proc,
        "worst_rss_growth_kib": max((p["rss_growth_kib"] for p in per_proc.values()), default=0),
        "fds_flat": all(p["fds_first"] == p["fds_last"] for p in per_proc.values()),
    }  # fmt: skip
    results.write_json("summary.json", summary)
    plot(samples, out / "soak.png", f"soak, {mode}, {minutes:g} min at {LOAD_RATIO}× capacity")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("minutes", type=float)
    ap.add_argument("--mode", default="esb", choices=("esb", "stream"))
    ap.add_argument("--out", type=Path, default=None)
    ns = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (the testbed)", file=sys.stderr)
        return 2
    out = ns.out or default_dir(f"soak-{ns.mode}")
    s = soak(ns.minutes, ns.mode, out)
    print(f"\n{out}: {s['minutes']:g} min, {ns.mode}; carried per run, up {s['up_ratio']}, "
          f"down {s['down_ratio']} of the model's {s['capacity_bps'] / 1e3:.1f} kbit/s; "
          f"ping {s['ping_answered']}/{s['ping_sent']} answered, "
          f"mean {s['ping_avg_ms']} ms")  # fmt: skip
    print(f"{'process':<22} {'pids':>5} {'RSS first→last KiB':>22} {'growth':>8} "
          f"{'fds first→last (max)':>22} {'CPU med':>8}")  # fmt: skip
    for name, p in s["processes"].items():
        print(f"{name:<22} {len(p['pids']):>5} {p['rss_first_kib']:>10}→{p['rss_last_kib']:<10} "
              f"{p['rss_growth_kib']:>+8} {p['fds_first']:>9}→{p['fds_last']:<5}({p['fds_max']})"
              f"      {p['cpu_median'] * 100:>5.1f}%")  # fmt: skip
    ok = s["worst_rss_growth_kib"] <= RSS_GROWTH_KIB and s["fds_flat"]
    print(
        f"worst RSS growth {s['worst_rss_growth_kib']} KiB (target ≤ {RSS_GROWTH_KIB}); "
        f"descriptors {'flat' if s['fds_flat'] else 'NOT flat'}: {'ok' if ok else 'FAILS'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
