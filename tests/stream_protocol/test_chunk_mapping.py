"""A message kept as sent in a chunk record, read by AMQP 0-9-1, STOMP and Spark: the
short way (properties and application properties, then one data section, transcoded
straight to the store's encoding) gives the bytes the general mapping gives, and is taken
for what rstream sends."""

from __future__ import annotations

import random
import struct
import uuid

from rstream import AMQPMessage, Properties

from roost.codecs.properties import decode_properties, encode_properties
from roost.stream_protocol.chunk_mapping import _short_way, chunk_message_record
from roost.stream_protocol.publishers import chunk_message_values


def general(message: bytes) -> tuple[bytes, bytes]:
    properties, body = chunk_message_values(message)
    return encode_properties(properties), body


def str8(text: str) -> bytes:
    raw = text.encode()
    return bytes((0xA1, len(raw))) + raw


def str32(text: str) -> bytes:
    raw = text.encode()
    return b"\xb1" + struct.pack(">I", len(raw)) + raw


def app_map(items: list[bytes], wide: bool = False, body: bytes = b"x") -> bytes:
    inner = b"".join(items)
    if wide:
        head = b"\xd1" + struct.pack(">II", len(inner) + 4, len(items))
    else:
        head = bytes((0xC1, len(inner) + 1, len(items)))
    return b"\x00St" + head + inner + b"\x00Su\xa0" + bytes((len(body),)) + body


def short_way_messages() -> list[bytes]:
    """Messages the short way reads: rstream's and hand-made ones of every simple type."""
    return [
        bytes(AMQPMessage(body=b"b" * 100, application_properties={"k": 7})),
        bytes(AMQPMessage(body=b"b" * 300, application_properties={
            "s": "abc\u00e9", "t": True, "f": False, "l": 2**40, "neg": -3, "d": 1.5,
            "none": None, "i": -(2**31), "long": "v" * 300})),
        app_map([str8("u"), b"\x80" + struct.pack(">Q", 2**63 - 1), str8("z0"), b"\x43",
                 str8("z1"), b"\x44", str8("t"), b"\x41", str8("b7"), b"\x56\x07",
                 str8("ui"), b"\x70" + struct.pack(">I", 2**32 - 1), str8("su"), b"\x52\x05",
                 str8("sl"), b"\x53\xff", str8("sn"), b"\x55\xfe"]),
        app_map([str32("wide key"), str32("wide value")], wide=True, body=b"y" * 200),
        bytes(AMQPMessage(body=b"p", properties=Properties(
            message_id="m-1", content_type="text/plain", content_encoding="gzip",
            subject="kind", correlation_id=42, reply_to="r", user_id=b"guest",
            creation_time=1_764_300_000_123, group_id="g"),
            application_properties={"k": 1, "s": "v"})),
        bytes(AMQPMessage(body=b"q" * 300, properties=Properties(
            message_id=uuid.UUID(int=7), correlation_id=b"c\xff", creation_time=-1500))),
    ]


def test_the_short_way_maps_as_the_general_way_does() -> None:
    for message in short_way_messages():
        found = _short_way(message)
        assert found is not None, message  # the short way is taken
        assert found == general(message)
        assert chunk_message_record(message) == found
        props, _ = decode_properties(found[0], 0)
        assert props[3] == 2


def test_other_messages_take_the_general_way() -> None:
    others = [
        b"\x00Sp\xc0\x02\x01\x41" + app_map([str8("k"), b"\x41"]),  # a header section
        app_map([str8("u"), b"\x80" + struct.pack(">Q", 2**64 - 1)]),  # past i64: text
        app_map([str8("k"), b"\x41", str8("k"), b"\x42"]),  # a repeated key: last wins
        app_map([str8("k"), b"\xa1\x01\xff"]),  # bad UTF-8: kept as raw bytes
        app_map([str8("k"), b"\x98" + bytes(16)]),  # a uuid: as text
        app_map([]),  # no headers at all
        app_map([str8("k"), b"\x41"]) + b"\x00Sx\xc1\x01\x00",  # a footer after the data
    ]
    for message in others:
        assert _short_way(message) is None, message
        assert chunk_message_record(message) == general(message)


def test_cut_and_altered_messages_map_as_the_general_way_maps_them() -> None:
    """Every cut and a thousand single-byte changes of the short-way messages: each read
    gives what the general mapping gives (most fall back to it, or to raw bytes)."""
    rng = random.Random(25)
    for message in short_way_messages():
        for cut in range(1, len(message)):
            assert chunk_message_record(message[:cut]) == general(message[:cut])
        for _ in range(250):
            changed = bytearray(message)
            changed[rng.randrange(len(changed))] = rng.randrange(256)
            if changed[0] != 0:
                continue  # not AMQP 1.0: a chunk record reads such bytes as raw
            assert chunk_message_record(bytes(changed)) == general(bytes(changed))


def test_values_no_python_object_holds_keep_the_message_as_bytes() -> None:
    """A char past U+10FFFF or a timestamp past year 9999 raised out of the decoder, so
    every AMQP 0-9-1, STOMP and Spark read of such a stored message failed: now such a
    message reads as the bytes it was sent as, as any other that does not decode."""
    for message in (b"\x00Sw\x73\xff\xff\xff\xff",
                    b"\x00Sw\x83" + struct.pack(">q", 2**62)):
        properties, body = chunk_message_values(message)
        assert body == message and properties[2] == {"x-roost-stream-raw": True}
