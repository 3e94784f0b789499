"""A light mobile's packet beside a busy uplink, on the downlink's channel (a base with several
mobiles: longge/daemon/listening.py, aside.py, docs/design.md §1), in both link modes. The
daemons run over in-memory TUNs and the emulated air (test_multinode.py's star)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_multinode import DOWN, base_config, in_mode, mobile_config, mobile_ip, packet, star

from longge.daemon.listening import BaseListening
from longge.daemon.radio_owner import ChipSettings, RadioOwner
from longge.protocol import Fragmenter
from longge.protocol.arq_frames import ACK, control_frame
from longge.protocol.frame import LAST
from longge.protocol.peer import Networks, PeerSender
from longge.radio.options import RadioOptions, configure
from longge.radio.sim import SimRadio

ADDRESS = b"LGm2b"  # (a mobile's uplink address, on the base's pipe 1)

SMALL = 5  # small packets the light mobile sends, 60 ms apart
BULK = 80  # 1400-byte packets the base sends each of two mobiles at once (and 2 every 50 ms)


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_light_mobiles_small_packets_go_on_the_downlinks_channel_beside_a_busy_uplink(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """Mobiles 1 and 2 keep the uplink busy (1000-byte packets); mobile 3, waiting for a
    grant, sends ten small packets: the base's TX radio hears them on the downlink's channel
    (counted there and by the RX process, which took them), each arrives whole and once, and
    the busy mobiles' packets arrive whole and in order. Without the path the base's TX radio
    hears nothing: the packets waited for mobile 3's grant. (Stream mode: the frames are the
    ARQ's, acknowledged there by the base's chip; the waiting mobiles' ACKs go there too.)"""
    cfgs = [in_mode(mobile_config(tmp_path, air_path, i), mode) for i in range(3)]
    with star(air_path, tmp_path, cfgs, in_mode(base_config(tmp_path, air_path), mode)) as s:
        assert s.heard(), s.base.status()["rx"]
        bulk = [
            [packet(mobile_ip(i), "10.24.0.1", 1000, 5000 + 100 * i + k) for k in range(60)]
            for i in range(2)
        ]
        for k in range(60):
            for i in range(2):
                s.mtuns[i].peer.send(bulk[i][k])
        small = []
        # (ten: on a busy machine some go in grants; once all of five did, after one try on
        # the downlink's channel was refused)
        for k in range(2 * SMALL):
            s.run(0.06)
            small.append(packet(mobile_ip(2), "10.24.0.1", 84, 6000 + k))
            s.mtuns[2].peer.send(small[-1])
        got = s.collect(s.btun, 120 + 2 * SMALL, 40)
        s.run(0.6)  # (the radio processes send their counters every 0.25 s)
        base, light = s.base.status(), s.mobiles[2].status()
        assert [p for p in got if p in small] == small, json.dumps(light["tx"])
        for mine in bulk:
            have = [p for p in got if p in mine]
            assert have == sorted(have, key=mine.index) and len(have) >= 54, len(have)
        aside = light["tx"]["aside"]
        assert aside["aside_packets"] >= 1 and aside["aside_frames"] >= 1, aside
        assert base["tx"]["aside"]["frames"] >= aside["aside_frames"], base["tx"]["aside"]
        # (every frame heard was taken; stream mode's ACKs there go on, and the two processes
        # send their counters at different moments)
        heard, taken = base["tx"]["aside"]["frames"], base["rx"]["frames_aside"]
        assert taken == heard if mode == "esb" else min(heard, taken) > 0, (heard, taken)
        assert base["tx"]["aside"]["pair_full"] == 0
        for m in s.mobiles[:2]:  # (their packets are big: they went in their grants)
            assert m.status()["tx"]["aside"]["aside_packets"] == 0


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_base_that_keeps_sending_says_so_and_the_light_mobile_waits_for_its_grant(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """The base keeps sending to mobiles 1 and 2 (its TX radio never listens): its grants say
    so (uplink.DEAF_BIT, counted at both ends), and mobile 3 then sends its small packets in
    its grants, not on the downlink's channel, where its tries met the base's frames (at most
    five refusals there: a grant late past DEAF_FOR_S, or a moment the base's process was
    starved and its radio listened, lets a packet or two through on a busy machine). Each of
    the thirty arrives once, in order, and the others' packets in order. Without the bit an
    ESB mobile tried them there and was refused 10 to 21 times; a stream-mode one tries only
    while its ARQ has nothing on its way (2 packets, 6 refusals: the bound does not tell
    there, the counters and the packets' way do)."""
    cfgs = [in_mode(mobile_config(tmp_path, air_path, i), mode) for i in range(3)]
    with star(air_path, tmp_path, cfgs, in_mode(base_config(tmp_path, air_path), mode)) as s:
        assert s.heard(), s.base.status()["rx"]
        bulk = [
            [packet("10.24.0.1", mobile_ip(i), 1400, 7000 + 1000 * i + k) for k in range(300)]
            for i in range(2)
        ]
        for k in range(BULK):
            for i in range(2):
                s.btun.peer.send(bulk[i][k])
        deadline = time.monotonic() + 5
        while s.mobiles[2].status()["tx"]["uplink"].get("deaf", 0) < 1:
            assert time.monotonic() < deadline, s.mobiles[2].status()["tx"]["uplink"]
            s.run(0.05)
        before = s.mobiles[2].status()["tx"]["aside"]
        small = []
        for k in range(6 * SMALL):
            s.run(0.05)
            for i in range(2):  # (the downlink stays loaded: ~ 450 kbit/s more to each)
                for n in (BULK + 2 * k, BULK + 2 * k + 1):
                    s.btun.peer.send(bulk[i][n])
            small.append(packet(mobile_ip(2), "10.24.0.1", 84, 9000 + k))
            s.mtuns[2].peer.send(small[-1])
        got = s.collect(s.btun, len(small), 20)
        s.run(0.6)
        light = s.mobiles[2].status()["tx"]
        assert got == small, json.dumps(light)
        assert light["peers"]["base"]["packets_aborted"] == 0, light
        refused = light["aside"]["aside_refused"] - before["aside_refused"]
        assert refused <= 5, (before, light["aside"])  # (a packet or two let through)
        assert s.base.status()["tx"]["uplink"]["deaf"] >= 1
        for i, mine in enumerate(bulk):  # (in order; the queue's bound may drop some)
            have = s.collect(s.mtuns[i], BULK + 12 * SMALL, 6)
            assert have == sorted(have, key=mine.index) and len(have) >= BULK, (i, len(have))


def test_frames_that_never_end_a_packet_hold_the_bases_downlink_4_ms_at_most(
    air_path: str,
) -> None:
    """The base's TX radio, listening, waits for a packet's rest before it sends (HOLD_S
    after each frame of it). Anyone's radio can send frames with a mobile's address that never
    end a packet: with something to send, the base stops listening within HOLD_MAX_S of such
    frames, whatever follows, and holds for none for HOLD_GAP_S (counted). Without the bound,
    a frame every half millisecond held it for good."""
    opts = RadioOptions()
    base, forger = SimRadio(air=air_path, name="base-tx"), SimRadio(air=air_path, name="forger")
    assert base.begin() and forger.begin()
    for r in (base, forger):
        configure(r, opts, channel=DOWN)
    base.stop_listening(b"LGb2m")
    base.open_rx_pipe(1, ADDRESS)
    forger.stop_listening(ADDRESS)
    peer = PeerSender("m", b"LGb2m", Networks(()), Fragmenter(32, 1500), None)
    owner = RadioOwner(base, ChipSettings.configured(opts, DOWN, base.pa_level, b"LGb2m"))
    listen = BaseListening(owner)
    deadline = time.monotonic() + 5
    while not listen.listening and time.monotonic() < deadline:
        listen.turn(base, None, False, peer, time.monotonic())
        time.sleep(0.0005)
    assert listen.listening
    # the forger's frames come for 30 ms, then the base has something to send: it must stop
    # listening while they keep coming
    start = time.monotonic()
    stopped, k = None, 0
    while time.monotonic() < start + 0.25 and stopped is None:
        now = time.monotonic()
        _, failed, _ = forger.what_happened()
        if failed:
            forger.flush_tx()
        if forger.is_fifo(True, True):  # a frame never the last of its packet
            forger.start_fast_write(bytes((0x80 if k % 8 == 0 else k % 8,)) + b"x" * 31)
            k += 1
        work = now >= start + 0.03
        listen.turn(base, None, work, peer, now)
        if work and not listen.listening:
            stopped = now
        time.sleep(0.0003)
    assert listen.counters.frames >= 3, listen.stats()  # (it heard them)
    assert stopped is not None, listen.stats()


def test_a_stream_mode_base_holds_only_for_a_packets_rest() -> None:
    """Stream mode's frames carry the ARQ's byte in front: a packet's last-frame bit is in the
    byte after it, and an ARQ ACK is no packet's part. The base read the ARQ byte as the
    frame's header, and held its downlink for HOLD_S after a packet's last frame or an ACK
    whose sequence number had that bit clear (a ping's answer waited 1.3 ms, one in two)."""
    esb, stream = BaseListening(RadioOwner()), BaseListening(RadioOwner(), arq_byte=True)
    assert esb._more(bytes((0,)) + b"x") and not esb._more(bytes((LAST,)) + b"x")
    for seq in (0x00, LAST, 0x3F):
        assert stream._more(bytes((seq, 0)) + b"x")
        assert not stream._more(bytes((seq, LAST)) + b"x")
    assert not stream._more(control_frame(bytes((ACK, 5, 0))))
    assert not stream._more(b"")
