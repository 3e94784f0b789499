"""The stream-mode TX process's sleep (daemon/stream_tx.py, ``StreamSending.timeout``): the
ARQ's timers wake it only when a frame could go. The radio processes run SCHED_FIFO: one that
woke for an ARQ frame it could not send yet (its chip's TX FIFO held frames) turned straight
back and spun, and starved the other radio processes on its core; measured on the testbed at
250 kbit/s with 10 % frame loss, the base's TX process went unscheduled for 0.53 s at a time
(a 0.25-s sleep), and its ACKs with it."""

from __future__ import annotations

from pathlib import Path

from test_multinode import in_mode, mobile_config

from longge.daemon.peers import TxCounters, make_queues, senders
from longge.daemon.stream_tx import StreamSending
from longge.protocol.arq_frames import ACK, control_frame


def test_a_frame_due_while_the_chip_is_busy_waits_for_the_chips_news(tmp_path: Path) -> None:
    cfg = in_mode(mobile_config(tmp_path, str(tmp_path / "air.sock"), 0), "stream")
    table = senders(cfg)
    out = StreamSending(cfg, table, make_queues(cfg, table), TxCounters())
    arq = out.arqs[0]
    assert arq.next_frame(0.0) is not None  # RESET
    arq.on_control(control_frame(bytes((ACK, arq.epoch, 0))), 0.0)
    arq.offer(b"x" * 8)
    assert arq.next_frame(0.0) is not None
    late = 1.0  # its ACK long overdue: the frame goes again at once if it can
    assert out.timeout(late) == 0.0
    out.chip_busy = True  # (fill: the TX FIFO holds frames; each one's end wakes the loop)
    assert out.timeout(late) > 0.1
    out.chip_busy = False
    assert out.timeout(late) == 0.0
