"""Field tables and arrays: round trip, pamqp oracle, golden bytes, malformed input."""

from __future__ import annotations

import datetime
import decimal
import enum
import struct
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from pamqp import decode as pamqp_decode
from pamqp import encode as pamqp_encode

from roost.amqp.codec import decode_array, decode_table, encode_array, encode_table
from roost.amqp.errors import FrameError
from tests.codec.strategies import field_values, pamqp_tables, tables


def decode_whole(raw: bytes) -> dict[str, Any]:
    table, end = decode_table(memoryview(raw), 0)
    assert end == len(raw)
    return table


@settings(max_examples=150, deadline=None)
@given(tables)
def test_table_round_trip(table: dict[str, Any]) -> None:
    raw = encode_table(table)
    assert decode_whole(raw) == table
    assert encode_table(decode_whole(raw)) == raw


@settings(max_examples=100, deadline=None)
@given(field_values.map(lambda v: [v, v]))
def test_array_round_trip(items: list[Any]) -> None:
    raw = encode_array(items)
    assert decode_array(raw, 0) == (items, len(raw))


def test_decode_at_offset_returns_the_end() -> None:
    raw = b"xyz" + encode_table({"a": 1}) + b"tail"
    table, end = decode_table(memoryview(raw), 3)
    assert table == {"a": 1}
    assert raw[end:] == b"tail"


@settings(max_examples=100, deadline=None)
@given(pamqp_tables)
def test_pamqp_oracle(table: dict[str, Any]) -> None:
    """Each codec reads the other's tables to the same values.

    Bytes differ by design: pamqp sorts keys and picks the smallest integer type (b/s/u/I/
    i/l); Roost keeps insertion order and writes I or l (what RabbitMQ itself writes for
    integers). pamqp writes floats as 'f' (float32), Roost as 'd'.
    """
    assert decode_whole(pamqp_encode.field_table(table)) == table
    _consumed, theirs = pamqp_decode.field_table(encode_table(table))
    assert theirs == table


def test_pamqp_reads_every_type_we_write() -> None:
    table = {
        "dec": decimal.Decimal("-12.345"),
        "when": datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.UTC),
        "raw": b"\x00\xff",
        "big": 2**40,
        "pi": 3.5,
    }
    _, theirs = pamqp_decode.field_table(encode_table(table))
    assert theirs == table


# -- golden ---------------------------------------------------------------------------------

GOLDEN: list[tuple[dict[str, Any], bytes]] = [
    ({}, b"\x00\x00\x00\x00"),
    ({"t": True}, b"\x00\x00\x00\x04\x01tt\x01"),
    ({"i": -2}, b"\x00\x00\x00\x07\x01iI\xff\xff\xff\xfe"),
    ({"l": 2**31}, b"\x00\x00\x00\x0b\x01ll\x00\x00\x00\x00\x80\x00\x00\x00"),
    ({"d": 1.5}, b"\x00\x00\x00\x0b\x01dd?\xf8\x00\x00\x00\x00\x00\x00"),
    ({"D": decimal.Decimal("1.25")}, b"\x00\x00\x00\x08\x01DD\x02\x00\x00\x00\x7d"),
    ({"s": "é"}, b"\x00\x00\x00\x09\x01sS\x00\x00\x00\x02\xc3\xa9"),
    ({"x": b"\x01"}, b"\x00\x00\x00\x08\x01xx\x00\x00\x00\x01\x01"),
    ({"a": [1, None]}, b"\x00\x00\x00\x0d\x01aA\x00\x00\x00\x06I\x00\x00\x00\x01V"),
    ({"T": datetime.datetime(2001, 9, 9, 1, 46, 40, tzinfo=datetime.UTC)},
     b"\x00\x00\x00\x0b\x01TT\x00\x00\x00\x00\x3b\x9a\xca\x00"),
    ({"F": {"k": None}}, b"\x00\x00\x00\x0a\x01FF\x00\x00\x00\x03\x01kV"),
    ({"n": None}, b"\x00\x00\x00\x03\x01nV"),
]


@pytest.mark.parametrize(("table", "raw"), GOLDEN, ids=[str(t) for t, _ in GOLDEN])
def test_golden(table: dict[str, Any], raw: bytes) -> None:
    assert encode_table(table) == raw
    assert decode_whole(raw) == table


def entry(tag: bytes, value: bytes) -> bytes:
    body = b"\x01k" + tag + value
    return struct.pack(">I", len(body)) + body


READS: list[tuple[bytes, Any]] = [  # types we read but never write
    (entry(b"b", b"\xff"), -1),
    (entry(b"B", b"\xff"), 255),
    (entry(b"s", b"\xff\xfe"), -2),  # RabbitMQ's 's' is a signed 16-bit int
    (entry(b"u", b"\xff\xfe"), 65534),
    (entry(b"i", b"\xff\xff\xff\xff"), 2**32 - 1),
    (entry(b"L", b"\xff" * 8), -1),
    (entry(b"f", struct.pack(">f", 0.5)), 0.5),
    (entry(b"S", b"\x00\x00\x00\x01\xff"), b"\xff"),  # not UTF-8: kept as bytes
    (entry(b"D", b"\x00\xff\xff\xff\xff"), decimal.Decimal(-1)),
    (entry(b"T", struct.pack(">Q", 2**40)), 2**40),  # past year 9999: kept as int
    (b"\x00\x00\x00\x03\x01\xffV", None),  # key not UTF-8: surrogate-escaped
]


@pytest.mark.parametrize(("raw", "value"), READS, ids=[r.hex() for r, _ in READS])
def test_reads(raw: bytes, value: Any) -> None:
    (got,) = decode_whole(raw).values()
    assert got == value and type(got) is type(value)


def test_invalid_utf8_key_round_trips() -> None:
    raw = b"\x00\x00\x00\x03\x01\xffV"
    assert encode_table(decode_whole(raw)) == raw


def test_encoding_choices() -> None:
    class Colour(enum.IntEnum):
        RED = 1

    assert encode_table({"e": Colour.RED}) == encode_table({"e": 1})
    assert encode_table(OrderedDict(a=1)) == encode_table({"a": 1})
    assert encode_table({"t": (1,)}) == encode_table({"t": [1]})
    assert encode_table({"b": bytearray(b"z")}) == encode_table({"b": b"z"})
    naive = datetime.datetime(2020, 1, 1)
    assert encode_table({"t": naive}) == encode_table({"t": naive.replace(tzinfo=datetime.UTC)})
    assert decode_whole(encode_table({"n": {"m": OrderedDict(x=[])}})) == {"n": {"m": {"x": []}}}


@pytest.mark.parametrize(
    "value", [2**64, object(), decimal.Decimal("NaN"), decimal.Decimal("1E-300"), {1, 2}]
)
def test_unencodable_values(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        encode_table({"v": value})


def test_key_too_long() -> None:
    with pytest.raises(ValueError, match="255"):
        encode_table({"k" * 256: 1})


# -- malformed ------------------------------------------------------------------------------

MALFORMED: list[tuple[str, bytes, int]] = [
    ("no length", b"\x00\x00", 501),
    ("length past the end", b"\x00\x00\x00\x09\x01kV", 501),
    ("key past the table", b"\x00\x00\x00\x02\x05k", 501),
    ("missing value tag", b"\x00\x00\x00\x02\x01k", 501),
    ("value past the table", entry(b"I", b"\x00\x00\x00\x01")[:-1], 501),
    ("value past its table, inside the buffer", b"\x00\x00\x00\x04\x01kI\x00" + b"\x00" * 8,
     501),
    ("longstr past the table", entry(b"S", b"\x00\x00\x00\x09abc"), 501),
    ("nested table past its parent", entry(b"F", b"\x00\x00\x00\x09\x01kV"), 501),
    ("unknown type tag", entry(b"Z", b""), 502),
    ("tag U", entry(b"U", b"\x00\x01"), 502),
    ("NUL tag", entry(b"\x00", b""), 502),
]


@pytest.mark.parametrize(("raw", "code"), [c[1:] for c in MALFORMED],
                         ids=[c[0] for c in MALFORMED])
def test_malformed(raw: bytes, code: int) -> None:
    with pytest.raises(FrameError) as info:
        decode_table(memoryview(raw), 0)
    assert info.value.reply_code == code


def test_malformed_array() -> None:
    with pytest.raises(FrameError) as info:
        decode_array(b"\x00\x00\x00\x02I\x00", 0)
    assert info.value.reply_code == 501


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"I" + struct.pack(">i", 0)),
        (-(2**31), b"I" + struct.pack(">i", -(2**31))),
        (2**31 - 1, b"I" + struct.pack(">i", 2**31 - 1)),
        (2**31, b"l" + struct.pack(">q", 2**31)),
        (-(2**31) - 1, b"l" + struct.pack(">q", -(2**31) - 1)),
        (2**63 - 1, b"l" + struct.pack(">q", 2**63 - 1)),
        (-(2**63), b"l" + struct.pack(">q", -(2**63))),
        (True, b"t\x01"),
    ],
)
def test_int_header_values_take_the_narrowest_signed_type(value: Any, encoded: bytes) -> None:
    """The inline int path (a stream delivery's x-stream-offset) writes what encode_value does."""
    body = b"\x0fx-stream-offset" + encoded
    assert encode_table({"x-stream-offset": value}) == struct.pack(">I", len(body)) + body


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_int_header_values_beyond_64_bits_are_refused(value: int) -> None:
    with pytest.raises(ValueError, match="64-bit"):
        encode_table({"k": value})
