"""As root: three mobiles on one base with the rf24 backend (issue 71): every radio is the
real pyrf24 on an emulated chip, the base's RX radio opens pipes 1..3 (pipes 2 and 3 with a
first byte of their own: datasheet §7.6), every mobile reaches the base and the internet host
through it, and the three loaded at once share the uplink."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_testbed_multi import (  # noqa: F401  (pytestmark: root)
    N,
    backends,
    mobiles_reach_the_base_and_through_it,
    pytestmark,
    star_testbed,
)

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
    mobiles_reach_the_base_and_through_it(base_back=False)
    assert backends() == {"rf24"}
    bound = udp_goodput_bps(RadioOptions(), 1400, OVERHEAD) / 1000
    sh = load_all("up", N, "600k", 4)
    assert not any(sh.errors), sh
    assert all(k >= 0.5 * sh.total / N for k in sh.kbps), sh
    assert sh.total >= 0.4 * bound, (sh, bound)
