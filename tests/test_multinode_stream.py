"""A base for several mobiles in stream mode (issue 41): the chips send without ESB's
acknowledgements and LongGe's ARQ acknowledges on the reverse channel, one ARQ per mobile.
The base's bursts go to one mobile at a time (its address set between bursts); the uplink is
granted as in ESB mode, and a mobile's ACKs go at any time (docs/design.md §4, "Several
mobiles"). The daemons run over in-memory TUNs and the emulated air (test_multinode.py's
star)."""

from __future__ import annotations

from pathlib import Path

from test_multinode import N, base_config, in_mode, mobile_config, star

from longge.config import NodeConfig


def streamed(cfg: NodeConfig) -> NodeConfig:
    return in_mode(cfg, "stream")


def test_a_base_in_stream_mode_serves_each_mobile_its_own_packets_both_ways(
    air_path: str, tmp_path: Path
) -> None:
    """Packets for three mobiles interleaved on the base's TUN: each mobile gets its own,
    whole and in order (the ARQ loses nothing), and nobody else's; then the three mobiles send
    at once, each in its grants, and the base gets every packet of each, in order."""
    cfgs = [streamed(mobile_config(tmp_path, air_path, i)) for i in range(N)]
    with star(air_path, tmp_path, cfgs, streamed(base_config(tmp_path, air_path))) as s:
        assert s.heard(), s.base.status()["rx"]
        s.each_gets_its_own(91)
        ups, got = s.all_send_at_once(20)
        s.run(0.6)  # (the radio processes send their counters every 0.25 s)
        for i in range(N):
            assert [p for p in got if p in ups[i]] == ups[i], (i, s.mobiles[i].status()["tx"])
        base = s.base.status()
        uplink = base["tx"]["uplink"]
        assert uplink["grants"] >= N and uplink["releases"] >= N, uplink
        for m in s.mobiles:
            assert m.status()["tx"]["uplink"]["granted"] == 1
        assert base["tx"]["no_route"] == 0
        assert [p["link"] for p in base["peers"]] == ["up"] * N


def test_a_strangers_frames_on_an_absent_mobiles_pipe_do_not_keep_it_alive(
    air_path: str, tmp_path: Path
) -> None:
    """A base of two mobiles in stream mode, neither there, and a stranger's radio sending
    data frames (a plausible ARQ byte, other bytes behind) on mobile 2's pipe for 3 s. They
    are frames, no authentic packet: every grant either mobile got ends silent, backed off
    as for one that is gone (they kept mobile 2 "alive": asked again as an idle one, issue 67
    item 3), and the link stays down."""
    import random
    import time

    from test_multinode import UP, base_listens

    from longge.daemon.supervisor import Supervisor
    from longge.radio.options import configure
    from longge.radio.sim import SimRadio
    from longge.tun import MemoryTun

    cfg = streamed(base_config(tmp_path, air_path, mobiles=2))
    base = Supervisor(cfg, MemoryTun("b0"), network=False)
    base.start()
    mouth = SimRadio(air=air_path, name="stranger")
    try:
        assert mouth.begin()
        configure(mouth, cfg.radio, channel=UP)
        mouth.stop_listening(base_listens(1))
        rng, seq, sent = random.Random(9), 0, 0
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            for _ in range(4):
                mouth.write(bytes((seq % 128,)) + rng.randbytes(31))
                seq, sent = seq + 1, sent + 1
            base.step(0.01)
        st = base.status()
        uplink = st["tx"]["uplink"]
        assert sent > 500 and st["rx"]["frames_in"] > 100, (sent, st["rx"])
        assert uplink["grants"] >= 3, uplink
        assert uplink["silent"] >= uplink["grants"] - 1, uplink  # (one may be running)
        assert st["link"] == "down"
    finally:
        mouth.close()
        base.shutdown()
