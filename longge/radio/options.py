"""One spelling of radio options everywhere (radio-bench, testbed, daemon, tune).

    --rate {250k,1M,2M}  --ard-us N (250..4000, step 250)  --arc N (0..15)  --no-ack
    --payload N (1..32; a link needs 3)  --address-width N (3..5)  --crc N (1..2)
    --channel N (0..125)  --adapt

The link's settings only: the emulated air's losses are ``air.loss.AirLoss`` (``--per``,
``--ack-per``, ``--burst``, ``--seed``), radio-bench's duration is its own plan.

Values are checked here, where the user gave them; a wrong one raises ``ConfigError`` naming
the key and the allowed range. ``configure()`` then applies a checked set to any radio backend.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

from longge.chip.datasheet import (
    ADDRESS_WIDTHS,
    ARC_MAX,
    ARD_STEP_NS,
    ARD_STEPS,
    CHANNEL_MAX,
    CHANNEL_MIN,
    CRC_LENGTHS,
    ISM_MAX_CHANNEL,
    MAX_PAYLOAD,
    MIN_ARD_US_FOR_EMPTY_ACK,
    RATE_BPS,
    LinkTiming,
)
from longge.errors import ConfigError
from longge.radio.constants import RATE_BY_NAME, rf24_crclength_e
from longge.radio.interface import Radio

#: The RadioOptions fields that describe the link itself (both nodes must agree on them).
LINK_KEYS = (
    "rate",
    "ard_us",
    "arc",
    "auto_ack",
    "payload",
    "address_width",
    "crc",
    "mode",
    "agile",
)
#: The link modes: esb (Enhanced ShockBurst: the chips acknowledge every frame) and stream
#: (auto-ack off, LongGe's own ARQ over the reverse channel: docs/design.md §4).
MODES = ("esb", "stream")

ARD_STEP_US = ARD_STEP_NS // 1000
ARD_US_MIN, ARD_US_MAX = ARD_STEP_US, ARD_STEP_US * ARD_STEPS


#: The default uplink channel (mobile -> base); the downlink is downlink_channel() of it.
UPLINK_CHANNEL = 76


@dataclass(frozen=True)
class RadioOptions:
    rate: str = "2M"
    ard_us: int = 250
    arc: int = 2
    auto_ack: bool = True
    payload: int = MAX_PAYLOAD
    address_width: int = 5
    crc: int = 2
    channel: int = UPLINK_CHANNEL
    mode: str = "esb"
    #: the daemon chooses the retries itself (ESB: ARD and ARC from its frames' fate;
    #: protocol/adapt.py): ard_us and arc are then where it starts from
    adapt: bool = False
    #: the link moves off a busy channel by itself (docs/design.md §6; both nodes; off: it
    #: stays on its channels, pinned)
    agile: bool = False

    def __post_init__(self) -> None:
        # Types first: a config file or a control request can carry any JSON/TOML value, and
        # a string where a number belongs must be refused by name, not crash a comparison.
        for key in ("ard_us", "arc", "payload", "address_width", "crc", "channel"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(key, value, "a whole number")
        for key in ("auto_ack", "adapt", "agile"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(key, getattr(self, key), "true or false")
        if not isinstance(self.mode, str) or self.mode not in MODES:
            raise ConfigError("mode", self.mode, "esb or stream")
        if self.mode == "stream" and self.payload != MAX_PAYLOAD:
            raise ConfigError("payload", self.payload, f"{MAX_PAYLOAD} in stream mode")
        if not isinstance(self.rate, str) or self.rate not in RATE_BPS:
            raise ConfigError("rate", self.rate, "one of 250k, 1M, 2M")
        if not ARD_US_MIN <= self.ard_us <= ARD_US_MAX or self.ard_us % ARD_STEP_US:
            raise ConfigError(
                "ard_us", self.ard_us, f"{ARD_US_MIN}..{ARD_US_MAX} in steps of {ARD_STEP_US}"
            )
        if not 0 <= self.arc <= ARC_MAX:
            raise ConfigError("arc", self.arc, f"0..{ARC_MAX}")
        if not 1 <= self.payload <= MAX_PAYLOAD:
            raise ConfigError("payload", self.payload, f"1..{MAX_PAYLOAD} bytes")
        if self.address_width not in ADDRESS_WIDTHS:
            raise ConfigError("address_width", self.address_width, "3, 4 or 5 bytes")
        if self.crc not in CRC_LENGTHS:
            raise ConfigError("crc", self.crc, "1 or 2 bytes")
        if not CHANNEL_MIN <= self.channel <= CHANNEL_MAX:
            raise ConfigError("channel", self.channel, f"{CHANNEL_MIN}..{CHANNEL_MAX}")

    @property
    def acked(self) -> bool:
        """The chips acknowledge frames (Enhanced ShockBurst): auto-ack on, in esb mode."""
        return self.auto_ack and self.mode == "esb"

    def air_bound_bps(self) -> float:
        """Frame payload bit rate these settings allow with no loss (datasheet.LinkTiming)."""
        t = self.timing()
        return t.stream_bound_bps() if self.mode == "stream" else t.bound_bps(self.acked)

    @property
    def ard_step(self) -> int:
        return self.ard_us // ARD_STEP_US - 1

    @property
    def ard_too_short(self) -> bool:
        """The datasheet says an ACK is missed with this ARD at this rate (p. 34)."""
        return self.acked and self.ard_us < MIN_ARD_US_FOR_EMPTY_ACK[self.rate]

    def timing(self) -> LinkTiming:
        return LinkTiming(
            rate=self.rate,
            payload_len=self.payload,
            address_width=self.address_width,
            crc_len=self.crc,
            ard_us=self.ard_us,
            arc=self.arc,
        )

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_saved(cls, saved: dict[str, object]) -> RadioOptions:
        """The options a results folder recorded (folders written before the emulator's
        losses had their own type also hold per/ack_per/burst/seed/seconds: not the link's)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in saved.items() if k in names})  # type: ignore[arg-type]


def add_radio_arguments(
    parser: argparse.ArgumentParser,
    only_given: bool = False,
    channels: bool = True,
) -> None:
    """The shared radio options. ``only_given``: no defaults, so that the namespace holds just
    what the user typed (for overrides and live changes); adds ``--ack`` to undo ``--no-ack``.
    ``channels``: offer ``--channel`` (not for live changes: both nodes' channels must move
    together, so they are set in the config files)."""
    d = RadioOptions()

    def dflt(value: object) -> object:
        return argparse.SUPPRESS if only_given else value

    g = parser.add_argument_group("radio")
    g.add_argument("--rate", choices=sorted(RATE_BPS), default=dflt(d.rate), help="air data rate")
    g.add_argument("--ard-us", type=int, default=dflt(d.ard_us), help="auto-retransmit delay, µs")
    g.add_argument("--arc", type=int, default=dflt(d.arc), help="auto-retransmit count, 0..15")
    g.add_argument("--no-ack", action="store_true", default=dflt(False), help="no auto-ack")
    if only_given:
        g.add_argument(
            "--ack",
            dest="no_ack",
            action="store_false",
            default=argparse.SUPPRESS,
            help="auto-ack on",
        )
    g.add_argument("--payload", type=int, default=dflt(d.payload), help="frame payload, bytes")
    g.add_argument("--address-width", type=int, default=dflt(d.address_width), help="3..5 bytes")
    g.add_argument("--crc", type=int, default=dflt(d.crc), help="CRC length, 1 or 2 bytes")
    g.add_argument(
        "--mode",
        choices=MODES,
        default=dflt(d.mode),
        help="esb: the chips acknowledge each frame; stream: auto-ack off, LongGe's own ARQ "
        "over the reverse channel",
    )
    g.add_argument(
        "--adapt",
        action="store_true",
        default=dflt(False),
        help="the daemons choose their retries live from what their frames meet (ESB: ARD, "
        "ARC; status shows each choice and why)",
    )
    if only_given:
        g.add_argument(
            "--no-adapt",
            dest="adapt",
            action="store_false",
            default=argparse.SUPPRESS,
            help="retries as set (--ard-us, --arc)",
        )
    if not only_given:  # (not live: the RX process's part is made when it starts)
        g.add_argument(
            "--agile",
            action="store_true",
            default=False,
            help="the link moves off a busy channel by itself (both nodes: a base moves its "
            "mobiles; status shows each move and why)",
        )
    if channels:
        g.add_argument(
            "--channel",
            type=int,
            default=dflt(d.channel),
            help="the uplink's RF channel (mobile -> base), 0..125, in the ISM band 0..83; the "
            "downlink is N+5 (N-5 from 79); radio-bench's one link",
        )


def given_options(ns: argparse.Namespace) -> dict[str, object]:
    """RadioOptions fields the user typed (from an ``only_given`` parser)."""
    names = {
        "rate",
        "ard_us",
        "arc",
        "payload",
        "address_width",
        "crc",
        "channel",
        "mode",
        "adapt",
    }
    out = {k: v for k, v in vars(ns).items() if k in names}
    if "no_ack" in vars(ns):
        out["auto_ack"] = not ns.no_ack
    return out


def options_from_args(ns: argparse.Namespace) -> RadioOptions:
    return RadioOptions(
        rate=ns.rate,
        ard_us=ns.ard_us,
        arc=ns.arc,
        auto_ack=not ns.no_ack,
        payload=ns.payload,
        address_width=ns.address_width,
        crc=ns.crc,
        channel=ns.channel,
        mode=ns.mode,
        adapt=getattr(ns, "adapt", False),
        agile=getattr(ns, "agile", False),
    )


def downlink_channel(uplink: int) -> int:
    """The downlink's channel for an uplink on ``uplink``: 5 above (5 MHz: clear of the uplink's
    2 MHz signal), or 5 below where 5 above would leave the ISM band; the one rule for the
    testbed, ``daemon --channel`` and the shipped configs (76 up, 81 down)."""
    return uplink + 5 if uplink + 5 <= ISM_MAX_CHANNEL or uplink < 5 else uplink - 5


def configure(radio: Radio, opts: RadioOptions, channel: int | None = None) -> None:
    """Apply checked options to a radio of any backend (the link always uses dynamic payloads)."""
    radio.channel = opts.channel if channel is None else channel
    radio.data_rate = int(RATE_BY_NAME[opts.rate])
    radio.address_width = opts.address_width
    radio.crc_length = int(rf24_crclength_e(opts.crc))
    radio.dynamic_payloads = True
    # stream mode: auto-ack off on the chip (not the per-frame NO_ACK bit, which Si24R1 clones
    # invert when dynamic payloads are on)
    radio.set_auto_ack(opts.acked)
    radio.enable_dynamic_ack()
    radio.set_retries(opts.ard_step, opts.arc)
