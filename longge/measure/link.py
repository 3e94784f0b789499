"""The link under test: where its servers are, where the clients run, its daemons and (when it
is emulated) its air. tTest, lTest, tune and the experiment battery ask it for everything
about the link: a typed status, radio settings, the emulator's loss, empty queues, counters,
the context a results folder records (docs/design.md, "The measurement layer")."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from longge.air import wire
from longge.chip.datasheet import ARC_MAX, MIN_ARD_US_FOR_EMPTY_ACK
from longge.daemon.control import ControlError
from longge.daemon.status import DaemonClient, NodeStatus
from longge.errors import ConfigError
from longge.measure.iperf import TrialSpec
from longge.measure.model import (
    datagram_frames,
    link_error_rates,
    lossy_model,
    udp_goodput_both_ways_bps,
    udp_goodput_bps,
)
from longge.protocol import secure
from longge.radio.options import RadioOptions

DIRECTIONS = {"up": "mobile -> base", "down": "base -> mobile", "both": "both ways at once"}


def statuses(controls: tuple[str, ...]) -> dict[str, NodeStatus]:
    """The status of each daemon that answers, by control path."""
    out: dict[str, NodeStatus] = {}
    for path in controls:
        with contextlib.suppress(ControlError):
            out[path] = DaemonClient(path).status()
    return out


def wait_for_mode(
    controls: tuple[str, ...], mode: str, timeout_s: float, peer: bool = True
) -> float | None:
    """Seconds until every daemon at ``controls`` runs ``mode`` with both radio processes up
    and, with ``peer``, its new RX process has heard a frame (the peer's TX, up too), or None
    at the timeout. A change of mode starts new radio processes whose counters begin empty,
    so nothing the old ones saw can pass for it (and no keepalive interval is assumed)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        time.sleep(0.1)
        sts = statuses(controls)
        if len(sts) == len(controls) and all(
            s.radio.get("mode") == mode
            and s.tx.state == "up"
            and s.rx.state == "up"
            and (s.peer_last_heard_s is not None or not peer)
            for s in sts.values()
        ):
            return time.monotonic() - start
    return None


@dataclass(frozen=True)
class Target:
    """Where the servers are, and where the clients run."""

    host: str
    iperf_port: int = 5201
    rtt_port: int = 7770
    netns: str | None = None  # run the clients inside this network namespace
    controls: tuple[str, ...] = ()  # daemon control sockets: settings, queue drain
    air: str | None = None  # the emulated air's socket, when the link is emulated

    # -- load --------------------------------------------------------------------------------

    def load_spec(self, direction: str, **kw: Any) -> TrialSpec:
        """The iperf3 trial that offers a load in ``direction`` (the client is on the mobile)."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction = {direction!r}: one of {sorted(DIRECTIONS)}")
        return TrialSpec(
            host=self.host,
            port=self.iperf_port,
            reverse=direction == "down",
            bidir=direction == "both",
            **kw,
        )

    # -- the daemons ---------------------------------------------------------------------------

    def status(self) -> dict[str, NodeStatus]:
        """The status of each daemon that answers, by control path."""
        return statuses(self.controls)

    def drain(self, max_wait_s: float = 5.0) -> None:
        """Wait until the link's queues are empty (daemon status), or a fixed second without
        daemons to ask."""
        time.sleep(0.5)
        deadline = time.monotonic() + max_wait_s
        while self.controls and time.monotonic() < deadline:
            if all(s.tx.queue_packets == 0 for s in self.status().values()):
                break
            time.sleep(0.2)
        time.sleep(0.5)

    def set_radio(self, options: dict[str, Any]) -> None:
        """Set radio options live on every daemon (both ends of the link)."""
        for path in self.controls:
            reply = DaemonClient(path, timeout=5).set_radio(options)
            if "error" in reply:
                raise RuntimeError(f"{path}: {reply['error']}")

    def mode(self) -> str:
        """The link mode the daemons run (``esb`` when none answers)."""
        for st in self.status().values():
            return str(st.radio.get("mode", "esb"))
        return "esb"

    def set_mode(self, mode: str, timeout_s: float = 15.0) -> None:
        """Switch both ends of the link to ``mode`` (each daemon restarts its radio processes
        in it) and wait until each hears its peer again."""
        if len(self.controls) < 2:
            raise ConfigError(
                "--control",
                list(self.controls),
                "changing the link mode needs both nodes' control sockets (the two ends must "
                "switch together)",
            )
        if self.mode() == mode:
            return
        self.set_radio({"mode": mode})
        if wait_for_mode(self.controls, mode, timeout_s) is None:
            raise RuntimeError(
                f"the link did not come back within {timeout_s:.0f} s in {mode} mode"
            )

    def retry_settings(self) -> dict[str, dict[str, Any]]:
        """Each daemon's ARD and ARC as it reports them (control path -> options), to put back
        with restore()."""
        out = {}
        for path in self.controls:
            radio = DaemonClient(path, timeout=5).status().radio
            if "ard_us" in radio and "arc" in radio:
                out[path] = {"ard_us": radio["ard_us"], "arc": radio["arc"]}
        return out

    @staticmethod
    def restore(had: dict[str, dict[str, Any]]) -> None:
        for path, options in had.items():
            with contextlib.suppress(ControlError):
                DaemonClient(path, timeout=5).set_radio(options)

    def tx_counters(self) -> tuple[int, int, int]:
        """(frames sent, retransmissions, MAX_RT) summed over the daemons' TX radios."""
        frames = retrans = max_rt = 0
        for path in self.controls:
            tx = DaemonClient(path, timeout=5).status().tx
            frames += tx.frames_sent
            retrans += tx.retransmissions or 0
            max_rt += tx.max_rt
        return frames, retrans, max_rt

    # -- the context a results folder records --------------------------------------------------

    def context(self, length: int, both_ways: bool = False) -> dict[str, Any]:
        """Each daemon's node, radio and version; the emulator's loss; the model's capacity
        for ``length``-byte datagrams, each direction's when ``both_ways`` are loaded at once
        (in stream mode each channel also carries the other direction's ACKs)."""
        ctx: dict[str, Any] = {"target": {"host": self.host, "netns": self.netns}}
        for path in self.controls:
            try:
                st = DaemonClient(path).status()
            except ControlError as exc:
                ctx.setdefault("daemons", {})[path] = {"error": str(exc)}
                continue
            ctx.setdefault("daemons", {})[path] = {
                k: st.raw.get(k) for k in ("node", "radio", "version")
            }
            if st.node.role == "mobile":
                ctx["radio"] = st.radio
                ctx["secured"] = st.secured
                ctx["security_overhead"] = secure.OVERHEAD if st.secured else 0
        if self.air:
            try:
                stats = wire.query(self.air)
                ctx["emulator"] = {
                    "loss": stats.get("loss"),
                    # links with losses of their own (air set --node): not in the model
                    "links": stats.get("links") or [],
                    "seed": stats.get("seed"),
                    # Wi-Fi interferers destroying frames (--interferer): not in the model
                    "interferers": stats.get("interferers") or [],
                }
            except OSError as exc:
                ctx["emulator"] = {"error": str(exc)}
            if ctx.get("radio"):
                overhead = ctx.get("security_overhead", 0)
                loss = (ctx["emulator"] or {}).get("loss")
                ctx.update(model_context(ctx["radio"], length, overhead, both_ways, loss))
                if ctx["emulator"]["interferers"]:
                    ctx["model_note"] += (
                        "; not counting the Wi-Fi interferer on the air (it destroys the frames "
                        "it overlaps: the measured figures are below this bound)"
                    )
        return ctx


def radio_options(radio: dict[str, Any] | None) -> RadioOptions:
    """The link's options as a daemon's ``radio`` status gives them (the defaults where it
    gives none: a link measured with ``--host`` and no daemon to ask)."""
    if not radio:
        return RadioOptions()
    return RadioOptions(
        rate=radio["rate"],
        ard_us=radio["ard_us"],
        arc=radio["arc"],
        auto_ack=radio["auto_ack"],
        payload=radio["payload"],
        address_width=radio["address_width"],
        crc=radio["crc"],
        mode=radio.get("mode", "esb"),
        adapt=bool(radio.get("adapt", False)),
    )


def frames_of(context: dict[str, Any]) -> Callable[[int], int]:
    """Radio frames per UDP datagram of a given size on the link a context.json describes."""
    opts = radio_options(context.get("radio"))
    overhead = context.get("security_overhead") or 0
    return lambda length: datagram_frames(opts, length, overhead)


def model_context(
    radio: dict[str, Any],
    length: int,
    overhead: int,
    both_ways: bool = False,
    loss: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The bound a run's figures are compared with (context.json's ``model_capacity_bps``,
    ``model_loss_floor`` and ``model_note``): the UDP payload rate the air allows for
    ``length``-byte datagrams on the link the daemon's ``radio`` status describes, each
    direction's when ``both_ways``; with the emulated air's ``loss`` (its per, ack_per, burst),
    the lossy model's rate and loss floor (measure/model.py, shared with tune)."""
    opts = radio_options(radio)
    model = udp_goodput_both_ways_bps if both_ways else udp_goodput_bps
    capacity, floor = model(opts, length, overhead), 0.0
    # (a path loss counts as the frame error rates its noise gives full frames and ACKs)
    per, ack_per, burst = link_error_rates(opts, loss, radio.get("pa_level") or "low")
    path_loss = (loss or {}).get("path_loss")
    lossy = per > 0 or ack_per > 0
    adaptive = opts.adapt and opts.acked
    if lossy and adaptive:
        # the daemons choose their retries: the bound is the best fixed setting's (the
        # shortest ARD the rate allows, the ARC that carries most)
        ard = MIN_ARD_US_FOR_EMPTY_ACK[opts.rate]
        one_way, floor = max(
            (
                lossy_model(
                    replace(opts, ard_us=ard, arc=arc), per, ack_per, burst, length, overhead
                )
                for arc in range(ARC_MAX + 1)
            ),
            key=lambda m: m[0],
        )
        capacity = one_way * capacity / udp_goodput_bps(opts, length, overhead)
    elif lossy:
        one_way, floor = lossy_model(opts, per, ack_per, burst, length, overhead)
        # (both ways in stream mode: the ACKs' share of the air, as without loss)
        capacity = one_way * capacity / udp_goodput_bps(opts, length, overhead)
    return {
        "model_capacity_bps": capacity,
        "model_loss_floor": floor,
        "model_note": f"UDP payload rate the air allows for {length}-byte datagrams "
        + ("in each direction, both loaded at once, " if both_ways else "")
        + (
            f"with the emulated air's losses (per {per:.4g}, ack_per {ack_per:.4g}, "
            f"burst {burst:g}"
            + (f", path loss {path_loss:g} dB included" if path_loss is not None else "")
            + f": {100 * floor:.2f} % of them lost at every load)"
            if lossy
            else "with no loss"
        )
        + (
            ", the retries the best fixed ARC at the shortest ARD (--adapt)"
            if adaptive and lossy
            else ""
        )
        + " and no host overhead"
        + (f", {overhead} bytes of security per packet" if overhead else ""),
    }
