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
