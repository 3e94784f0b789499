"""The radio processes' pair messages (daemon/messages.py): every kind survives encode and
decode unchanged, and a datagram that is none of them decodes to None, never raises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from longge.daemon.messages import (
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
    decode,
    encode,
)
from longge.protocol.uplink import Grant

index = st.integers(0, 255)
frame = st.binary(min_size=1, max_size=MAX_LEN - 2)
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
    assert decode(b"x\x01" + bytes(MAX_LEN - 1)) is None  # (longer than any radio frame)
