"""The fault matrix (issue 44): each kind of testbed process killed outright, a daemon
restarted, a USB modem unplugged and plugged in again, the state folder made read-only, the
clock stepped, each under a ping, and how the link comes back. Run by hand, as root:

    .venv/bin/python -m tools.faults [--modes esb,stream] [--only tx,rx,daemon,...]
    .venv/bin/python -m tools.faults --soak MINUTES [--mode esb]   (the long soak: tools/soak.py)

For each link mode: the testbed up (secured, 2 Mbit/s), under load (stock iperf3 from
lg-mobile, UDP 1400-byte datagrams both ways at once, each way LOAD_RATIO of the model's
capacity, in runs of LOAD_RUN_S back to back: a run a fault breaks is followed by the next),
a ping from lg-mobile to the base at 20 per second beside it, then one after another, each
once the link carries pings again:

- tx, rx:    the mobile's TX / RX radio process (its daemon starts it again: child.py)
- daemon:    the mobile's daemon, supervisor and radio processes (the keeper: keeper.py)
- peer:      the base's daemon (the keeper)
- air:       the emulated air (the keeper; the radios attach again by themselves)
- servers:   the measurement servers (the keeper; "back" is the iperf3 server listening again)
- restart:   the mobile's daemon stopped cleanly (SIGTERM, as systemd's restart does; the keeper
             starts it again)
- modem-tx, modem-rx: (a testbed of its own with --serial) the mobile's TX / RX USB modem
             unplugged for UNPLUG_S (its process killed, the keeper held) and plugged in again
             (a new modem process, a new pty); "back" counts from the replug
- statedir:  the mobile's state folder made read-only (a read-only bind mount in the daemon's
             mount namespace) for HOLD_S: the link must stay up; then, still read-only, its TX
             radio process killed: the new one cannot record a new nonce epoch, so it must not
             send (the link stops, the log names the folder); the folder writable again: "back"
             counts from then. The base's receivers must drop nothing as stale or replayed
             (a nonce used twice would be)
- clock+, clock-: the machine's wall clock stepped by +1 h / -1 h for HOLD_S, then back (the
             link uses monotonic time: it must lose no more than 1 s of pings)

Per fault: the time from the kill to the first ping answered that was sent after it (servers:
to the log's "iperf3 server on port"), the pings lost between, answers with damaged data
(ping says "wrong data"; must be 0), and afterwards every process of the testbed alive, with
the daemons' RSS and open descriptors before and after. Targets (issue 44): a radio process
≤ 1.2 s, the air ≤ 3 s, the servers ≤ 3 s, a daemon ≤ the keeper's wait (0.5 s) + 2 s, the
modem ≤ 2 s after the replug, a clock step ≤ 1 s of pings lost.
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
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longge import testbed
from longge.daemon.status import DaemonClient
from longge.keeper import running
from longge.measure.model import udp_goodput_both_ways_bps
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions
from longge.testbed_spec import Modem
from tools.soak import Load, children, usage

PING_EVERY_S = 0.05
SETTLE_S = 2.0  # pings answered in a row before the next fault
GIVE_UP_S = 30.0
TARGETS_S = {"tx": 1.2, "rx": 1.2, "daemon": 2.5, "peer": 2.5, "air": 3.0, "servers": 3.0,
             "restart": 2.5, "modem-tx": 2.0, "modem-rx": 2.0, "statedir": 2.5,
             "clock+": 1.0, "clock-": 1.0}  # fmt: skip
KILLED = ("tx", "rx", "daemon", "peer", "air", "servers", "restart")
SERIAL = ("modem-tx", "modem-rx")
LOAD_RATIO = 0.5
LOAD_RUN_S = 20
UNPLUG_S = 3.0
HOLD_S = 10.0
CLOCK_STEP_S = 3600.0


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


def _victim(kind: str) -> int:
    pids = _state()["pids"]
    if kind in ("tx", "rx"):
        found = children(pids["mobile"], f"longge-{kind}")
        if not found:
            raise RuntimeError(f"no {kind} radio process under the mobile's daemon")
        return found[0]
    return int(pids[{"daemon": "mobile", "peer": "base"}.get(kind, kind)])


def _usage(pid: int) -> tuple[int, int]:
    """(RSS KiB, open descriptors) of ``pid`` and its radio processes together."""
    procs = [pid, *children(pid, "longge-tx"), *children(pid, "longge-rx")]
    found = [u for u in map(usage, procs) if u is not None]
    return sum(u["rss_kib"] for u in found), sum(u["fds"] for u in found)


def _wait_back(pinger: Pinger, since: float) -> tuple[float | None, int]:
    """Wait until the pings have come back and settled after ``since`` (or GIVE_UP_S): (the
    time back, s after ``since``; pings lost)."""
    back: float | None = None
    lost = 0
    deadline = time.monotonic() + GIVE_UP_S
    while time.monotonic() < deadline:
        time.sleep(0.1)
        back, lost, settled = pinger.outage(since)
        if settled:
            break
    return back, lost


def _row(kind: str, back: float | None, lost: int, **more: Any) -> dict[str, Any]:
    return {"kind": kind, "back_s": back, "lost": lost, "target_s": TARGETS_S[kind], **more}


def fault(pinger: Pinger, kind: str) -> dict[str, Any]:
    """A process killed (kill -9; ``restart``: SIGTERM to the mobile's daemon, a clean stop)."""
    log = testbed.STATE_DIR / "servers.log"
    since = log.stat().st_size
    victim = _victim("daemon" if kind == "restart" else kind)
    killed = time.time()
    os.kill(victim, signal.SIGTERM if kind == "restart" else signal.SIGKILL)
    back: float | None = None
    lost = 0
    if kind == "servers":  # back: listening again (said in its log)
        deadline = time.monotonic() + GIVE_UP_S
        while time.monotonic() < deadline and back is None:
            time.sleep(0.05)
            if b"iperf3 server on port" in log.read_bytes()[since:]:
                back = time.time() - killed
        time.sleep(SETTLE_S)
        lost = pinger.outage(killed)[1]
    else:
        back, lost = _wait_back(pinger, killed)
    deadline = time.monotonic() + 5  # (a clean stop takes its time)
    while running(victim) and time.monotonic() < deadline:
        time.sleep(0.05)
    if running(victim):
        raise RuntimeError(f"{kind}: pid {victim} still runs after the signal")
    return _row(kind, back, lost, victim=victim)


def unplug(pinger: Pinger, kind: str) -> dict[str, Any]:
    """A USB modem unplugged for UNPLUG_S and plugged in again: its process killed while the
    keeper is held (SIGSTOP), then the keeper let go: it starts a new modem process, which makes
    a new pty; back counts from the moment the new pty is there (the replug)."""
    modem = Modem("mobile", kind.split("-")[1])
    name, link = modem.process, modem.pty
    keeper = int(_state()["keeper"])
    old = int(_state()["pids"][name])
    os.kill(keeper, signal.SIGSTOP)
    try:
        os.kill(old, signal.SIGKILL)
        time.sleep(UNPLUG_S)
    finally:
        os.kill(keeper, signal.SIGCONT)
    replugged: float | None = None
    deadline = time.monotonic() + GIVE_UP_S
    while time.monotonic() < deadline:
        time.sleep(0.01)
        pid = int(_state()["pids"][name])
        with contextlib.suppress(OSError):
            if pid != old and link.resolve(strict=True) and link.lstat().st_mtime > time.time() - 5:
                replugged = time.time()
                break
    if replugged is None:
        return _row(kind, None, 0, error="the modem did not come back")
    back, lost = _wait_back(pinger, replugged)
    row = _row(kind, back, lost, unplugged_s=UNPLUG_S)
    if back is None:  # (what the mobile said last, and the modem: the testbed's logs go with it)
        for log in ("mobile.log", f"{name}.log"):
            text = (testbed.STATE_DIR / log).read_text(errors="replace").splitlines()
            row[log] = text[-8:]
    return row


def _security_drops() -> dict[str, int]:
    """The base's receivers' security drops (stale, replayed, auth, ...)."""
    rx = DaemonClient(str(testbed.node_socket("base"))).status().raw.get("rx") or {}
    return dict((rx.get("security") or {}).get("drops") or {})


def _in_mount_ns(pid: int, *cmd: str) -> None:
    subprocess.run(["nsenter", "-t", str(pid), "-m", "--", *cmd], check=True)


def read_only_state(pinger: Pinger) -> dict[str, Any]:
    """The mobile's state folder read-only: the link stays up while it is; a TX radio process
    started meanwhile cannot record a new epoch and must not send; writable again: back."""
    folder = testbed.STATE_DIR / "security"
    daemon = int(_state()["pids"]["mobile"])
    epochs = {f.name: f.read_text() for f in folder.glob("*.tx-epoch")}
    drops = _security_drops()
    _in_mount_ns(daemon, "mount", "--bind", str(folder), str(folder))
    _in_mount_ns(daemon, "mount", "-o", "remount,bind,ro", str(folder))
    locked = time.time()
    try:
        time.sleep(HOLD_S)
        _, lost_while_up, _ = pinger.outage(locked)
        os.kill(_victim("tx"), signal.SIGKILL)
        time.sleep(UNPLUG_S)
        cut = time.time()
        time.sleep(1.0)
        answered_while_unable = [q for q, sent in pinger.answered.items() if sent >= cut]
        log = (testbed.STATE_DIR / "mobile.log").read_text(errors="replace")
        named = str(folder) in log[-20000:]
    finally:
        _in_mount_ns(daemon, "umount", str(folder))
    unlocked = time.time()
    back, lost = _wait_back(pinger, unlocked)
    after = _security_drops()
    grew = {k: after.get(k, 0) - drops.get(k, 0) for k in after if after[k] != drops.get(k, 0)}
    changed = {f.name: f.read_text() for f in folder.glob("*.tx-epoch")} != epochs
    return _row("statedir", back, lost, lost_while_read_only=lost_while_up,
                answered_while_tx_could_not_seal=len(answered_while_unable),
                log_names_folder=named, base_security_drops=grew,
                epoch_recorded_after=changed)  # fmt: skip


def step_clock(pinger: Pinger, kind: str) -> dict[str, Any]:
    """The wall clock stepped by ±CLOCK_STEP_S for HOLD_S, then back. ping's own timestamps
    step too, so the cost is counted in sequence numbers: the pings lost from the step to
    SETTLE_S after the step back, as time (× the ping interval)."""
    step = CLOCK_STEP_S if kind == "clock+" else -CLOCK_STEP_S
    first = max(pinger.answered, default=0)
    started = time.time()
    time.clock_settime(time.CLOCK_REALTIME, time.time() + step)
    try:
        time.sleep(HOLD_S)
    finally:
        time.clock_settime(time.CLOCK_REALTIME, time.time() - step)
    time.sleep(2 * SETTLE_S)
    answered = set(pinger.answered)
    last = max(answered, default=0) - int(1.0 / PING_EVERY_S)  # (the newest may be on the way)
    lost = sum(1 for q in range(first + 1, last) if q not in answered)
    for q, sent in list(pinger.answered.items()):  # (stamped by the stepped clock: not judged)
        if abs(sent - started) > CLOCK_STEP_S / 2:
            del pinger.answered[q], pinger.replied[q]
    return _row(kind, lost * PING_EVERY_S, lost, pings_judged=max(0, last - first - 1))


def alive() -> list[str]:
    st = _state()
    return [n for n, pid in st["pids"].items() if not running(int(pid))]


def one(pinger: Pinger, kind: str) -> dict[str, Any]:
    if kind in SERIAL:
        return unplug(pinger, kind)
    if kind == "statedir":
        return read_only_state(pinger)
    if kind.startswith("clock"):
        return step_clock(pinger, kind)
    return fault(pinger, kind)


def mode_round(mode: str, kinds: list[str], serial: bool = False) -> list[dict[str, Any]]:
    spec = testbed.TestbedSpec(RadioOptions(mode=mode), serial=serial)
    testbed.up(spec)
    rows = []
    pinger = Pinger()
    capacity = udp_goodput_both_ways_bps(spec.options, 1400, OVERHEAD)
    load = Load(LOAD_RATIO * capacity, Path(tempfile.mkdtemp(prefix="longge-faults-")), LOAD_RUN_S)
    stop_load = threading.Event()

    def keep_loading() -> None:
        while not stop_load.wait(0.5):
            load.poll()

    loader = threading.Thread(target=keep_loading, daemon=True)
    began = time.monotonic()
    try:
        pinger.start()
        loader.start()
        time.sleep(SETTLE_S)
        before = {n: _usage(int(_state()["pids"][n])) for n in ("mobile", "base")}
        for kind in kinds:
            row = one(pinger, kind)
            row["mode"] = mode + ("+serial" if serial else "")
            rows.append(row)
            print(json.dumps(row), flush=True)
        after = {n: _usage(int(_state()["pids"][n])) for n in ("mobile", "base")}
        rows.append({"mode": rows[-1]["mode"], "wrong": pinger.wrong, "dead": alive(),
                     "usage_before": before, "usage_after": after})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    finally:
        stop_load.set()
        loader.join(5)
        load.stop()
        pinger.stop()
        testbed.down()
    if rows:  # how long the load ran (data came back) of the round's time
        rows[-1]["load_s"] = f"{load.carried_s():.0f} of {time.monotonic() - began:.0f} s"
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="esb,stream")
    ap.add_argument("--only", default=",".join(TARGETS_S))
    ap.add_argument("--soak", type=float, metavar="MINUTES", help="the long soak instead")
    ap.add_argument("--mode", default="esb", choices=("esb", "stream"), help="the soak's")
    ns = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (the testbed)", file=sys.stderr)
        return 2
    if ns.soak is not None:
        from tools import soak

        return soak.main([str(ns.soak), "--mode", ns.mode])
    kinds = ns.only.split(",")
    unknown = set(kinds) - set(TARGETS_S)
    if unknown:
        print(f"--only: unknown {sorted(unknown)}; choose from {sorted(TARGETS_S)}")
        return 2
    plain = [k for k in TARGETS_S if k in kinds and k not in SERIAL]  # (the clock's last)
    on_modems = [k for k in SERIAL if k in kinds]
    rows = []
    for mode in ns.modes.split(","):
        if plain:
            rows += mode_round(mode, plain)
        if on_modems:
            rows += mode_round(mode, on_modems, serial=True)
    print("\nmode           fault     back (s)  target   lost pings")
    for r in rows:
        if "kind" in r:
            back = r["back_s"]
            shown = "never" if back is None else f"{back:.2f}"
            shown_apart = ("kind", "back_s", "lost", "target_s", "mode", "victim")
            extra = {k: v for k, v in r.items() if k not in shown_apart}
            print(f"{r['mode']:<14} {r['kind']:<9} {shown:>8}  {r['target_s']:>6}  {r['lost']:>6}"
                  + (f"  {extra}" if extra else ""))  # fmt: skip
        else:
            print(
                f"{r['mode']:<14} load {r.get('load_s')}; wrong answers {r['wrong']}, "
                f"dead {r['dead'] or 'none'}; daemons "
                f"(RSS KiB, fds) before {r['usage_before']} after {r['usage_after']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
