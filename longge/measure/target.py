"""Where a measurement's servers are, and where its clients run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """Where the servers are, and where the clients run."""

    host: str
    iperf_port: int = 5201
    rtt_port: int = 7770
    netns: str | None = None  # run the clients inside this network namespace
    controls: tuple[str, ...] = ()  # daemon control sockets: settings, queue drain
    air: str | None = None  # the emulated air's socket, when the link is emulated
