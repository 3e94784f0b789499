"""The fault matrix (issue 44), first part: each kind of testbed process killed outright under a
ping, and how the link comes back. Run by hand, as root:

    .venv/bin/python -m tools.faults [--modes esb,stream] [--only tx,rx,daemon,peer,air,servers]

For each link mode: the testbed up (secured, 2 Mbit/s), a ping from lg-mobile to the base at
20 per second, then one after another, each once the link carries pings again:

- tx, rx:    the mobile's TX / RX radio process (its daemon starts it again: child.py)
- daemon:    the mobile's daemon, supervisor and radio processes (the keeper: keeper.py)
- peer:      the base's daemon (the keeper)
- air:       the emulated air (the keeper; the radios attach again by themselves)
- servers:   the measurement servers (the keeper; "back" is the iperf3 server listening again)

Per fault: the time from the kill to the first ping answered that was sent after it (servers:
to the log's "iperf3 server on port"), the pings lost between, answers with damaged data
(ping says "wrong data"; must be 0), and afterwards every process of the testbed alive, with
the daemons' RSS and open descriptors before and after. Targets (issue 44): a radio process
≤ 1.2 s, the air ≤ 3 s, the servers ≤ 3 s, a daemon ≤ the keeper's wait (0.5 s) + 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longge import testbed
from longge.keeper import running
from longge.radio.options import RadioOptions

PING_EVERY_S = 0.05
SETTLE_S = 2.0  # pings answered in a row before the next fault
GIVE_UP_S = 30.0
TARGETS_S = {"tx": 1.2, "rx": 1.2, "daemon": 2.5, "peer": 2.5, "air": 3.0, "servers": 3.0}


@dataclass
class Pinger:
    """``ping -D -O`` at 20/s from lg-mobile: when each sequence number was answered (local
    time of the answer), and answers with damaged data."""

    answered: dict[int, float] = field(default_factory=dict)  # seq -> when sent (answer - RTT)
    replied: dict[int, float] = field(default_factory=dict)  # seq -> when answered
    wrong: int = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", "lg-mobile", "ping", "-D", "-O", "-n", "-W", "1",
             "-i", str(PING_EVERY_S), testbed.BASE_IP],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = re.search(r"^\[([0-9.]+)\].*icmp_seq=(\d+).*time=([0-9.]+) ms", line)
            if "wrong data" in line:
                self.wrong += 1
            if m and "bytes from" in line:
                at, seq, rtt_ms = float(m.group(1)), int(m.group(2)), float(m.group(3))
                self.answered[seq] = at - rtt_ms / 1000
                self.replied[seq] = at

    def outage(self, since: float) -> tuple[float | None, int, bool]:
        """For a fault at ``since``: (when the link came back, s after the fault: when the
        first ping sent after it, and after the last one lost, was answered; the pings lost
        since the last one answered that was sent before the fault; settled: the pings of
        SETTLE_S after its return were all answered)."""
        answered = dict(self.answered)
        last_before = max((q for q, sent in answered.items() if sent < since), default=0)
        newest = max(answered, default=0)
        # (the newest pings may still be on their way: judged once a later one is answered)
        lost = [q for q in range(last_before + 1, newest) if q not in answered]
        after = [(sent, q) for q, sent in answered.items() if sent >= since]
        if lost:
            after = [(sent, q) for q, sent in answered.items() if q > lost[-1]]
        if not after:
            return None, len(lost), False
        sent, first = min(after)
        back = self.replied[first] - since
        return back, len(lost), answered[newest] - sent >= SETTLE_S

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(5)


def _state() -> dict[str, Any]:
    state: dict[str, Any] = json.loads(testbed.paths()["state"].read_text())
    return state


def _children(parent: int, comm: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name == comm and int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            out.append(int(entry.name))
    return out


def _victim(kind: str) -> int:
    pids = _state()["pids"]
    if kind in ("tx", "rx"):
        found = _children(pids["mobile"], f"longge-{kind}")
        if not found:
            raise RuntimeError(f"no {kind} radio process under the mobile's daemon")
        return found[0]
    return int(pids[{"daemon": "mobile", "peer": "base"}.get(kind, kind)])


def _usage(pid: int) -> tuple[int, int]:
    """(RSS KiB, open descriptors) of ``pid`` and its children together."""
    rss = fds = 0
    for p in [pid, *_children(pid, "longge-tx"), *_children(pid, "longge-rx")]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
            fds += len(os.listdir(f"/proc/{p}/fd"))
        except OSError:
            continue
        m = re.search(r"VmRSS:\s+(\d+)", status)
        rss += int(m.group(1)) if m else 0
    return rss, fds


def fault(pinger: Pinger, kind: str) -> dict[str, Any]:
    log = testbed.STATE_DIR / "servers.log"
    since = log.stat().st_size
    victim = _victim(kind)
    killed = time.time()
    os.kill(victim, signal.SIGKILL)
    back: float | None = None
    lost = 0
    deadline = time.monotonic() + GIVE_UP_S
    if kind == "servers":  # back: listening again (said in its log)
        while time.monotonic() < deadline and back is None:
            time.sleep(0.05)
            if b"iperf3 server on port" in log.read_bytes()[since:]:
                back = time.time() - killed
        time.sleep(SETTLE_S)
        lost = pinger.outage(killed)[1]
    else:
        while time.monotonic() < deadline:
            time.sleep(0.1)
            back, lost, settled = pinger.outage(killed)
            if settled:
                break
    if running(victim):
        raise RuntimeError(f"{kind}: pid {victim} still runs after kill -9")
    return {"kind": kind, "victim": victim, "back_s": back, "lost": lost,
            "target_s": TARGETS_S[kind]}  # fmt: skip


def alive() -> list[str]:
    st = _state()
    return [n for n, pid in st["pids"].items() if not running(int(pid))]


def mode_round(mode: str, kinds: list[str]) -> list[dict[str, Any]]:
    spec = testbed.TestbedSpec(RadioOptions(mode=mode))
    testbed.up(spec)
    rows = []
    pinger = Pinger()
    try:
        pinger.start()
        time.sleep(SETTLE_S)
        before = {n: _usage(int(_state()["pids"][n])) for n in ("mobile", "base")}
        for kind in kinds:
            row = fault(pinger, kind)
            row["mode"] = mode
            rows.append(row)
            print(json.dumps(row), flush=True)
        after = {n: _usage(int(_state()["pids"][n])) for n in ("mobile", "base")}
        rows.append({"mode": mode, "wrong": pinger.wrong, "dead": alive(),
                     "usage_before": before, "usage_after": after})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    finally:
        pinger.stop()
        testbed.down()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="esb,stream")
    ap.add_argument("--only", default="tx,rx,daemon,peer,air,servers")
    ns = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (the testbed)", file=sys.stderr)
        return 2
    kinds = ns.only.split(",")
    unknown = set(kinds) - set(TARGETS_S)
    if unknown:
        print(f"--only: unknown {sorted(unknown)}; choose from {sorted(TARGETS_S)}")
        return 2
    rows = [r for mode in ns.modes.split(",") for r in mode_round(mode, kinds)]
    print("\nmode    fault    back (s)  target   lost pings")
    for r in rows:
        if "kind" in r:
            back = r["back_s"]
            shown = "never" if back is None else f"{back:.2f}"
            print(f"{r['mode']:<7} {r['kind']:<8} {shown:>8}  {r['target_s']:>6}  {r['lost']:>6}")
        else:
            print(
                f"{r['mode']:<7} wrong answers {r['wrong']}, dead {r['dead'] or 'none'}; daemons "
                f"(RSS KiB, fds) before {r['usage_before']} after {r['usage_after']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
