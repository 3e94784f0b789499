"""``status --prometheus``: the daemons' counters as Prometheus text, checked by promtool
(Debian's prometheus package) and against the status they came from."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import required
from daemonlink import ip_packet, make_link
from prometheus_client.parser import text_string_to_metric_families

from longge.cli import main
from longge.daemon.metrics import COUNTERS, exposition
from longge.daemon.status import NodeStatus
from longge.radio.options import RadioOptions

#: run.sh puts it beside the venv's python (taken from Debian's package), or the system has it
PROMTOOL = shutil.which("promtool") or shutil.which(
    "promtool", path=str(Path(sys.executable).parent)
)
pytestmark = required(
    None if PROMTOOL else "promtool is missing (Debian package prometheus)", "the metrics test"
)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def assert_promtool_passes(text: str) -> None:
    """promtool's ``check metrics`` finds nothing to say of ``text``."""
    assert PROMTOOL is not None
    lint = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint


def test_status_prometheus_passes_promtool_and_says_what_status_says(
    air_path: str, tmp_path: Path, capsys: object
) -> None:
    with make_link(air_path, str(tmp_path)) as link:
        packets = [ip_packet(300, i) for i in range(5)]
        assert link.send(link.mtun, packets, to=link.btun) == packets
        link.pump(0.6)
        mobile = NodeStatus.of(link.mobile.status())
        base = NodeStatus.of(link.base.status())
        text = exposition({"mobile": mobile, "base": base, "gone": None})
        done = threading.Event()

        def serve() -> None:  # (the supervisors answer their sockets as they are stepped)
            while not done.is_set():
                link.base.step(0.01)

        server = threading.Thread(target=serve)
        server.start()
        try:
            asked = main(["status", "--prometheus", "--control", link.base.cfg.control])
        finally:
            done.set()
            server.join()
        assert asked == 0
        printed = capsys.readouterr().out  # type: ignore[attr-defined]
    assert_promtool_passes(text)
    got = samples(text)
    node = (("node", "base"),)
    assert got[("longge_rx_packets_total", node)] == base.rx.packets_out >= 5
    assert got[("longge_rx_bytes_total", node)] == base.rx.bytes_out >= 1500
    assert got[("longge_tx_packets_total", (("node", "mobile"),))] == mobile.tx.packets_in >= 5
    assert got[("longge_link_up", node)] == 1.0
    for name, _, where, key in COUNTERS:  # every plain counter, as the status says it
        status = getattr(getattr(base, where), key)
        assert got[(f"longge_{name}_total", node)] == status, name
    assert got[("longge_daemon_up", (("node", "gone"),))] == 0.0
    assert not any(name.startswith("longge_adapt") for name, _ in got)  # (no adapt: none)
    assert not any(
        labels == (("node", "gone"),) for name, labels in got if name != "longge_daemon_up"
    )
    # the command prints the same families for the node it was pointed at
    cli = samples(printed)
    assert cli[("longge_daemon_up", (("node", "node"),))] == 1.0
    assert cli[("longge_rx_packets_total", (("node", "node"),))] >= 5


def _adapting(
    air_path: str, tmp_path: Path, radio: RadioOptions, in_order: bool
) -> tuple[NodeStatus, NodeStatus, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """Two daemons with ``radio`` carry 40 packets up the link (all of them; in order if
    ``in_order``); (the mobile's status, the base's, the samples of both as metrics, which
    promtool passes)."""
    with make_link(air_path, str(tmp_path), radio=radio) as link:
        packets = [ip_packet(300, i) for i in range(40)]
        got = link.send(link.mtun, packets, to=link.btun)
        assert got == packets if in_order else sorted(got) == sorted(packets)
        link.pump(0.6)
        mobile = NodeStatus.of(link.mobile.status())
        base = NodeStatus.of(link.base.status())
    text = exposition({"mobile": mobile, "base": base})
    assert_promtool_passes(text)
    return mobile, base, samples(text)


def test_an_adapting_link_shows_its_decisions_as_metrics(air_path: str, tmp_path: Path) -> None:
    """``adapt``: the retries in force, the failed share, each direction's rate and the
    decisions' counters, as the status says them; promtool passes them."""
    from longge.daemon.metrics import ADAPT_COUNTERS

    mobile, base, got = _adapting(air_path, tmp_path, RadioOptions(adapt=True), in_order=True)
    assert mobile.tx.adapt is not None and base.rx.adapt is not None
    m, b = (("node", "mobile"),), (("direction", "rx"), ("node", "base"))
    assert got[("longge_adapt_arc", m)] == mobile.tx.adapt["arc"]
    assert got[("longge_adapt_rate_bytes_per_second", (("direction", "tx"), *m))] == 2e6 / 8
    assert got[("longge_adapt_rate_bytes_per_second", b)] == 2e6 / 8
    tx_rate, tx_power = mobile.tx.adapt["rate"], mobile.tx.adapt["power"]
    watts = 10 ** (tx_power["dbm"] / 10) / 1000  # (−12 dBm, the nodes' default: 63 µW)
    assert got[("longge_adapt_tx_power_watts", m)] == pytest.approx(watts)
    for name, _, part, key in ADAPT_COUNTERS:
        fields = {"retry": mobile.tx.adapt, "power": tx_power}.get(part, tx_rate)
        if key in fields:
            assert got[(f"longge_{name}_total", (("direction", "tx"), *m))] == fields[key]
    assert got[("longge_adapt_retry_decisions_total", (("direction", "tx"), *m))] >= 1
    assert got[("longge_adapt_rate_announcements_total", b)] == base.rx.adapt["announcements"]


def test_a_stream_link_adapting_its_rate_has_no_retry_count(air_path: str, tmp_path: Path) -> None:
    """Stream mode with ``adapt``: the rate and its decisions as metrics, the failed share
    (of the ARQ's frames), no ARC (the chips send without acknowledgements); promtool
    passes them."""
    radio = RadioOptions(mode="stream", adapt=True)
    mobile, base, got = _adapting(air_path, tmp_path, radio, in_order=False)
    assert mobile.tx.adapt is not None and mobile.tx.adapt["mode"] == "stream"
    assert not any(name == "longge_adapt_arc" for name, _ in got)
    m = (("direction", "tx"), ("node", "mobile"))
    assert got[("longge_adapt_rate_bytes_per_second", m)] == 2e6 / 8
    assert got[("longge_adapt_rate_switches_total", m)] == mobile.tx.adapt["rate"]["switches"]
    assert base.rx.adapt is not None and base.rx.adapt["rate"] == "2M"
