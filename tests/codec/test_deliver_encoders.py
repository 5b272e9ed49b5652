"""basic.deliver has two encoders for its common case (one body frame): struct packs for
the pure build, librt's BytesWriter for the compiled one (roost/amqp/frame_encoders.py).
Both must write the same bytes, including the unsigned wire fields that BytesWriter takes
as signed ints, and the frames must read back as what was delivered."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost import _build
from roost.amqp import frame_encoders
from roost.amqp.codec import FrameReader, encode_basic_deliver, encode_shortstr
from roost.amqp.frames import BodyFrame, HeaderFrame, MethodFrame

shortstr = st.text(max_size=40).filter(lambda s: len(s.encode()) <= 255)


@given(
    channel=st.integers(1, 0xFFFF),
    consumer_tag=shortstr,
    delivery_tag=st.integers(1, 2**64 - 1),
    redelivered=st.booleans(),
    exchange=shortstr,
    routing_key=shortstr,
    properties=st.binary(min_size=2, max_size=64),
    body=st.binary(min_size=1, max_size=3000),
)
def test_both_encoders_write_the_same_bytes(
    channel: int,
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    properties: bytes,
    body: bytes,
) -> None:
    tag, ex, rk = (encode_shortstr(text) for text in (consumer_tag, exchange, routing_key))
    args = (channel, tag, delivery_tag, redelivered, ex, rk, properties, body)
    assert frame_encoders._deliver_written(*args) == frame_encoders._deliver_packed(*args)


@pytest.mark.parametrize("channel", [1, 0x7FFF, 0x8000, 0xFFFF])
@pytest.mark.parametrize("delivery_tag", [1, 2**31, 2**32 + 5, 2**63 + 1])
def test_a_delivery_reads_back_whole(channel: int, delivery_tag: int) -> None:
    body = b"x" * 1000 + b"end"
    data = encode_basic_deliver(
        channel, "amq.ctag-1", delivery_tag, True, "ex", "rk.é", b"\x80\x00\x01\x02", body, 131072
    )
    reader = FrameReader(expect_protocol_header=False)
    reader.feed(data)
    method, header, content = reader.frames()
    assert isinstance(method, MethodFrame) and method.channel == channel
    deliver = method.method
    assert (deliver.consumer_tag, deliver.delivery_tag, deliver.redelivered) == (
        "amq.ctag-1",
        delivery_tag,
        True,
    )
    assert (deliver.exchange, deliver.routing_key) == ("ex", "rk.é")
    assert isinstance(header, HeaderFrame) and header.body_size == len(body)
    assert header.channel == channel
    assert isinstance(content, BodyFrame) and content.payload == body
    assert reader.buffered == 0


def test_each_build_takes_its_faster_encoder() -> None:
    """Compiled, the writer (inline C writes); interpreted, the packs (one call each)."""
    compiled = "roost.amqp.frame_encoders" in _build.compiled_modules()
    if os.environ.get("ROOST_REQUIRE_TOOLS") == "1" and not _build.pure_requested():
        assert compiled
    assert frame_encoders.NATIVE is compiled
