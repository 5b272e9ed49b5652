"""The store's message encoding round-trips every property and header value type."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.codecs.stream_message import RunDecoder, decode_stream_message, encode_stream_message
from roost.store.codec import CodecError, decode_message, encode_message, peek_expires

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(
    seq=st.integers(min_value=1, max_value=2**62 - 1),
    exchange=st.text(max_size=30),
    key=st.text(max_size=60),
    headers=st.none() | st.dictionaries(st.text(max_size=10), values, max_size=5),
    body=st.binary(max_size=300),
    redelivered=st.booleans(),
    expires_ms=st.just(0) | st.integers(min_value=1, max_value=2**63 - 1),
)
def test_round_trip(
    seq: int, exchange: str, key: str, headers: Any, body: bytes, redelivered: bool,
    expires_ms: int,
) -> None:
    props = (
        "text/plain",
        None,
        headers,
        2,
        5,
        "c",
        "r",
        "60000",
        "m",
        1700000000,
        "t",
        "guest",
        "app",
        None,
    )
    payload = encode_message(seq, exchange, key, props, body, redelivered, expires_ms=expires_ms)
    assert decode_message(payload) == (seq, redelivered, exchange, key, props, body)
    assert peek_expires(payload) == expires_ms


def test_a_record_without_an_expiry_is_laid_out_as_before() -> None:
    """Records written before expiries were stored decode unchanged (no migration)."""
    old_layout = bytes.fromhex("0000000000000007" "00" "0002" "6578" "0001" "6b" "0000") + b"hi"
    assert decode_message(old_layout) == (7, False, "ex", "k", (None,) * 14, b"hi")
    assert peek_expires(old_layout) == 0
    assert encode_message(7, "ex", "k", (None,) * 14, b"hi") == old_layout


def test_decimal_and_timestamp_headers() -> None:
    when = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC)
    props: tuple[Any, ...] = (None, None, {"d": decimal.Decimal("1.25"), "t": when}) + (None,) * 11
    _, _, _, _, back, _ = decode_message(encode_message(1, "", "k", props, b""))
    assert back[2] == {"d": decimal.Decimal("1.25"), "t": when}


@given(
    exchange=st.text(max_size=30),
    key=st.text(max_size=60),
    headers=st.none() | st.dictionaries(st.text(max_size=10), values, max_size=5),
    content_type=st.none() | st.text(max_size=10),
    body=st.binary(max_size=300),
)
def test_stream_record_round_trip(
    exchange: str, key: str, headers: Any, content_type: str | None, body: bytes
) -> None:
    props = (content_type, None, headers, 2, None, "c", None, None, "m", 17, None, None, None, None)
    payload = encode_stream_message(exchange, key, props, body)
    assert decode_stream_message(payload) == (exchange, key, props, body)


def test_stream_record_without_properties_is_five_bytes_plus_names() -> None:
    payload = encode_stream_message("ex", "k", (None,) * 14, b"body")
    assert payload == b"\x00\x02ex\x00\x01k\x00\x00body"
    assert decode_stream_message(payload) == ("ex", "k", (None,) * 14, b"body")


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x00",
        b"\x00\x05ab",
        b"\x00\x00\x00\x00",
        b"\x00\x00\x00\x00\x00\x04",
        b"\x00\x00\x00\x00\x00\x04\x00\x01Z",
    ],
)
def test_malformed_stream_records_raise_codec_error(payload: bytes) -> None:
    with pytest.raises(CodecError):
        decode_stream_message(payload)


message_props = st.tuples(
    st.none() | st.text(max_size=6),
    st.none() | st.dictionaries(st.text(max_size=4), values, max_size=3),
    st.none() | st.text(max_size=6),
)


@given(st.lists(st.tuples(message_props, st.binary(max_size=40)), min_size=1, max_size=12))
def test_run_decoder_matches_one_by_one_decoding(messages: list[Any]) -> None:
    """Records laid end to end, many repeating the previous one's properties (and some
    whose property bytes start like the previous ones): the run decoder's reuse gives
    exactly what decoding each record on its own gives."""
    payloads = []
    for i, ((content_type, headers, message_id), body) in enumerate(messages):
        props = (content_type, None, headers, 2, None, None, None, None, message_id)
        props += (None,) * 5
        payloads.append(encode_stream_message("x", f"k{i % 2}", props, body))
        payloads.append(payloads[-1])  # an exact repeat: the reuse path
    data = b"".join(payloads)
    decoder = RunDecoder()
    start = 0
    for payload in payloads:
        end = start + len(payload)
        assert decoder.decode(data, start, end) == decode_stream_message(payload)
        start = end


def test_run_decoder_refuses_a_record_shorter_than_its_properties() -> None:
    payload = encode_stream_message("", "k", ("text/plain",) + (None,) * 13, b"")
    data = payload * 2
    decoder = RunDecoder()
    assert decoder.decode(data, 0, len(payload))[2][0] == "text/plain"
    with pytest.raises(CodecError):  # same bytes as before, but the record ends too soon
        decoder.decode(data, len(payload), len(data) - 3)
