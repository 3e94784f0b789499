"""The radio processes' pair messages (daemon/messages.py): every kind survives encode and
decode unchanged, and a datagram that is none of them decodes to None, never raises."""

from __future__ import annotations

import socket

from hypothesis import given
from hypothesis import strategies as st

from longge.daemon.messages import (
    FRAME_MAX,
    MAX_LEN,
    AckToSend,
    AnswerAsked,
    FramesCame,
    GrantHeard,
    Heard,
    HeardAside,
    Message,
    PeerAck,
    Released,
    Say,
    Sent,
    SwitchAt,
    decode,
    encode,
    received,
    send,
)
from longge.protocol.uplink import Grant

index = st.integers(0, 255)
frame = st.binary(min_size=1, max_size=FRAME_MAX)
moment = st.floats(0, 1e9, allow_nan=False)
grant = st.builds(
    Grant,
    seconds=st.integers(1, 1000).map(lambda ms: ms / 1000),
    hold=st.booleans(),
    number=st.integers(0, 255),
    deaf=st.booleans(),
)
messages = st.one_of(
    st.builds(AckToSend, index, frame, st.booleans()),
    st.builds(PeerAck, index, frame),
    st.builds(GrantHeard, index, grant, moment),
    st.builds(AnswerAsked, index, moment),
    st.builds(Released, index, index),
    st.builds(Heard, index, st.booleans()),
    st.builds(FramesCame, index),
    st.builds(HeardAside, index, frame),
    st.builds(Say, index, st.binary(min_size=1, max_size=MAX_LEN - 2)),
    st.builds(SwitchAt, st.integers(0, 125), st.integers(0, 125), moment),
    st.builds(Sent, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
)


@given(messages)
def test_every_message_comes_back_as_it_went(msg: Message) -> None:
    data = encode(msg)
    assert 2 <= len(data) <= MAX_LEN
    assert decode(data) == msg


@given(st.binary(max_size=MAX_LEN + 8))
def test_any_datagram_decodes_to_a_message_or_none(data: bytes) -> None:
    msg = decode(data)
    if msg is not None:
        assert encode(msg) == data


def test_what_is_not_a_message_is_none() -> None:
    assert decode(b"") is None and decode(b"o") is None
    assert decode(b"o\x00") is None  # (an ACK with no frame)
    assert decode(b"g\x00" + bytes(5)) is None  # (a grant cut short)
    assert decode(b"h\x00\x01") is None  # (a heard with a tail)
    assert decode(b"z\x00abc") is None
    assert decode(b"x\x01" + bytes(FRAME_MAX + 1)) is None  # (longer than any radio frame)
    assert decode(b"w\x01" + bytes(10)) is None  # (a switch names no peer)


def test_the_pair_carries_messages_in_order_passes_garbage_over_and_says_when_full() -> None:
    """What one process sends the other receives in order; a datagram that is no message is
    passed over; a full pair refuses (the sender counts it) instead of blocking."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b:
        for end in (a, b):
            end.setblocking(False)
        msgs: list[Message] = [FramesCame(1), Heard(2, True), HeardAside(3, b"xy")]
        assert send(a, msgs[0])
        a.send(b"garbage")
        assert send(a, msgs[1]) and send(a, msgs[2])
        assert list(received(b)) == msgs
        assert list(received(b)) == []
        full = 0
        while send(a, FramesCame(0)):
            full += 1
            assert full < 100_000
        assert full > 0 and len(list(received(b))) == full
