"""As root: three mobiles on one base, every radio a USB modem (issue 71): the native modem
firmware on ptys, two per node, the base's RX modem listening on pipes 1..3 (firmware 1.2's
settings record with the first bytes of pipes 2..5). Every mobile reaches the base and the
internet host through it. (Loaded at once, stock iperf3 from all three, one client of the
three lost its control connection in 2 of 5 runs, 2026-12-08: the cell on modems is not yet
one that shares; issue 71's note.)"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from test_testbed_multi import (  # noqa: F401  (pytestmark: root)
    N,
    backends,
    mobiles_reach_the_base_and_through_it,
    pytestmark,
    star_testbed,
)

from longge import testbed


@pytest.fixture(scope="module")
def star() -> Iterator[None]:
    with star_testbed("--serial"):
        yield


def test_three_mobiles_and_their_base_on_modems_reach_each_other(star: None) -> None:
    """Two modems a node, the base's included; each mobile pings the base and the internet
    host, and the base each mobile."""
    state = json.loads(testbed.paths()["state"].read_text())
    modems = {n for n in state["pids"] if n.startswith("modem-")}
    nodes = ["base", *(f"mobile{i + 1}" for i in range(N))]
    assert modems == {f"modem-{n}-{w}" for n in nodes for w in ("tx", "rx")}, modems
    mobiles_reach_the_base_and_through_it()
    assert backends() == {"serial"}
