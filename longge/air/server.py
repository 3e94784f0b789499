"""The air in real time: the sans-IO model of ``model.py`` driven by the wall clock.

Radios in other processes (and other network namespaces) connect over a Unix socket (see
``wire.py``). Pacing is by accumulated deadlines: every event has a virtual time computed
from the event before it, never from when the server got round to it, so average rates are
exact even when single wake-ups are late. The server measures how late it runs events
(its *lag*) and reports it with the counters.

Catching up is right for small lateness only. When the server itself was held back for longer
than ``FREEZE_AFTER_NS`` (a virtual machine's vCPU waiting for its host: "steal"), running the
missed stretch at once would compress frames that could not have happened: transmitters'
FIFOs empty in no time and receivers' 3-frame FIFOs overflow into MAX_RT, because the hosts
had no chance to act in between. Instead the air stops its clock for the stall (counted as
``freezes``/``frozen_ms``): to everybody the radio link looks idle for that time, as if the
world had paused, and what it costs is airtime, not packets.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import socket
import time
from collections.abc import Callable
from typing import Any

from longge import realtime
from longge.air import wire
from longge.air.interferer import MODELS, Interferer
from longge.air.loss import LossModel, LossSpec
from longge.air.model import Air, Outcome, RxFrame, TxResult
from longge.air.wire import DEFAULT_SOCKET
from longge.chip.registers import registers_from_json
from longge.sockets import make_unix_socket

_MAX_WAIT_S = 0.2
#: Lateness beyond which the air stops its clock instead of catching up (see the module doc):
#: about two frame exchanges at 2 Mbit/s, less than a receiver's FIFO lasts.
FREEZE_AFTER_NS = 1_000_000


class LagHistogram:
    """Lateness of event processing, in 10 µs buckets up to 100 ms."""

    BUCKET_NS = 10_000
    BUCKETS = 10_000

    def __init__(self) -> None:
        self.counts = [0] * (self.BUCKETS + 1)
        self.n = 0
        self.max_ns = 0

    def add(self, lag_ns: int) -> None:
        lag_ns = max(lag_ns, 0)
        self.counts[min(lag_ns // self.BUCKET_NS, self.BUCKETS)] += 1
        self.n += 1
        self.max_ns = max(self.max_ns, lag_ns)

    def quantile_us(self, q: float) -> float:
        if self.n == 0:
            return 0.0
        target = q * self.n
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= target:
                return (i + 1) * self.BUCKET_NS / 1000
        return self.max_ns / 1000

    def summary(self) -> dict[str, float]:
        return {
            "samples": self.n,
            "p50_us": self.quantile_us(0.5),
            "p99_us": self.quantile_us(0.99),
            "max_us": self.max_ns / 1000,
        }

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


def _tighten_timer_slack() -> None:
    """Ask Linux for 1 µs timer slack (default 50 µs) so that sleeps end on time."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_timerslack = 29
        libc.prctl(pr_set_timerslack, 1000, 0, 0, 0)


class _Client:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.radio: int | None = None
        self.accepted = 0
        self.flushes = 0


class AirServer:
    def __init__(
        self,
        path: str = DEFAULT_SOCKET,
        loss: LossModel | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.path = path
        self.air = Air(loss)
        self.lag = LagHistogram()
        self.bad_messages = 0
        self.clock = clock
        self.started = clock()
        self.frozen_ns = 0  # how far the air's clock is behind the wall clock
        self.scheduling = "default"
        self.freezes = 0
        self._clients: dict[int, _Client] = {}
        self._by_radio: dict[int, _Client] = {}
        self._listener: socket.socket | None = None
        self._stop = False

    # -- life cycle -------------------------------------------------------------------------

    def bind(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        # root's and its group's only (0660, made so: no chmod a symlink could redirect)
        sock = make_unix_socket(self.path, socket.SOCK_SEQPACKET, 0o660)
        sock.listen(64)
        sock.setblocking(False)
        self._listener = sock

    def stop(self) -> None:
        self._stop = True

    def close(self) -> None:
        for client in list(self._clients.values()):
            client.sock.close()
        self._clients.clear()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def air_time(self, due: int | None = None) -> int:
        """The air's clock: the wall clock minus the stalls it sat out. ``due``: the next event's
        time; if the server is later than FREEZE_AFTER_NS for it, the clock stops for the
        stall (the event happens at its time, and so does everything after it)."""
        now = self.clock() - self.frozen_ns
        if due is not None and due <= now:
            late = now - due
            self.lag.add(late)
            if late > FREEZE_AFTER_NS:
                self.frozen_ns += late
                self.freezes += 1
                now = due
        return now

    def serve_forever(self) -> None:
        """Run until :meth:`stop` (e.g. from a signal handler)."""
        if self._listener is None:
            self.bind()
        assert self._listener is not None
        _tighten_timer_slack()
        # the air is hardware
        self.scheduling = realtime.prioritise(realtime.HARDWARE, -10, "world")
        listener = self._listener
        while not self._stop:
            due = self.air.next_event()
            now = self.air_time(due)
            if due is not None and due <= now:
                self._dispatch(self.air.advance(now))
                continue
            wait = _MAX_WAIT_S if due is None else min((due - now) / 1e9, _MAX_WAIT_S)
            socks = [listener] + [c.sock for c in self._clients.values()]
            try:
                readable, _, _ = select.select(socks, [], [], wait)
            except InterruptedError:
                continue
            for sock in readable:
                if sock is listener:
                    self._accept()
                else:
                    self._read(self._clients[sock.fileno()])

    # -- sockets ------------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            self._clients[sock.fileno()] = _Client(sock)

    def _read(self, client: _Client) -> None:
        while True:
            try:
                msg = client.sock.recv(wire.MAX_MESSAGE)
            except BlockingIOError:
                return
            except OSError:
                msg = b""
            if not msg:
                self._drop(client)
                return
            try:
                self._handle(client, msg, self.air_time())
            except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                self.bad_messages += 1
                self._send(client, b"e" + str(exc).encode()[:200])

    def _drop(self, client: _Client) -> None:
        self._clients.pop(client.sock.fileno(), None)
        if client.radio is not None:
            self._by_radio.pop(client.radio, None)
            self.air.detach(client.radio)
        client.sock.close()

    def _send(self, client: _Client, msg: bytes) -> None:
        try:
            client.sock.send(msg)
        except BlockingIOError:
            self.air_overflow(client)
        except OSError:
            pass

    def air_overflow(self, client: _Client) -> None:
        """A radio process stopped reading: its socket buffer is full. Count, do not block."""
        self.bad_messages += 1

    # -- messages -----------------------------------------------------------------------------

    def _handle(self, client: _Client, msg: bytes, now: int) -> None:
        kind, body = msg[:1], msg[1:]
        air = self.air
        if kind == b"S":
            self._send(client, b"s" + json.dumps(self.stats()).encode())
            return
        if kind == b"P":
            self._set_loss(json.loads(body))
            self._send(client, b"s" + json.dumps(self.stats()).encode())
            return
        if kind == b"W":
            self.set_interferer(json.loads(body))
            self._send(client, b"s" + json.dumps(self.stats()).encode())
            return
        if kind == b"H":
            if client.radio is None:
                client.radio = air.attach(body.decode() or f"radio{len(self._by_radio) + 1}")
                self._by_radio[client.radio] = client
            self._send(client, b"h" + client.radio.to_bytes(2, "big"))
            return
        rid = client.radio
        if rid is None:
            raise ValueError("attach first (H)")
        if kind == b"T":
            if len(body) < 2 or len(body) > 33:
                raise ValueError(f"payload of {len(body) - 1} bytes")
            client.accepted += 1
            air.submit(rid, body[1:], bool(body[0]), now)
        elif kind == b"R":
            air.consumed(rid, body[0])
        elif kind == b"C":
            air.configure(rid, registers_from_json(json.loads(body)), now)
        elif kind == b"L":
            air.set_listening(rid, bool(body[0]), now)
        elif kind == b"F":
            client.flushes += 1
            air.flush_tx(rid, now)
        elif kind == b"U":
            air.reuse_tx(rid, now)
        elif kind == b"X":
            air.flush_rx(rid)
        elif kind == b"D":
            self._send(client, b"d" + bytes((int(air.rpd(rid, now)),)))
        else:
            raise ValueError(f"unknown message {kind!r}")

    def set_interferer(self, spec: dict[str, Any]) -> None:
        if spec.get("clear"):
            self.air.interferers.clear()
            return
        duty = float(spec.get("duty", 0.3))
        if not 0 < duty <= 1:
            raise ValueError(f"duty {duty}: 0..1")
        model = spec.get("model", "slots")
        if model not in MODELS:
            raise ValueError(f"model {model!r}: {', '.join(MODELS)}")
        near = spec.get("near")
        if near is not None and (not isinstance(near, str) or not near):
            raise ValueError(f"near {near!r}: a node's name")
        centre = wire.wifi_centre(int(spec["wifi"]))
        self.air.interferers.append(Interferer(centre, duty=duty, model=model, near=near))

    def _set_loss(self, spec: dict[str, Any]) -> None:
        path_loss = spec.get("path_loss")
        loss = LossSpec(
            data_per=float(spec.get("per", 0.0)),
            ack_per=float(spec.get("ack_per", spec.get("per", 0.0))),
            burst=float(spec.get("burst", 1.0)),
            path_loss=None if path_loss is None else float(path_loss),
        )
        if "tx" in spec or "rx" in spec:
            self.air.loss.set_link(str(spec["tx"]), str(spec["rx"]), loss)
        else:
            self.air.loss.set_default(loss)

    def _dispatch(self, outputs: list[TxResult | RxFrame]) -> None:
        for out in outputs:
            client = self._by_radio.get(out.radio)
            if client is None:
                continue
            if isinstance(out, RxFrame):
                self._send(client, b"r" + bytes((out.pipe,)) + out.payload)
            else:
                fifo = self.air.tx_pending(out.radio)
                ok = out.outcome is Outcome.OK
                msg = wire.tx_result(ok, out.arc_count, fifo, client.accepted, client.flushes)
                self._send(client, msg)

    def stats(self) -> dict[str, Any]:
        links = [
            {**spec_json(spec), "tx": tx, "rx": rx}
            for (tx, rx), spec in sorted(self.air.loss.links.items())
        ]
        return {
            "air": self.air.stats(),
            "server": "python",
            "lag": self.lag.summary(),
            "scheduling": self.scheduling,
            "freezes": self.freezes,
            "frozen_ms": round(self.frozen_ns / 1e6, 3),
            "uptime_s": (self.clock() - self.started) / 1e9,
            "bad_messages": self.bad_messages,
            "loss": spec_json(self.air.loss.default),
            "links": links,
            "seed": self.air.loss.seed,
            "interferers": [
                {
                    "centre_channel": w.centre,
                    "width_mhz": w.width,
                    "duty": w.duty,
                    "model": w.model,
                    "near": w.near,
                }
                for w in self.air.interferers
            ],
        }


def spec_json(spec: LossSpec) -> dict[str, Any]:
    """A loss spec as the stats give it (the compiled server's ``spec_json``)."""
    return {
        "per": spec.data_per,
        "ack_per": spec.ack_per,
        "burst": spec.burst,
        "path_loss": spec.path_loss,
    }
