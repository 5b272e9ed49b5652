"""Content properties: round trip, pamqp oracle, golden bytes, malformed input."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from pamqp import commands

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.amqp.errors import FrameError
from tests.codec.spec import load_spec, requires_spec
from tests.codec.strategies import properties


@requires_spec
def test_layout_matches_the_spec() -> None:
    _constants, _methods, property_specs = load_spec()
    names = tuple(p.name for p in property_specs)
    assert names == m.BasicProperties.NAMES
    assert tuple(name for name, _ in codec.PROPERTY_FIELDS) == names
    assert tuple(kind for _, kind in codec.PROPERTY_FIELDS) == tuple(p.kind for p in property_specs)


@settings(max_examples=150, deadline=None)
@given(properties())
def test_round_trip(kwargs: dict[str, Any]) -> None:
    props = m.BasicProperties(**kwargs)
    raw = codec.encode_properties(props)
    values = codec.decode_properties(raw)
    assert values == tuple(getattr(props, name) for name in m.BasicProperties.NAMES)
    assert m.BasicProperties.decode(memoryview(raw)) == props
    assert props.encode() == raw


def test_duck_typing() -> None:
    """Any object with the 14 attribute names encodes (the core has its own class)."""
    fields = dict.fromkeys(m.BasicProperties.NAMES)
    duck = SimpleNamespace(**{**fields, "delivery_mode": 2, "headers": {"a": 1}})
    assert codec.encode_properties(duck) == m.BasicProperties(
        delivery_mode=2, headers={"a": 1}
    ).encode()


def test_timestamp_accepts_datetime() -> None:
    when = datetime.datetime(2001, 9, 9, 1, 46, 40, tzinfo=datetime.UTC)
    raw = codec.encode_properties(m.BasicProperties(timestamp=when))
    assert m.BasicProperties.decode(raw).timestamp == 1_000_000_000


@settings(max_examples=100, deadline=None)
@given(properties(oracle=True))
def test_pamqp_oracle(kwargs: dict[str, Any]) -> None:
    """pamqp writes the same flags and list (tables compared by value: pamqp sorts keys).

    pamqp names ``type`` ``message_type``, reads timestamps as datetimes, drops ''
    properties and insists on delivery_mode 1|2 and an empty cluster_id.
    """
    kwargs = {k: v for k, v in kwargs.items() if k != "cluster_id"}
    pamqp_kwargs = {("message_type" if k == "type" else k): v for k, v in kwargs.items()}
    if "timestamp" in kwargs:
        pamqp_kwargs["timestamp"] = datetime.datetime.fromtimestamp(
            kwargs["timestamp"], tz=datetime.UTC
        )
    theirs = commands.Basic.Properties(**pamqp_kwargs)
    ours = m.BasicProperties(**kwargs)
    their_raw = theirs.marshal()
    if not kwargs.get("headers"):
        assert ours.encode() == their_raw
    assert m.BasicProperties.decode(their_raw) == ours
    back = commands.Basic.Properties()
    raw = ours.encode()
    back.unmarshal(int.from_bytes(raw[:2], "big"), raw[2:])
    assert back == theirs


ALL_FOURTEEN = m.BasicProperties(
    content_type="text/plain",
    content_encoding="gzip",
    headers={"h": 1},
    delivery_mode=2,
    priority=5,
    correlation_id="c",
    reply_to="r",
    expiration="60000",
    message_id="m",
    timestamp=1_000_000_000,
    type="t",
    user_id="guest",
    app_id="a",
    cluster_id="",
)
ALL_FOURTEEN_RAW = (
    b"\xff\xfc"  # 14 flags set, bits 1 and 0 clear
    b"\x0atext/plain"
    b"\x04gzip"
    b"\x00\x00\x00\x07\x01hI\x00\x00\x00\x01"
    b"\x02"
    b"\x05"
    b"\x01c"
    b"\x01r"
    b"\x0560000"
    b"\x01m"
    b"\x00\x00\x00\x00\x3b\x9a\xca\x00"
    b"\x01t"
    b"\x05guest"
    b"\x01a"
    b"\x00"
)


def test_golden_all_fourteen() -> None:
    assert ALL_FOURTEEN.encode() == ALL_FOURTEEN_RAW
    assert m.BasicProperties.decode(ALL_FOURTEEN_RAW) == ALL_FOURTEEN


def test_golden_content_header_frame() -> None:
    frame = codec.encode_content(1, 60, ALL_FOURTEEN_RAW, b"", 131072)
    size = 12 + len(ALL_FOURTEEN_RAW)
    assert frame == (
        b"\x02\x00\x01" + size.to_bytes(4, "big")
        + b"\x00\x3c\x00\x00" + b"\x00" * 8 + ALL_FOURTEEN_RAW + b"\xce"
    )


def test_empty() -> None:
    assert m.BasicProperties().encode() == b"\x00\x00"
    assert codec.decode_properties(b"\x00\x00") == (None,) * 14
    assert repr(m.BasicProperties(priority=1)) == "BasicProperties(priority=1)"


def test_reserved_flag_bit_is_ignored() -> None:
    """RabbitMQ ignores bit 1 (no property); so does Roost."""
    assert codec.decode_properties(b"\x00\x02") == (None,) * 14


MALFORMED: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("one flag octet", b"\x80"),
    ("continuation flag", b"\x00\x01\x00\x00"),
    ("flag set, no value", b"\x80\x00"),
    ("shortstr past the end", b"\x80\x00\x05ab"),
    ("timestamp past the end", b"\x00\x40\x00\x00"),
    ("trailing bytes", b"\x00\x00zz"),
    ("trailing after a value", b"\x10\x00\x02zz"),
    ("invalid UTF-8", b"\x80\x00\x01\xff"),
    ("truncated headers", b"\x20\x00\x00\x00\x00\x05\x01a"),
]


@pytest.mark.parametrize("raw", [raw for _, raw in MALFORMED], ids=[n for n, _ in MALFORMED])
def test_malformed(raw: bytes) -> None:
    with pytest.raises(FrameError) as info:
        codec.decode_properties(raw)
    assert info.value.reply_code == 501


def test_bad_header_tag_is_a_syntax_error() -> None:
    with pytest.raises(FrameError) as info:
        codec.decode_properties(b"\x20\x00\x00\x00\x00\x03\x01aZ")
    assert info.value.reply_code == 502
