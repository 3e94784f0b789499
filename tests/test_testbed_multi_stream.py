"""As root: the testbed with three mobiles on one base in stream mode (issue 41): every mobile
reaches the base, and the three loaded at once share both directions, each mobile with its
own ARQ, the base's bursts to one at a time and the uplink granted (docs/design.md §4,
"Several mobiles"). ESB's are test_testbed_multi.py's."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from test_testbed_multi import N, cli, in_ns, pytestmark, star_testbed  # noqa: F401  (root)

from longge import testbed
from longge.measure.model import udp_goodput_bps
from longge.measure.multinode import load_all
from longge.protocol.secure import OVERHEAD
from longge.radio.options import RadioOptions


@pytest.fixture(scope="module")
def star() -> Iterator[None]:
    with star_testbed("--mode", "stream"):
        yield


def test_three_mobiles_in_stream_mode_share_both_directions(star: None) -> None:
    """Each mobile answers the base's ping; stock iperf3 from (then to) all three at once,
    each offered 600 kbit/s (together 1.3 x what one link carries): every client gets its
    result, each mobile at least half its fair share of what they carried together, together
    at least 0.4 of one link's bound (margins for a busy machine, not targets: the figures
    are tools/multinode_look's); the base granted the uplink, and every mobile sent in its
    grants."""
    for i in range(N):
        r = in_ns("lg-base", "ping", "-c", "3", "-i", "0.3", "-W", "5", testbed.mobile_ip(i))
        assert r.returncode == 0, (i, r.stdout + r.stderr)
    bound = udp_goodput_bps(RadioOptions(mode="stream"), 1400, OVERHEAD) / 1000
    for direction in ("up", "down"):
        sh = load_all(direction, N, "600k", 4)
        assert not any(sh.errors), sh
        assert all(k >= 0.5 * sh.total / N for k in sh.kbps), sh
        assert sh.total >= 0.4 * bound, (sh, bound)
    nodes = json.loads(cli("testbed", "status", "--json").stdout)["nodes"]
    assert nodes["base"]["tx"]["mode"] == "stream" and nodes["base"]["tx"]["uplink"]["grants"] > 0
    for i in range(N):
        assert nodes[f"mobile{i + 1}"]["tx"]["uplink"]["granted"] == 1, nodes[f"mobile{i + 1}"]
