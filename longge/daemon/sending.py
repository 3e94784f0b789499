"""A link mode's sending half, as the TX pump (radio_tx.py) drives it: the shape both modes
share (``Sending``; ESB's is ``esb_tx.EsbSending``, stream mode's ``stream_tx.StreamSending``),
what it asks the pump to wait for (``Wake``), and the link control the pump hands the peers
between their packets."""

from __future__ import annotations

import socket
import sys
from typing import Any, ClassVar, Protocol

from longge.config import NodeConfig
from longge.daemon.child import Child
from longge.daemon.peerqueues import PeerQueues
from longge.daemon.peers import TxCounters
from longge.daemon.radio_owner import RadioOwner
from longge.protocol.part import Part
from longge.protocol.peer import PeerSender, PeerTable
from longge.protocol.secure import SecurityError
from longge.protocol.uplink_scheduler import UplinkScheduler
from longge.radio.interface import LinkRadio

#: How the pump sleeps after a turn (``Child.wait``), a plain tuple (one is made every turn):
#: (the mode's own moment to wake, or None: its parts' are asked apart, ``Sending.parts``;
#: "look now": something waits already; "poll": frames on their way, ask a radio without a
#: descriptor again soon; the descriptors to wake on beside the supervisor's and the radio's).
Wake = tuple[float | None, bool, bool, tuple[Any, ...]]


class Sending(Protocol):
    """A link mode's sending half: the pump calls these once per turn, in this order, between
    its own steps (the radio brought up, the TUN read, the supervisor's messages, the
    counters, the wait)."""

    #: LongGe's ARQ carries the frames (stream mode; the peers' senders have one), or the
    #: chip acknowledges them (ESB)
    ARQ: ClassVar[bool]
    #: on an emulated air, the process runs beside the air's CPU (Child's ``beside_air``)
    BESIDE_AIR: ClassVar[bool]

    table: PeerTable[PeerSender]
    queues: PeerQueues
    c: TxCounters
    #: a base's grants of the shared uplink to its mobiles (uplink_tx.UplinkSending)
    grants: UplinkScheduler | None

    def __init__(
        self,
        cfg: NodeConfig,
        table: PeerTable[PeerSender],
        queues: PeerQueues,
        c: TxCounters,
        owner: RadioOwner,
    ) -> None: ...

    def uplink_start(self, cfg: NodeConfig, now: float) -> None:
        """A mobile that remembers that its base grants waits for a grant (uplink_tx.py)."""
        ...

    def settings_applied(self, child: Child) -> None:
        """The radio's settings may have been applied again (``child.applied``): what the
        mode knew of the chip (its TX address, its channel) is the configuration's again."""
        ...

    def before_tun(
        self,
        child: Child,
        radio: LinkRadio | None,
        pair: socket.socket,
        news: bool,
        now: float,
    ) -> bool:
        """The chip's and the RX process's news (``news``: the pair may hold some), the
        adaptation; False: the radio was started over, the turn ends here."""
        ...

    def after_tun(
        self, child: Child, radio: LinkRadio | None, pair: socket.socket, read: bool, now: float
    ) -> None:
        """With the TUN's packets queued (``read``: it was read): the shared uplink,
        keepalives, listening, frames into the TX FIFO."""
        ...

    def control_now(self) -> bool:
        """May link control (an epoch floor, a skip) change the senders now?"""
        ...

    def stats(self, radio: LinkRadio | None, now: float) -> dict[str, Any]:
        """The TX process's status (its counters, the peers', the mode's parts')."""
        ...

    def wake(self, radio: LinkRadio | None, tun: Any, pair: socket.socket, now: float) -> Wake:
        """How the pump may sleep now."""
        ...

    def fates(self, radio: LinkRadio | None) -> tuple[int, int]:
        """Our sending's attempts and failed attempts since the process began (the link's
        channels judge on them: agility.py)."""
        ...

    def parts(self) -> tuple[Part | None, ...]:
        """The parts the mode runs (None: one this process does not run), the radio's owner
        among them while it holds actions for later: the pump sleeps until the soonest one's
        ``wake_at``."""
        ...


def link_control(child: Child, table: PeerTable[PeerSender]) -> None:
    """What the RX process passed on through the supervisor (child.py), for a peer: it
    refuses our epochs, or its sender is stale (``PeerSender.link_control``)."""
    if not child.skip_past and not child.floor_to_send:
        return
    for peer in table:
        i = peer.index
        try:
            peer.link_control(child.skip_past.pop(i, None), child.floor_to_send.pop(i, None))
        except SecurityError as exc:  # a new epoch that cannot be recorded: seal nothing
            print(f"longge-tx: {exc}; starting again", file=sys.stderr, flush=True)
            child.running = False  # (the supervisor starts it again: senders_once_recorded)
            return
