"""The link daemon: one TUN interface, a TX and an RX radio process, a control socket.

    supervisor (this process)
      ├─ creates and configures the TUN interface, sets up the role (NAT / routes)
      ├─ radio_tx process   TUN -> fair queue -> frames -> TX radio   (radio_tx.py)
      ├─ radio_rx process   RX radio -> frames -> packets -> TUN      (radio_rx.py)
      └─ control socket     status, live radio settings                (control.py)

Each radio runs in its own process (pyrf24 holds the GIL in its blocking calls); both share
the TUN descriptor. A radio process that dies is reported and restarted; a peer that goes
silent shows as link "down" and comes back by itself when its keepalives do.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from longge import __version__
from longge.config import CHANNEL_KEYS, NodeConfig, check_live_types, with_live_options
from longge.daemon import control, keystate, radio_rx, radio_tx
from longge.errors import ConfigError
from longge.radio.options import LINK_KEYS
from longge.realtime import die_with_parent
from longge.roles import FORWARDING, Undo, setup_role
from longge.tun import LinuxTun, Tun, TunError, configure_link

_CTX = mp.get_context("fork")
#: A radio process that died is started again this long after (issue 44: back within 1.2 s).
RESTART_AFTER_S = 0.3
PEER_SILENT_S = 3.0
#: Radio settings that can change while the link runs (RadioOptions fields + channels). A
#: change of ``mode`` restarts the radio processes (see Supervisor.set_radio). Not ``agile``:
#: the RX process's part of it is made when the process starts (a daemon restarted with it).
LIVE_KEYS = {*LINK_KEYS, *CHANNEL_KEYS, "adapt"} - {"agile"}


#: What the RX process says (child.py) and what the TX process is told: the peer's sender is
#: stale (tell it the floor), the peer says ours is (seal past it).
FOR_THE_SENDER = {"stale": "tell_floor", "floor": "skip_past"}


class _Worker:
    def __init__(self, which: str, target: Callable[[NodeConfig, Tun, Connection], None]):
        self.which = which
        self.target = target
        self.proc: BaseProcess | None = None
        self.conn: Connection | None = None
        self.stats: dict[str, Any] = {}
        self.restarts = 0
        self.died_at: float | None = None
        self.last_exit: int | None = None


def _radio_process(
    target: Callable[[NodeConfig, Tun, Connection], None],
    inherited: list[Any],
    supervisor: int,
    cfg: NodeConfig,
    tun: Tun,
    conn: Connection,
) -> None:
    """A radio process's start: let go of what it inherited of the supervisor's, and die with
    the supervisor however it ends (killed too: ``daemon=True`` covers only a clean exit).
    Once a killed supervisor left both radio processes running, holding the radios and the TUN,
    until their stats filled the pipe nobody read and they hung."""
    for obj in inherited:
        with contextlib.suppress(OSError):
            os.close(obj) if isinstance(obj, int) else obj.close()
    # (not the supervisor's handler, forked: the process's Child sets its own, which stops the
    # loop and lets the radio go; until then SIGTERM ends it)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if not die_with_parent(supervisor, signal.SIGTERM):  # (gone already)
        return
    target(cfg, tun, conn)


class Supervisor:
    def __init__(self, cfg: NodeConfig, tun: Tun | None = None, network: bool = True) -> None:
        """``tun`` None: create the Linux TUN named in the config. ``network``: configure the
        interface and the role (needs root); tests pass a MemoryTun and network=False."""
        self.cfg = cfg
        self._tun = tun
        self._network = network
        self.tun: Tun | None = None
        self.workers = self._workers(cfg)
        self.started = time.monotonic()
        self._undo: list[Undo] = []
        self._stop = False
        #: why a radio process stopped the daemon (the TUN interface gone), raised by run()
        self.error: str | None = None
        self._control: control.ControlServer | None = None
        self.mode_changes = 0

    @staticmethod
    def _workers(cfg: NodeConfig) -> list[_Worker]:
        # The RX process hands the TX process what the peers' packets said for it: stream
        # mode's ACKs (stream_rx.py), the uplink's grants and releases (receiving.py); the
        # pair outlives either process, so a restarted one finds it again
        to_tx, from_rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for end in (to_tx, from_rx):
            end.setblocking(False)
        return [
            _Worker("tx", functools.partial(radio_tx.run, pair=from_rx)),
            _Worker("rx", functools.partial(radio_rx.run, pair=to_tx)),
        ]

    # -- life cycle --------------------------------------------------------------------------

    def request_stop(self, *_: object) -> None:
        self._stop = True

    def start(self) -> None:
        cfg = self.cfg
        if not cfg.secured:  # at every start: an open link is a choice to be reminded of
            print(
                "longge: WARNING: insecure = true: the link is open; any nRF24 radio on its "
                "channel and address can inject packets"
                + (" and reach the uplink through this base" if cfg.role == "base" else ""),
                file=sys.stderr,
                flush=True,
            )
        if cfg.secured:
            keystate.check(cfg)  # before a radio process would die on it, again and again
        self.tun = self._tun if self._tun is not None else LinuxTun(cfg.tun, cfg.mtu)
        if self._network:
            configure_link(self.tun.name, cfg.address, cfg.mtu, cfg.txqueuelen)
            self._undo = setup_role(cfg)
        for w in self.workers:
            self._spawn(w)
        self._control = control.ControlServer(cfg.control, self.handle_request)

    def _spawn(self, w: _Worker) -> None:
        parent, child = _CTX.Pipe()
        assert self.tun is not None
        # what the forked process would hold of ours: the supervisor's ends of the pipes (its
        # own too, or a dead supervisor never reads as EOF there), the control socket
        inherited: list[Any] = [parent, *(o.conn for o in self.workers if o.conn is not None)]
        # (and the radio processes' sentinels, descriptors: the other's, and this one's dead
        # predecessor's; each started again held one more)
        inherited += [o.proc.sentinel for o in self.workers if o.proc is not None]
        if self._control is not None:
            inherited += [self._control.sock, *self._control.clients]
        proc = _CTX.Process(
            target=_radio_process,
            args=(w.target, inherited, os.getpid(), self.cfg, self.tun, child),
            name=f"longge-{w.which}",
            daemon=True,  # never outlive the supervisor
        )
        proc.start()  # (kept only once started: a failed fork leaves nothing to join)
        old, old_conn = w.proc, w.conn
        w.proc = proc
        child.close()
        w.conn = parent
        if old is not None:  # (dead and joined: its sentinel and pipe let go of here too)
            with contextlib.suppress(ValueError, OSError):
                old.close()
            if old_conn is not None:
                old_conn.close()
        w.died_at = None

    def run(self) -> None:
        """Serve until SIGTERM/SIGINT or :meth:`request_stop`; TunError once a radio process
        found the interface gone."""
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        try:
            # (inside: a start that fails half-way, e.g. on a control socket it cannot make,
            # undoes what it did: the role's NAT rule, the radio processes; a caller may have
            # started it already)
            if self._control is None:
                self.start()
            while not self._stop:
                self.step(0.5)
        finally:
            self.shutdown()
        if self.error is not None:
            raise TunError(self.error)

    def step(self, timeout: float) -> None:
        if self._control is None:  # not started, or shut down
            time.sleep(timeout)
            return
        waitables: list[Any] = list(self._control.waitables())
        for w in self.workers:
            if w.proc is not None and w.died_at is None:
                waitables += [w.conn, w.proc.sentinel]
        try:
            ready, _, _ = select.select(waitables, [], [], timeout)
        except InterruptedError:
            return
        now = time.monotonic()
        for w in self.workers:
            self._service_worker(w, ready, now)
        self._control.service(ready)

    def _service_worker(self, w: _Worker, ready: list[Any], now: float) -> None:
        if w.died_at is None and w.conn is not None and w.conn in ready:
            with contextlib.suppress(EOFError, OSError):
                while w.conn.poll():
                    kind, payload = w.conn.recv()
                    if kind == "stats":
                        w.stats = payload
                    elif kind == "fatal":  # (Child.fail) the daemon cannot go on
                        self.error = str(payload)
                        self._stop = True
                    elif kind in FOR_THE_SENDER:  # (the RX process's news for the TX one)
                        self._to_sender((FOR_THE_SENDER[kind], payload))
        if w.died_at is None and w.proc is not None and not w.proc.is_alive():
            w.proc.join(0)
            w.last_exit = w.proc.exitcode
            w.died_at = now
            w.stats["state"] = f"process died (exit {w.last_exit}); restarting"
        if w.died_at is not None and now - w.died_at >= RESTART_AFTER_S and not self._stop:
            w.restarts += 1
            self._spawn(w)

    def _to_sender(self, message: tuple[str, Any]) -> None:
        for w in self.workers:
            if w.which == "tx" and w.conn is not None and w.died_at is None:
                with contextlib.suppress(OSError):
                    w.conn.send(message)

    def _stop_workers(self) -> None:
        for w in self.workers:
            if w.conn is not None:
                with contextlib.suppress(OSError):
                    w.conn.send(("stop", None))
        for w in self.workers:
            if w.proc is not None:
                w.proc.join(2)
                if w.proc.is_alive():
                    w.proc.terminate()
                    w.proc.join(2)
                if w.proc.is_alive():
                    w.proc.kill()
                    w.proc.join(2)

    def _switch_mode(self, cfg: NodeConfig) -> None:
        """A new link mode: the radio processes and their frame format change with it, so the
        running ones stop (their queues and ARQ state go with them) and new ones start with
        ``cfg``. The peer must switch too: until it does, the two ends do not understand each
        other's frames, and the link carries nothing (every frame is refused, none delivered
        wrong: the reassembler checks each packet)."""
        self._stop_workers()
        self.cfg = cfg
        self.workers = self._workers(cfg)
        self.mode_changes += 1
        for w in self.workers:
            self._spawn(w)

    def shutdown(self) -> None:
        self._stop_workers()
        if self._control is not None:
            self._control.close()
            self._control = None
        undos, self._undo = self._undo, []  # (once: a second shutdown undoes nothing again)
        for undo in reversed(undos):
            with contextlib.suppress(Exception):
                undo()
        if self.tun is not None:
            self.tun.close()
            self.tun = None

    # -- control -----------------------------------------------------------------------------

    def handle_request(self, req: dict[str, Any]) -> dict[str, Any]:
        cmd = req.get("cmd")
        if cmd == "status":
            return self.status()
        if cmd == "set":
            return self.set_radio(req.get("options", {}))
        return {"error": f"unknown command {cmd!r}: status or set"}

    def set_radio(self, options: object) -> dict[str, Any]:
        if isinstance(options, dict) and set(options) - LIVE_KEYS:
            unknown = sorted(set(options) - LIVE_KEYS)
            return {"error": f"cannot set {unknown} live; settable: {sorted(LIVE_KEYS)}"}
        try:
            if not isinstance(options, dict):
                raise ConfigError("options", options, "an object of radio settings")
            options = check_live_types(options)
            new_cfg = with_live_options(self.cfg, options)
        except ConfigError as exc:
            return {"error": str(exc), "key": exc.key}
        if new_cfg.radio.mode != self.cfg.radio.mode:
            self._switch_mode(new_cfg)
            return {"ok": True, "radio": self.radio_settings()}
        self.cfg = new_cfg
        for w in self.workers:
            if w.conn is not None and w.died_at is None:
                with contextlib.suppress(OSError):
                    w.conn.send(("set", dict(options)))
        return {"ok": True, "radio": self.radio_settings()}

    def radio_settings(self, rx: dict[str, Any] | None = None) -> dict[str, Any]:
        """The radios' settings; their channels as the link has them now (``rx``: the RX
        process's status, whose ``channels`` an agile link's moves change), else as set."""
        r = self.cfg.radio
        tx_channel, rx_channel = self.cfg.tx_channel, self.cfg.rx_channel
        now = (rx or {}).get("channels")
        if isinstance(now, dict) and isinstance(now.get("uplink"), int):
            up, down = now["uplink"], now.get("downlink", rx_channel)
            tx_channel, rx_channel = (down, up) if self.cfg.role == "base" else (up, down)
        return {
            "backend": self.cfg.backend,
            "rate": r.rate,
            "ard_us": r.ard_us,
            "arc": r.arc,
            "auto_ack": r.auto_ack,
            "payload": r.payload,
            "address_width": r.address_width,
            "crc": r.crc,
            "mode": r.mode,
            "adapt": r.adapt,
            "agile": r.agile,
            "pa_level": self.cfg.pa_level,
            "tx_channel": tx_channel,
            "rx_channel": rx_channel,
            "tx_address": self.cfg.peers[0].tx_address.decode(errors="replace"),
            "rx_address": self.cfg.peers[0].rx_address.decode(errors="replace"),
        }

    def peers_status(self, tx: dict[str, Any], rx: dict[str, Any]) -> list[dict[str, Any]]:
        """Each peer's link state and counters, as its two halves sent them (by name)."""
        out = []
        for p in self.cfg.peers:
            received = (rx.get("peers") or {}).get(p.name, {})
            heard = received.get("peer_last_heard_s")
            out.append(
                {
                    "name": p.name,
                    "address": p.address,
                    "link": "up" if heard is not None and heard < PEER_SILENT_S else "down",
                    "peer_last_heard_s": heard,
                    "sent": (tx.get("peers") or {}).get(p.name, {}),
                    "received": received,
                }
            )
        return out

    def status(self) -> dict[str, Any]:
        tx, rx = (w.stats for w in self.workers)
        heard = rx.get("peer_last_heard_s")
        link = "up" if heard is not None and heard < PEER_SILENT_S else "down"
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.started, 1),
            # the wall clock less the monotonic one: a jump is the node's clock stepped (the
            # link runs on the monotonic clock; sealing's epochs and the logs do not)
            "clock_offset_s": round(time.time() - time.monotonic(), 3),
            "node": {
                "role": self.cfg.role,
                "tun": self.tun.name if self.tun else self.cfg.tun,
                "address": self.cfg.address,
                "peer": self.cfg.peers[0].address,
                "mtu": self.cfg.mtu,
                "queue_ms": self.cfg.queue_ms,
                "queue": self.cfg.queue,
            },
            # the base's forwarding, as set up (roles.py); null on a mobile or without network
            "forwarding": FORWARDING.get(self.cfg.tun) if self.cfg.role == "base" else None,
            "link": link,
            "peer_last_heard_s": heard,
            "radio": self.radio_settings(rx),
            "mode_changes": self.mode_changes,
            "control": (
                self._control.counts()
                if self._control is not None
                else dict.fromkeys(control.COUNTS, 0)
            ),
            "tx": tx,
            "rx": rx,
            "peers": self.peers_status(tx, rx),
            "processes": {
                w.which: {
                    "alive": w.died_at is None,
                    "restarts": w.restarts,
                    "last_exit": w.last_exit,
                }
                for w in self.workers
            },
        }
