"""The AMQP 1.0 message sections of stream clients, against rstream's own encoder and
decoder (the one RabbitMQ's Python users have)."""

from __future__ import annotations

import datetime

from rstream import AMQPMessage, Properties, amqp_decoder

from roost.stream_protocol.amqp10 import data_only, decode_message, encode_data, encode_message


def test_rstream_messages_decode() -> None:
    sent = AMQPMessage(
        body=b"payload",
        properties=Properties(message_id="m-1", content_type="text/plain", subject="kind",
                              correlation_id="c-1", reply_to="r"),
        application_properties={"s": "v", "n": 7, "b": True},
    )
    got = decode_message(bytes(sent))
    assert got is not None
    assert got.body == b"payload"
    assert got.properties == {"message_id": "m-1", "content_type": "text/plain",
                              "subject": "kind", "correlation_id": "c-1", "reply_to": "r"}
    assert got.application_properties == {"s": "v", "n": 7, "b": True}


def test_one_data_section_takes_the_short_way_small_and_large() -> None:
    for body in (b"x" * 10, b"y" * 70_000):
        raw = bytes(AMQPMessage(body=body))
        assert data_only(raw) == body
        decoded = decode_message(raw)
        assert decoded is not None and decoded.body == body
        assert amqp_decoder(encode_data(body)).body == body


def test_what_roost_encodes_rstream_decodes() -> None:
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    raw = encode_message(
        b"body",
        {"message_id": "m", "content_type": "application/json", "creation_time": when},
        {"k": "v", "n": -3, "big": 2**40, "f": 1.5, "none": None},
    )
    got = amqp_decoder(raw)
    assert got.body == b"body"
    assert got.properties.message_id == b"m"
    assert got.properties.content_type == b"application/json"
    assert got.properties.creation_time == int(when.timestamp() * 1000)
    assert got.application_properties == {
        b"k": b"v", b"n": -3, b"big": 2**40, b"f": 1.5, b"none": None
    }


def test_bytes_that_are_not_a_message_stay_bytes() -> None:
    for raw in (b"plain text", b"", b"\x00Su\xa0\x05ab", b"\x00\x53\x75\xff", b"\x00"):
        assert decode_message(raw) is None


def _sections(sections: list[tuple[int, bytes]], small: bool) -> bytes:
    """Sections with their descriptor as a small ulong (``0x53``, what clients send, read
    by decode_message's own short way) or as a full ulong (``0x80``, the general one)."""
    return b"".join(
        (b"\x00\x53" + bytes([kind]) if small else b"\x00\x80" + kind.to_bytes(8, "big"))
        + value for kind, value in sections
    )


def test_sections_read_the_short_way_decode_as_the_general_decoder_does() -> None:
    app = b"\xc1\x0d\x04\xa1\x01k\x54\x05\xa1\x02sx\xa1\x01v"  # {"k": 5, "sx": "v"}
    big = b"\xb0" + (300).to_bytes(4, "big") + b"b" * 300
    shapes = [
        [(0x74, app), (0x75, b"\xa0\x03abc")],
        [(0x74, app), (0x75, b"\xa0\x03abc"), (0x75, big)],  # several data sections: joined
        [(0x75, big)],
        [(0x72, b"\xc1\x01\x00"), (0x74, app), (0x75, b"\xa0\x00")],  # annotations skipped
    ]
    for shape in shapes:
        short, general = decode_message(_sections(shape, True)), decode_message(
            _sections(shape, False))
        assert short is not None and short == general, shape
    assert decode_message(_sections(shapes[1], True)).body == b"abc" + b"b" * 300  # type: ignore[union-attr]
    assert decode_message(_sections(shapes[0], True)).application_properties == {  # type: ignore[union-attr]
        "k": 5, "sx": "v"}
    # a data section or a string running past the end, or a bad string, is no message
    for broken in (
        _sections([(0x74, app), (0x75, b"\xa0\x09abc")], True),
        _sections([(0x74, app[:-1])], True),
        _sections([(0x74, b"\xc1\x07\x02\xa1\x02\xff\xfe\x54\x05"), (0x75, b"\xa0\x00")], True),
        b"\x00\x53",
    ):
        assert decode_message(broken) is None, broken
