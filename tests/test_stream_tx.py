"""The stream-mode TX process's sleep (daemon/stream_tx.py, ``StreamSending.wake_at``, with its
parts: radio_tx.TxPump.sleep): the ARQ's timers wake it only when a frame could go. The radio
processes run SCHED_FIFO: one that woke for an ARQ frame it could not send yet (its chip's TX
FIFO held frames) turned straight back and spun, and starved the other radio processes on its
core; measured on the testbed at 250 kbit/s with 10 % frame loss, the base's TX process went
unscheduled for 0.53 s at a time (a 0.25-s sleep), and its ACKs with it."""

from __future__ import annotations

import struct
from pathlib import Path

from test_multinode import base_config, in_mode, mobile_config, mobile_ip, packet

from longge.daemon.child import LONGEST_WAIT_S
from longge.daemon.peers import TxCounters, make_queues, senders
from longge.daemon.radio_owner import RadioOwner
from longge.daemon.stream_tx import ANSWER_LISTEN_S, StreamSending
from longge.protocol.arq import ArqSender
from longge.protocol.arq_frames import ACK, Crc8Seal, KeyedSeal, control_frame
from longge.protocol.part import wake_in


def peer_of(arq: ArqSender) -> KeyedSeal | Crc8Seal:
    """The seal of the peer's receiver, as far as its ACKs to ``arq`` go (a secured link: its
    key; the tests' configs are secured)."""
    seal = arq.seal
    return KeyedSeal(seal.keys_in[0], (), epoch=1) if isinstance(seal, KeyedSeal) else Crc8Seal()


def sleep_s(out: StreamSending, now: float) -> float:
    """How long the pump sleeps, for the mode's moment and its parts' (TxPump.sleep)."""
    return wake_in(now, LONGEST_WAIT_S, out.parts(), out.wake_at(now))


def test_a_frame_due_while_the_chip_is_busy_waits_for_the_chips_news(tmp_path: Path) -> None:
    cfg = in_mode(mobile_config(tmp_path, str(tmp_path / "air.sock"), 0), "stream")
    table = senders(cfg, StreamSending.ARQ)
    out = StreamSending(cfg, table, make_queues(cfg, table), TxCounters(), RadioOwner())
    arq = out.arqs[0]
    assert arq.next_frame(0.0) is not None  # RESET
    arq.on_control(peer_of(arq).seal(bytes((ACK, arq.epoch, 0))), 0.0)
    assert arq.established
    arq.offer(b"x" * 8)
    assert arq.next_frame(0.0) is not None
    late = 1.0  # its ACK long overdue: the frame goes again at once if it can
    assert sleep_s(out, late) == 0.0
    out.chip_busy = True  # (fill: the TX FIFO holds frames; each one's end wakes the loop)
    assert sleep_s(out, late) > 0.1
    out.chip_busy = False
    assert sleep_s(out, late) == 0.0


def icmp(dst: str, kind: int, tag: int) -> bytes:
    """An 84-byte ICMP packet (``kind`` 8: an echo request) from the base to ``dst``."""
    s, d = (bytes(int(x) for x in a.split(".")) for a in ("10.24.0.1", dst))
    head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 84, tag, 0, 64, 1, 0, s, d)
    return head + bytes((kind,)) + bytes(63)


def test_a_base_that_sent_a_ping_listens_for_its_answer_before_it_sends_its_acks(
    tmp_path: Path,
) -> None:
    """A base that listens between its bursts sent a light mobile a ping: for
    ANSWER_LISTEN_S it keeps listening, its ACKs to the other mobiles waiting (the answer
    comes on the downlink's channel, and met the base's ACKs to the busy mobiles one time in
    eight), till the answer's last frame is heard; never while it has packets to send, nor
    for a packet that asks for no answer."""
    cfg = in_mode(base_config(tmp_path, str(tmp_path / "air.sock"), 3), "stream")
    table = senders(cfg, StreamSending.ARQ)
    queues = make_queues(cfg, table)
    out = StreamSending(cfg, table, queues, TxCounters(), RadioOwner())
    assert out.listen is not None
    out.listen.listening = True
    for arq in out.arqs:  # (every session up)
        arq.next_frame(0.0)
        arq.on_control(peer_of(arq).seal(bytes((ACK, arq.epoch, 0))), 0.0)
        assert arq.established
    t = 1.0
    out.ack(0, control_frame(bytes((ACK, 7, 0))), t)  # an ACK for busy mobile 1 waits
    queues.push(2, icmp(mobile_ip(2), 0, 1), t)  # a ping's reply: asks for nothing
    out.load(t)
    while out.arqs[2].next_frame(t) is not None:
        pass
    assert not out.awaits_answer(t)
    queues.push(2, icmp(mobile_ip(2), 8, 2), t)  # a ping to mobile 3
    out.load(t)
    assert not out.awaits_answer(t)  # (its frames to go first)
    while out.arqs[2].next_frame(t) is not None:  # (they went)
        pass
    assert out.awaits_answer(t) and out.awaits_answer(t + ANSWER_LISTEN_S * 0.9)
    assert not out.awaits_answer(t + ANSWER_LISTEN_S)
    out.listen.last_end = t + 0.001  # (the answer's last frame heard)
    assert not out.awaits_answer(t + 0.0015)
    queues.push(2, icmp(mobile_ip(2), 8, 3), t + 0.2)
    queues.push(0, packet("10.24.0.1", mobile_ip(0), 1400, 4), t + 0.2)  # (more to send)
    out.load(t + 0.2)
    while out.arqs[2].next_frame(t + 0.2) is not None:  # (the ping's went, mobile 1's wait)
        pass
    assert not out.awaits_answer(t + 0.2)
