"""Nothing acts before it is authenticated (issue 40, item 4): a stranger's frames move no
"last heard", no link state, no mode-change wait; and a malformed first frame does not cost
the genuine packet in progress its place in the reassembler.

Once every frame on the air, forged or not, refreshed "last heard": a dead link showed "up"
while a stranger's radio sent on its channel. And a new first frame with a packet's 3-bit
number dropped the packet in progress before the new frame was checked: one 1-byte frame per
packet, from anyone's radio, cost every genuine packet."""

from __future__ import annotations

import itertools
import os
import random
import time
from pathlib import Path

import pytest
from daemonlink import LINK_KEY, ip_packet

from longge.config import NodeConfig, PeerConfig
from longge.daemon.supervisor import Supervisor
from longge.protocol import Fragmenter
from longge.protocol.frame import Header
from longge.protocol.reassembler import DropReason, Reassembler
from longge.protocol.secure import OVERHEAD, Sealer, direction_key, generate_key
from longge.radio.options import RadioOptions, configure
from longge.radio.sim import SimRadio
from longge.tun import MemoryTun

UPLINK_CHANNEL, BASE_RX_ADDRESS = 76, b"LGm2b"


def test_a_malformed_first_frame_does_not_cost_the_packet_in_progress() -> None:
    """Between each genuine packet's frames, a 1-byte frame that says "first frame of packet
    number n mod 8": all 50 genuine packets are delivered, each bad frame counted on its own."""
    fragmenter = Fragmenter(32)
    r = Reassembler()
    rng = random.Random(3)
    got = []
    for k in range(50):
        packet = ip_packet(200, k)
        frames = fragmenter.fragment(packet)
        seq = Header.decode(frames[0][0]).seq
        bad = bytes([Header(first=True, last=False, seq=seq, index=0).encode()])
        at = rng.randrange(1, len(frames))
        for i, f in enumerate(frames):
            if i == at:
                r.receive(bad, time.monotonic())
            out = r.receive(f, time.monotonic())
            if out:
                got.append(out)
    assert got == [ip_packet(200, k) for k in range(50)]
    assert r.drops[DropReason.BAD_FIRST] == 50 and r.drops[DropReason.INTERRUPTED] == 0


def test_a_well_formed_new_first_frame_still_ends_the_packet_in_progress() -> None:
    """What a sender that restarts mid-packet does (a first frame that passes the header
    checks): the packet in progress is given up, as before, and the new one goes on."""
    fragmenter = Fragmenter(32)
    r = Reassembler()
    first = fragmenter.fragment(ip_packet(200, 1))
    for k in range(7):  # the next packet with the same number mod 8 comes 8 packets later
        fragmenter.fragment(ip_packet(200, 10 + k))
    second = fragmenter.fragment(ip_packet(200, 2))
    assert Header.decode(first[0][0]).seq == Header.decode(second[0][0]).seq
    r.receive(first[0], 0.0)
    out = [r.receive(f, 0.0) for f in second]
    assert out[-1] == ip_packet(200, 2) and r.drops[DropReason.INTERRUPTED] == 1


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_strangers_frames_do_not_bring_a_dead_link_up(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """A base with no mobile, and a stranger's radio on its channel and address for 3 s:
    random frames, and packets sealed with another key. The base's link stays down and its
    peer never heard; it refused what it could judge."""
    radio = RadioOptions(mode=mode) if mode == "stream" else RadioOptions(ard_us=1000, arc=15)
    cfg = NodeConfig(
        role="base",
        address="10.24.0.1/24",
        air=air_path,
        control=os.path.join(tmp_path, "b.sock"),
        tx_channel=81,
        rx_channel=UPLINK_CHANNEL,
        radio=radio,
        peers=(
            PeerConfig(
                address="10.24.0.2", tx_address=b"LGb2m", rx_address=BASE_RX_ADDRESS, key=LINK_KEY
            ),
        ),
        state_dir=str(tmp_path / "state"),
    )
    base = Supervisor(cfg, MemoryTun("b0"), network=False)
    base.start()
    mouth = SimRadio(air=air_path, name="stranger")
    try:
        assert mouth.begin()
        configure(mouth, radio, channel=UPLINK_CHANNEL)
        mouth.set_retries(3, 2)
        mouth.stop_listening(BASE_RX_ADDRESS)
        arq = 1 if mode == "stream" else 0
        rng = random.Random(5)
        epochs = itertools.count(1)
        forger = Sealer(
            direction_key(bytes.fromhex(generate_key()), "10.24.0.2", "10.24.0.1"),
            lambda _at_least: next(epochs),
        )
        fragmenter = Fragmenter(32 - arq, 1500 + OVERHEAD)
        end = time.monotonic() + 3.0
        sent = 0
        while time.monotonic() < end:
            frames = fragmenter.fragment(forger.seal(ip_packet(100, sent), fragmenter.number_for()))
            frames += [rng.randbytes(rng.randint(1, 32)) for _ in range(2)]
            for f in frames:
                mouth.write(bytes((sent % 128,)) + f if arq else f)
                sent += 1
            base.step(0.02)
        base.step(0.5)
        st = base.status()
        assert sent > 100 and st["rx"]["frames_in"] > 50, (sent, st["rx"])
        assert st["link"] == "down" and st["peer_last_heard_s"] is None, st
        # what it refused, where it could judge: the reassembler, the AEAD, stream mode's ARQ
        refused = (
            sum(st["rx"]["drops"].values())
            + sum((st["rx"]["security"] or {}).get("drops", {}).values())
            + sum(v for v in (st["rx"].get("arq") or {}).values() if isinstance(v, int))
        )
        assert refused > 0, repr(st["rx"])[:1500]
    finally:
        mouth.close()
        base.shutdown()
