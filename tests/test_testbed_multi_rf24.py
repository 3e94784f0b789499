"""As root: three mobiles on one base with the rf24 backend (issue 71): every radio is the
real pyrf24 on an emulated chip, the base's RX radio opens pipes 1..3 (pipes 2 and 3 with a
first byte of their own: datasheet §7.6), every mobile reaches the base and the internet host
through it, and the three loaded at once share the uplink."""

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
    with star_testbed("--backend", "rf24"):
        yield


def test_three_mobiles_on_real_pyrf24_reach_the_base_and_share_the_uplink(star: None) -> None:
    """Each mobile pings the base and the internet host; stock iperf3 from all three at once,
    each offered 600 kbit/s: every client gets its result, each at least half its fair share
    of what they carried together, together at least 0.4 of one link's bound (margins for a
    busy machine, not targets: ``experiment multinode --backend rf24`` measures)."""
    for i in range(N):
        for dst in (testbed.BASE_IP, testbed.INET_IP):
            r = in_ns(f"lg-mobile{i + 1}", "ping", "-c", "3", "-i", "0.3", "-W", "5", dst)
            assert r.returncode == 0, (i, dst, r.stdout + r.stderr)
    nodes = json.loads(cli("testbed", "status", "--json").stdout)["nodes"]
    assert {n["radio"]["backend"] for n in nodes.values()} == {"rf24"}, nodes
    bound = udp_goodput_bps(RadioOptions(), 1400, OVERHEAD) / 1000
    sh = load_all("up", N, "600k", 4)
    assert not any(sh.errors), sh
    assert all(k >= 0.5 * sh.total / N for k in sh.kbps), sh
    assert sh.total >= 0.4 * bound, (sh, bound)
