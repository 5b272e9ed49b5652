"""FrameReader and frame encoders: golden bytes, malformed frames, fuzz, splitting."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import body as pamqp_body
from pamqp import commands
from pamqp import frame as pamqp_frame
from pamqp import header as pamqp_header

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    NEED_DATA,
    PROTOCOL_HEADER,
    BodyFrame,
    FrameReader,
    HeaderFrame,
    HeartbeatFrame,
    MethodFrame,
    ProtocolHeader,
)
from roost.amqp.errors import FrameError

PROPS = m.BasicProperties(content_type="text/plain", delivery_mode=2).encode()


def frame(kind: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + end


def read_all(data: bytes, **kwargs: Any) -> list[Any]:
    reader = FrameReader(expect_protocol_header=False, **kwargs)
    reader.feed(data)
    frames = reader.frames()
    assert reader.next_frame() is NEED_DATA
    return frames


# -- golden ---------------------------------------------------------------------------------


def test_golden_heartbeat() -> None:
    assert codec.encode_heartbeat() == b"\x08\x00\x00\x00\x00\x00\x00\xce"
    assert read_all(b"\x08\x00\x00\x00\x00\x00\x00\xce") == [HeartbeatFrame(0)]


def test_golden_method_frame() -> None:
    raw = (
        b"\x01\x00\x01\x00\x00\x00\x0a"  # method frame, channel 1, 10-byte payload
        b"\x00\x3c\x00\x28\x00\x00\x01x\x00\x03"  # basic.publish "x" "" mandatory immediate
        b"\xce"
    )
    method = m.BasicPublish(exchange="x", routing_key="", mandatory=True, immediate=True)
    assert codec.encode_method_frame(1, method) == raw
    assert read_all(raw) == [MethodFrame(1, method)]


def test_golden_publish_with_content() -> None:
    raw = codec.encode_basic_publish(3, "", "q", False, False, b"\x00\x00", b"hello", 4096)
    assert raw == (
        b"\x01\x00\x03\x00\x00\x00\x0a\x00\x3c\x00\x28\x00\x00\x00\x01q\x00\xce"
        b"\x02\x00\x03\x00\x00\x00\x0e\x00\x3c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05"
        b"\x00\x00\xce"
        b"\x03\x00\x03\x00\x00\x00\x05hello\xce"
    )


def test_protocol_header_is_returned_verbatim() -> None:
    reader = FrameReader()
    reader.feed(b"AMQP\x00\x00")
    assert reader.next_frame() is NEED_DATA
    reader.feed(b"\x09\x01" + codec.encode_heartbeat())
    assert reader.frames() == [ProtocolHeader(PROTOCOL_HEADER), HeartbeatFrame(0)]
    garbage = FrameReader()
    garbage.feed(b"GET / HTTP/1.1\r\n")
    (header,) = [garbage.next_frame()]
    assert isinstance(header, ProtocolHeader) and header.raw == b"GET / HT"
    assert repr(NEED_DATA) == "NEED_DATA"


# -- content encoders (checked against pamqp's reader) --------------------------------------


def pamqp_frames(data: bytes) -> list[Any]:
    out = []
    while data:
        consumed, channel, value = pamqp_frame.unmarshal(data)
        out.append((channel, value))
        data = data[consumed:]
    return out


@settings(max_examples=60, deadline=None)
@given(
    body=st.binary(max_size=600),
    frame_max=st.sampled_from([0, 9, 10, 64, 4096]),
    tag=st.integers(0, 2**63 - 1),
)
def test_deliver_matches_pamqp(body: bytes, frame_max: int, tag: int) -> None:
    raw = codec.encode_basic_deliver(7, "ctag", tag, True, "ex", "rk", PROPS, body, frame_max)
    got = pamqp_frames(raw)
    (channel, deliver), (_, header), *bodies = got
    assert channel == 7 and isinstance(deliver, commands.Basic.Deliver)
    assert (deliver.consumer_tag, deliver.delivery_tag, deliver.redelivered) == ("ctag", tag, True)
    assert (deliver.exchange, deliver.routing_key) == ("ex", "rk")
    assert header.body_size == len(body) and header.properties.content_type == "text/plain"
    assert b"".join(b.value for _, b in bodies) == body
    chunk = frame_max - 8 if frame_max else max(len(body), 1)
    assert [len(b.value) for _, b in bodies] == [
        min(chunk, len(body) - i) for i in range(0, len(body), chunk)
    ]
    # and the same bytes as the generic path
    generic = codec.encode_method_frame(
        7, m.BasicDeliver(consumer_tag="ctag", delivery_tag=tag, redelivered=True,
                          exchange="ex", routing_key="rk")
    ) + codec.encode_content(7, 60, PROPS, body, frame_max)
    assert raw == generic


def test_publish_get_ok_return_match_pamqp_frames() -> None:
    body = b"x" * 10
    props = commands.Basic.Properties(content_type="text/plain", delivery_mode=2)

    def expected(method: Any) -> bytes:
        return (
            pamqp_frame.marshal(method, 2)
            + pamqp_frame.marshal(pamqp_header.ContentHeader(0, len(body), props), 2)
            + pamqp_frame.marshal(pamqp_body.ContentBody(body), 2)
        )

    assert codec.encode_basic_publish(2, "e", "k", True, False, PROPS, body, 4096) == expected(
        commands.Basic.Publish(exchange="e", routing_key="k", mandatory=True)
    )
    assert codec.encode_basic_get_ok(2, 9, False, "e", "k", 4, PROPS, body, 4096) == expected(
        commands.Basic.GetOk(delivery_tag=9, exchange="e", routing_key="k", message_count=4)
    )
    assert codec.encode_basic_return(2, 312, "NO_ROUTE", "e", "k", PROPS, body, 4096) == expected(
        commands.Basic.Return(reply_code=312, reply_text="NO_ROUTE", exchange="e", routing_key="k")
    )


def test_empty_body_has_no_body_frame() -> None:
    frames = read_all(codec.encode_basic_deliver(1, "c", 1, False, "", "q", PROPS, b"", 4096))
    assert [type(f) for f in frames] == [MethodFrame, HeaderFrame]
    assert frames[1] == HeaderFrame(1, 60, 0, PROPS)


def test_frame_max_too_small_for_a_body() -> None:
    with pytest.raises(ValueError):
        codec.encode_content(1, 60, PROPS, b"x", 8)


# -- the reader on many frames --------------------------------------------------------------


def sample_stream(count: int = 300) -> tuple[bytes, list[Any]]:
    parts: list[bytes] = []
    frames: list[Any] = []
    for i in range(count):
        body = bytes([i % 256]) * (i % 50)
        parts.append(codec.encode_basic_publish(1, "ex", f"k{i}", False, False, PROPS, body, 32))
        frames.append(MethodFrame(1, m.BasicPublish(exchange="ex", routing_key=f"k{i}")))
        frames.append(HeaderFrame(1, 60, len(body), PROPS))
        frames.extend(BodyFrame(1, body[j : j + 24]) for j in range(0, len(body), 24))
        if i % 7 == 0:
            parts.append(codec.encode_heartbeat())
            frames.append(HeartbeatFrame(0))
    return b"".join(parts), frames


def test_hundreds_of_frames_in_one_buffer() -> None:
    data, expected = sample_stream()
    assert read_all(data) == expected


def test_chunked_feeding_and_compaction() -> None:
    data, expected = sample_stream(3000)
    reader = FrameReader(expect_protocol_header=False)
    got: list[Any] = []
    for start in range(0, len(data), 1000):
        reader.feed(data[start : start + 1000])
        got.extend(reader.frames())
        assert reader.buffered < 1000 + 200  # consumed bytes do not pile up
    assert got == expected
    assert reader._pos < 70000 and len(reader._buf) < 70000 + 1000


def test_a_large_frame_arriving_in_chunks_is_joined_once() -> None:
    """A frame above 64 KiB still arriving collects its chunks instead of copying the
    buffer again with each read; the frames around it come out as usual."""
    body = bytes(range(256)) * 4096  # 1 MiB
    data = frame(3, 1, b"x") + frame(3, 1, body) + frame(3, 1, b"y")
    reader = FrameReader(frame_max=0, expect_protocol_header=False)
    got: list[Any] = []
    for start in range(0, len(data), 4096):
        chunk = data[start : start + 4096]
        reader.feed(memoryview(chunk) if start % 8192 else bytearray(chunk))
        got.extend(reader.frames())
        if 70_000 < start < len(body) - 8192:
            assert reader._pending, "a large frame collects its chunks"
            assert len(reader._buf) == 0
        assert reader.buffered == start + len(chunk) - sum(8 + len(f.payload) for f in got)
    assert got == [BodyFrame(1, b"x"), BodyFrame(1, body), BodyFrame(1, b"y")]
    assert reader.buffered == 0 and not reader._pending


def test_frames_raises_at_the_first_bad_frame() -> None:
    good = codec.encode_heartbeat()
    reader = FrameReader(expect_protocol_header=False)
    reader.feed(good + good + frame(7, 0, b"") + good)
    with pytest.raises(FrameError):
        reader.frames()
    with pytest.raises(FrameError):  # the bad frame stays first in line
        reader.next_frame()
    stepwise = FrameReader(expect_protocol_header=False)
    stepwise.feed(good + good + frame(7, 0, b""))
    assert [stepwise.next_frame(), stepwise.next_frame()] == [HeartbeatFrame(0)] * 2
    with pytest.raises(FrameError):
        stepwise.next_frame()


def test_frame_max_can_change_after_tune() -> None:
    reader = FrameReader(frame_max=0, expect_protocol_header=False)
    big = frame(3, 1, b"x" * 5000)
    reader.feed(big)
    assert reader.frames() == [BodyFrame(1, b"x" * 5000)]
    reader.frame_max = 4096
    reader.feed(big)
    with pytest.raises(FrameError) as info:
        reader.frames()
    assert info.value.reply_code == 501


# -- malformed frames -----------------------------------------------------------------------

PUBLISH = codec.encode_method_frame(1, m.BasicPublish(routing_key="q"))
ACK_PAYLOAD = m.BasicAck(delivery_tag=1).encode()

MALFORMED: list[tuple[str, bytes, int]] = [
    ("bad frame end", frame(1, 1, ACK_PAYLOAD, end=b"\x00"), 501),
    ("payload one byte over frame_max", frame(3, 1, b"x" * 4097), 501),
    ("unknown frame type 7", frame(7, 1, b"abc"), 501),
    ("unknown frame type 0", frame(0, 0, b""), 501),
    ("unknown frame type 4", frame(4, 0, b""), 501),
    ("heartbeat with a payload", frame(8, 0, b"abc"), 501),
    ("heartbeat on channel 1", frame(8, 1, b""), 505),
    ("method payload of 2 bytes", frame(1, 1, b"\x00\x3c"), 501),
    ("unknown method", frame(1, 1, b"\x00\x3c\x03\xe7"), 503),
    ("unknown class", frame(1, 1, b"\x00\x63\x00\x0a"), 503),
    ("truncated method args", frame(1, 1, ACK_PAYLOAD[:-1]), 501),
    ("overlong method args", frame(1, 1, ACK_PAYLOAD + b"\x00"), 501),
    ("invalid UTF-8 shortstr",
     frame(1, 1, b"\x00\x32\x00\x0a\x00\x00\x01\xff\x00\x00\x00\x00\x00"), 501),
    ("bad table type tag",
     frame(1, 1, b"\x00\x32\x00\x0a\x00\x00\x01q\x00\x00\x00\x00\x03\x01aZ"), 502),
    ("truncated table",
     frame(1, 1, b"\x00\x32\x00\x0a\x00\x00\x01q\x00\x00\x00\x00\x1e\x01aV"), 501),
    ("header class mismatch", frame(2, 1, struct.pack(">HHQH", 50, 0, 3, 0)), 505),
    ("header weight not 0", frame(2, 1, struct.pack(">HHQH", 60, 1, 3, 0)), 505),
    ("header payload of 12 bytes", frame(2, 1, struct.pack(">HHQ", 60, 0, 3)), 501),
    ("header payload of 5 bytes", frame(2, 1, b"\x00\x3c\x00\x00\x00"), 501),
    ("header on channel 0", frame(2, 0, struct.pack(">HHQH", 60, 0, 3, 0)), 505),
    ("body on channel 0", frame(3, 0, b"abc"), 505),
]


@pytest.mark.parametrize(("raw", "code"), [c[1:] for c in MALFORMED],
                         ids=[c[0] for c in MALFORMED])
def test_malformed(raw: bytes, code: int) -> None:
    with pytest.raises(FrameError) as info:
        read_all(raw, frame_max=4096)
    assert info.value.reply_code == code
    assert info.value.reply_text.startswith(m.REPLY_NAMES[code] + " - ")


def test_payload_of_exactly_frame_max_is_accepted() -> None:
    """RabbitMQ's tolerance: it rejects payloads above frame_max, not frames above it."""
    assert read_all(frame(3, 1, b"x" * 4096), frame_max=4096) == [BodyFrame(1, b"x" * 4096)]


def test_oversize_is_rejected_before_the_payload_arrives() -> None:
    reader = FrameReader(frame_max=4096, expect_protocol_header=False)
    reader.feed(struct.pack(">BHI", 3, 1, 10**9))
    with pytest.raises(FrameError):
        reader.next_frame()


# -- fuzz: frames or FrameError, nothing else ----------------------------------------------

VALID_FRAMES = st.lists(
    st.sampled_from(
        [
            codec.encode_heartbeat(),
            PUBLISH,
            codec.encode_content(1, 60, PROPS, b"body", 4096),
            codec.encode_content(2, 60, b"\x00\x00", b"x" * 40, 20),
            codec.encode_method_frame(0, m.ConnectionStartOk(client_properties={"a": [1, 2.5]},
                                                             response=b"\x00u\x00p")),
            codec.encode_method_frame(5, m.QueueDeclare(queue="é", arguments={"x": {"y": None}})),
        ]
    ),
    max_size=6,
).map(b"".join)


def parse(chunks: list[bytes], expect_header: bool) -> tuple[list[Any], int | None]:
    """Feed chunks; return the frames and the FrameError code (None if no error)."""
    reader = FrameReader(frame_max=4096, expect_protocol_header=expect_header)
    frames: list[Any] = []
    try:
        for chunk in chunks:
            reader.feed(chunk)
            while (item := reader.next_frame()) is not NEED_DATA:
                frames.append(item)
    except FrameError as error:
        return frames, error.reply_code
    return frames, None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.tuples(VALID_FRAMES, st.binary(max_size=30), st.integers(0, 400)).map(
            # valid frames with some bytes overwritten: gets past the frame header
            lambda t: t[0][: t[2]] + t[1] + t[0][t[2] + len(t[1]) :]
        ),
    ),
    expect_header=st.booleans(),
)
def test_fuzz_whole_and_byte_by_byte(data: bytes, expect_header: bool) -> None:
    whole = parse([data], expect_header)
    trickled = parse([data[i : i + 1] for i in range(len(data))], expect_header)
    assert whole == trickled


@settings(max_examples=40, deadline=None)
@given(VALID_FRAMES)
def test_valid_stream_split_at_every_offset(data: bytes) -> None:
    expected, error = parse([data], False)
    assert error is None
    for cut in range(len(data) + 1):
        assert parse([data[:cut], data[cut:]], False) == (expected, None)


def test_frames_and_next_frame_agree_on_fuzzed_prefix() -> None:
    data, expected = sample_stream(20)
    reader = FrameReader(expect_protocol_header=False)
    reader.feed(data[:-3])
    assert reader.frames() == expected[:-1]
    reader.feed(data[-3:])
    assert reader.frames() == expected[-1:]
