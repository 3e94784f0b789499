"""A base for several mobiles in stream mode (issue 41): the chips send without ESB's
acknowledgements and LongGe's ARQ acknowledges on the reverse channel, one ARQ per mobile.
The base's bursts go to one mobile at a time (its address set between bursts); the uplink is
granted as in ESB mode, and a mobile's ACKs go at any time (docs/design.md §4, "Several
mobiles"). The daemons run over in-memory TUNs and the emulated air (test_multinode.py's
star)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from test_multinode import N, base_config, mobile_config, mobile_ip, packet, star

from longge.config import NodeConfig
from longge.radio.options import RadioOptions

STREAM = RadioOptions(mode="stream")


def streamed(cfg: NodeConfig) -> NodeConfig:
    return replace(cfg, radio=STREAM)


def test_a_base_in_stream_mode_serves_each_mobile_its_own_packets_both_ways(
    air_path: str, tmp_path: Path
) -> None:
    """Packets for three mobiles interleaved on the base's TUN: each mobile gets its own,
    whole and in order (the ARQ loses nothing), and nobody else's; then the three mobiles send
    at once, each in its grants, and the base gets every packet of each, in order."""
    cfgs = [streamed(mobile_config(tmp_path, air_path, i)) for i in range(N)]
    with star(air_path, tmp_path, cfgs, streamed(base_config(tmp_path, air_path))) as s:
        assert s.heard(), s.base.status()["rx"]
        sent: list[list[bytes]] = [[] for _ in range(N)]
        for k in range(12):
            for i in range(N):
                p = packet("10.24.0.1", mobile_ip(i), 300 + 91 * k, 100 * i + k)
                sent[i].append(p)
                s.btun.peer.send(p)
        for i in range(N):
            got = s.collect(s.mtuns[i], len(sent[i]), 20)
            assert got == sent[i], (i, len(got), s.base.status()["tx"])
        ups = [
            [packet(mobile_ip(i), "10.24.0.1", 1000, 2000 + 100 * i + k) for k in range(20)]
            for i in range(N)
        ]
        for k in range(20):
            for i in range(N):
                s.mtuns[i].peer.send(ups[i][k])
        got = s.collect(s.btun, N * 20, 30)
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
