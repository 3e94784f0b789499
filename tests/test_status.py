"""The daemon's status, typed (longge/daemon/status.py): fields by name, a newer daemon's extra
keys ignored, a missing one at its default, an open link told from a secured one."""

from __future__ import annotations

from pathlib import Path

import pytest

from longge.daemon.status import NodeStatus


def test_a_status_object_reads_into_names() -> None:
    raw = {
        "node": {"role": "base", "peer": "10.24.0.2", "mtu": 1500, "future_key": 1},
        "link": "up",
        "peer_last_heard_s": 0.3,
        "radio": {"rate": "2M", "arc": 2},
        "tx": {"frames_sent": 12, "retransmissions": None, "queue_packets": 3, "sealed": 5},
        "rx": {"bytes_out": 900, "drops": {"checksum": 2}},
    }
    st = NodeStatus.of(raw)
    assert (st.node.role, st.node.peer, st.node.mtu) == ("base", "10.24.0.2", 1500)
    assert st.link == "up" and st.radio["rate"] == "2M" and st.secured
    assert (st.tx.frames_sent, st.tx.queue_packets, st.tx.max_rt) == (12, 3, 0)
    assert st.tx.retransmissions is None and st.rx.drops == {"checksum": 2}
    assert st.raw is raw
    bare = NodeStatus.of({"error": "no daemon"})
    assert bare.link == "down" and not bare.secured and bare.tx.frames_sent == 0


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_the_typed_status_carries_every_counter_the_processes_send(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """The status dataclasses once read only part of what the radio processes send
    (queue_shared, arq, waits_on were missing): measurements had to fall back to string keys.
    Every key of a running link's tx and rx is now a field, in both link modes."""
    from dataclasses import fields

    from daemonlink import make_link

    from longge.daemon.status import NodeInfo, NodeStatus, RxStatus, TxStatus
    from longge.radio.options import RadioOptions

    radio = RadioOptions(ard_us=1000, arc=15) if mode == "esb" else RadioOptions(mode="stream")
    with make_link(air_path, str(tmp_path), radio=radio) as link:
        link.pump(0.6)
        raw = link.mobile.status()
    st = NodeStatus.of(raw)
    missing: dict[str, set[str]] = {"tx": set(), "rx": set(), "node": set()}
    for part, cls in (("tx", TxStatus), ("rx", RxStatus), ("node", NodeInfo)):
        known = {f.name for f in fields(cls)}
        missing[part] |= set(raw[part]) - known
    assert not any(missing.values()), str({k: sorted(v) for k, v in missing.items()})
    assert st.tx.waits_on in ("link", "poll", "irq") and st.rx.frames_in > 0
