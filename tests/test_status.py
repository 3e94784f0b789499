"""The daemon's status, typed (longge/daemon/status.py): fields by name, a newer daemon's extra
keys ignored, a missing one at its default, an open link told from a secured one."""

from __future__ import annotations

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
