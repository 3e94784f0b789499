"""The testbed's keeper: starts the testbed's processes and starts again each one that dies.

``testbed up`` records every process it started (its command, log and extra environment) in
the testbed's state file and then runs ``python -m longge.keeper STATE_FILE`` beside them: it
looks every 0.2 s, and a process that is gone (killed, crashed) is started again with the same
command, its restarts counted in the state file (``testbed status`` shows them). A process
that dies again within a few seconds of its start waits longer each time before the next
try (0.5 s doubling to 8 s), so one that cannot run (its config refused) is not started 5
times a second. The emulated air coming back is enough for the radios: their processes find
the air gone and attach again (``daemon/child.py``, ``ensure_radio``); a daemon coming back
sets its node up again (its TUN, its routes, the base's NAT). ``testbed down`` stops the keeper
first, then the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LOOK_EVERY_S = 0.2
FIRST_WAIT_S = 0.5
LONGEST_WAIT_S = 8.0
#: A process that lived this long before it died is restarted after FIRST_WAIT_S again.
STEADY_S = 5.0


def spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> int:
    """Start ``args`` in a session of its own, output appended to ``log``, with ``env`` added
    to this process's environment; its pid."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **env} if env else None,
        )
    return proc.pid


def running(pid: int) -> bool:
    """Alive (not gone, not a zombie): /proc says, whoever the parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def write_state(path: Path, state: dict[str, Any]) -> None:
    """The state file replaced whole (a reader never sees half of it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)


class Keeper:
    def __init__(self, state_path: Path) -> None:
        self.path = state_path
        self.state: dict[str, Any] = json.loads(state_path.read_text())
        self.state.setdefault("restarts", {})
        now = time.monotonic()
        self.started = {name: now for name in self.state.get("procs", {})}
        self.wait = dict.fromkeys(self.started, FIRST_WAIT_S)
        self.died_at: dict[str, float] = {}
        self.watching = True  # (until SIGTERM)
        self.state["keeper"] = os.getpid()  # (testbed up waits for this; down stops it first)
        write_state(state_path, self.state)

    def look(self, now: float) -> None:
        with contextlib.suppress(ChildProcessError):  # (reap what it started and lost)
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        changed = False
        for name, proc in self.state.get("procs", {}).items():
            pid = self.state["pids"].get(name)
            if pid is not None and running(pid):
                continue
            if name not in self.died_at:
                self.died_at[name] = now
                lived = now - self.started[name]
                self.wait[name] = (
                    FIRST_WAIT_S if lived >= STEADY_S else min(LONGEST_WAIT_S, 2 * self.wait[name])
                )
                print(f"keeper: {name} (pid {pid}) is gone after {lived:.1f} s", flush=True)
            if now - self.died_at[name] < self.wait[name]:
                continue
            new = spawn(proc["args"], Path(proc["log"]), proc.get("env"))
            print(f"keeper: {name} started again (pid {new})", flush=True)
            self.state["pids"][name] = new
            self.state["restarts"][name] = self.state["restarts"].get(name, 0) + 1
            self.started[name] = now
            del self.died_at[name]
            changed = True
        if changed:
            write_state(self.path, self.state)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "watching", False))
        signal.signal(signal.SIGINT, lambda *_: setattr(self, "watching", False))
        print(f"keeper: watching {', '.join(self.state.get('procs', {}))}", flush=True)
        while self.watching:
            self.look(time.monotonic())
            time.sleep(LOOK_EVERY_S)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m longge.keeper STATE_FILE", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        Keeper(Path(argv[0])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
