"""Stream mode's ARQ control frames on a secured link (issue 67): keyed and fresh. A stranger
without the key forges RESET, RESYNC and ACK to no effect, a genuine one recorded and sent
again acts on nothing, and the link carries everything as before; a restarted end (a new
control epoch, recorded higher) is heard again."""

from __future__ import annotations

import random

from test_arq import Channel, Run, check_delivery, run_link

from longge.measure.hostile_radio import Forger
from longge.protocol.arq import ArqSender
from longge.protocol.arq_frames import KeyedSeal, control_key
from longge.protocol.arq_receiver import ArqReceiver

KEY_AB, KEY_BA, WRONG = bytes(range(32)), bytes(range(1, 33)), bytes(range(2, 34))


def pair(sender_epoch: int = 5, receiver_epoch: int = 7) -> tuple[ArqSender, ArqReceiver]:
    """A sender on A and a receiver on B, each with its side's seal."""
    a_out, b_out = control_key(KEY_AB), control_key(KEY_BA)
    sender = ArqSender(seal=KeyedSeal(a_out, (b_out,), sender_epoch))
    receiver = ArqReceiver(seal=KeyedSeal(b_out, (a_out,), receiver_epoch))
    return sender, receiver


def established(packets: int = 3) -> tuple[Run, list[bytes]]:
    """A keyed link that carried ``packets`` packets; the control frames it sent back."""
    sender, receiver = pair()
    run = Run([bytes([i]) * 200 for i in range(packets)], sender=sender, receiver=receiver)
    back: list[bytes] = []

    class Recording(Channel):
        def send(self, frame: bytes, now: float) -> None:
            back.append(frame)
            super().send(frame, now)

    rng = random.Random(1)
    run_link(run, Channel(rng), Recording(rng), seconds=5.0)
    assert run.done()
    return run, back


def test_a_keyed_link_carries_everything_through_loss_and_repeats() -> None:
    rng = random.Random(3)
    sender, receiver = pair()
    run = Run([bytes([i % 251]) * (50 + i) for i in range(80)], sender=sender, receiver=receiver)
    run_link(run, Channel(rng, loss=0.2, dup=0.1), Channel(rng, loss=0.2, dup=0.1), 60.0)
    assert run.done()
    check_delivery(run, complete=True)
    assert run.sender.stats.control_forged == run.receiver.stats.control_forged == 0
    # repeats on the channel are replays by their numbers: refused, counted, harmless
    assert run.sender.stats.control_replayed + run.receiver.stats.control_replayed > 0


def test_a_strangers_reset_resync_and_ack_act_on_nothing() -> None:
    """What the hostile radio forges from what it hears (experiment hostile): no key, so
    nothing acts; each is counted."""
    run, back = established()
    eve = Forger(stream=True)
    for frame in back:
        eve.heard_down(frame)  # (it heard every ACK: the epoch and cum in clear)
    epoch, base = run.receiver.epoch, run.sender._base
    assert run.receiver.on_frame(eve.reset(), 10.0) == []
    assert run.receiver.epoch == epoch and run.receiver.stats.control_forged == 1
    sessions = run.sender.stats.resets
    run.sender.on_control(eve.resync(), 10.0)
    run.sender.on_control(eve.ack(), 10.0)
    assert run.sender.established and run.sender.stats.resets == sessions
    assert run.sender._base == base and run.sender.cwnd > run.sender.MIN_CWND
    assert run.sender.stats.control_forged == 2
    wrong = KeyedSeal(control_key(WRONG), (), epoch=1 << 31)  # a key of its own: no better
    run.sender.on_control(wrong.seal(bytes((0x82,))), 10.0)
    assert run.sender.established and run.sender.stats.control_forged == 3


def test_a_genuine_control_frame_sent_again_acts_on_nothing() -> None:
    """A recorded ACK (with BEHIND, or acknowledging), RESYNC-shaped or RESET, replayed:
    its (epoch, counter) is not above the last accepted."""
    run, back = established()
    replayed = run.sender.stats.control_replayed
    cwnd = run.sender.cwnd
    for frame in back:
        run.sender.on_control(frame, 11.0)
    assert run.sender.stats.control_replayed == replayed + len(back)
    assert run.sender.cwnd == cwnd and run.sender.established
    # the sender's first RESET, recorded and sent again, does not restart the receiver
    sender, receiver = pair()
    reset = sender.next_frame(0.0)
    assert reset is not None and receiver.on_frame(reset, 0.0) == []
    first_epoch = receiver.epoch
    receiver.on_frame(bytes((0, 1)) + bytes(10), 0.001)
    assert receiver.on_frame(reset, 0.002) == []
    assert receiver.epoch == first_epoch and receiver.stats.control_replayed == 1
    assert receiver._expected == 1  # (the frame after the RESET stands)


def test_a_restarted_end_is_heard_again() -> None:
    """A restarted sender draws a higher control epoch (recorded): its RESET is fresh; a
    restarted receiver likewise for its RESYNC and ACKs."""
    run, _ = established()
    again, _ = pair(sender_epoch=6)  # (the store's next epoch after a restart)
    reset = again.next_frame(20.0)
    assert reset is not None
    run.receiver.on_frame(reset, 20.0)
    ack = run.receiver.control(20.0)
    assert ack is not None
    again.on_control(ack, 20.001)
    assert again.established and again.epoch == run.receiver.epoch
    _, receiver = pair(receiver_epoch=8)
    receiver.on_frame(bytes((run.sender._next % 128,)) + b"x", 21.0)  # no session: RESYNC
    resync = receiver.control(21.0)
    assert resync is not None
    run.sender.on_control(resync, 21.001)
    assert not run.sender.established  # (it starts a new session: the receiver restarted)


def test_a_channel_message_goes_outside_the_window_and_only_its_sender_is_heard() -> None:
    """A CHANNEL frame (a MOVE or HERE: arq_frames.py) reaches the receiver while the
    sender's window is full and no ACK comes (the mobile's ACKs go to the uplink's old
    channel), and before any session; a stranger's, a repeat and a damaged one act on nothing;
    a message too long for one frame is not made one (it goes as a packet)."""
    from longge.protocol.channel_control import here_message

    sender, receiver = pair()
    for i in range(sender.window + 8):  # (a full window, never acknowledged)
        sender.offer(bytes([i % 128]) + b"data")
    sent = [sender.next_frame(t / 1000) for t in range(sender.window + 1)]
    assert sent[0] is not None and receiver.epoch is None  # (the RESET, lost)
    message = here_message(3, 38, 0, 5)
    frame = sender.channel_frame(message)
    assert frame is not None and len(frame) <= 32
    assert receiver.on_frame(frame, 1.0) == [] and list(receiver.channel) == [message]
    assert receiver.control(1.0) is None  # (no session, nothing to acknowledge: no ACK)
    assert receiver.on_frame(frame, 1.1) == [] and len(receiver.channel) == 1
    assert receiver.stats.control_replayed == 1
    eve = KeyedSeal(control_key(WRONG), (), epoch=1 << 31)
    assert receiver.on_frame(eve.seal(bytes((0x83,)) + message), 1.2) == []
    damaged = frame[:3] + bytes((frame[3] ^ 1,)) + frame[4:]
    assert receiver.on_frame(damaged, 1.3) == []
    assert receiver.stats.control_forged == 2 and len(receiver.channel) == 1
    assert sender.channel_frame(bytes(20)) is None  # (1 + 20 + 16 > 32)
    open_sender, open_receiver = ArqSender(), ArqReceiver()  # (an open link: CRC-8 only)
    frame = open_sender.channel_frame(bytes(20))
    assert frame is not None and open_receiver.on_frame(frame, 0.0) == []
    assert list(open_receiver.channel) == [bytes(20)]
