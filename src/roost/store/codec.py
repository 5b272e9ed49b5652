"""The store's own compact encoding of a message (no AMQP dependency).

A record payload is::

    u64 seq | u8 flags | [i64 expiry] | u16 exchange | u16 routing key
    | u16 property mask | property values in mask order | body (the rest)

The expiry (ms since the epoch: when the message's TTL runs out) is there only when the
flags say so (``FLAG_EXPIRES``); records written before it existed have none, so they
read as before and no migration is needed.

The properties are ``roost.codecs.properties`` (shared with the adapters: the stream
adapter writes them straight from AMQP 1.0).
"""

from __future__ import annotations

import struct
from typing import Any

# the property and value codec is shared with the adapters (roost/codecs/properties.py);
# re-exported: the store's modules and tests import it from here
from roost.codecs.properties import (
    PROPERTY_COUNT,
    CodecError,
    decode_properties,
    decode_value,
    encode_properties,
    encode_str,
    encode_value,
    read_str,
)

__all__ = [
    "PROPERTY_COUNT",
    "CodecError",
    "decode_message",
    "decode_properties",
    "decode_value",
    "encode_message",
    "encode_properties",
    "encode_str",
    "encode_value",
    "peek_expires",
    "peek_seq",
    "read_str",
]

_HEAD = struct.Struct(">QB")
_I64 = struct.Struct(">q")

MIN_PAYLOAD = 15  # u64 seq, u8 flags, three u16 lengths: shorter is not a record

FLAG_REDELIVERED = 1
FLAG_TRANSIENT = 2  # paged out under memory pressure: never recovered after a restart
FLAG_EXPIRES = 4  # an i64 absolute expiry follows the flags


def encode_message(
    seq: int,
    exchange: str,
    routing_key: str,
    properties: tuple[Any, ...],
    body: bytes,
    redelivered: bool = False,
    transient: bool = False,
    expires_ms: int = 0,
) -> bytes:
    flags = (FLAG_REDELIVERED if redelivered else 0) | (FLAG_TRANSIENT if transient else 0)
    if expires_ms > 0:
        head = _HEAD.pack(seq, flags | FLAG_EXPIRES) + _I64.pack(expires_ms)
    else:
        head = _HEAD.pack(seq, flags)
    return b"".join(
        (head, encode_str(exchange), encode_str(routing_key), encode_properties(properties), body)
    )


def decode_message(
    payload: bytes | memoryview,
) -> tuple[int, bool, str, str, tuple[Any, ...], bytes]:
    """(seq, redelivered, exchange, routing key, properties, body)."""
    try:
        data = bytes(payload)
        seq = int.from_bytes(data[0:8], "big")
        flags = data[8]
        exchange, pos = read_str(data, 17 if flags & FLAG_EXPIRES else 9)
        routing_key, pos = read_str(data, pos)
        props, pos = decode_properties(data, pos)
        if pos > len(data):
            raise CodecError("payload too short")
        return seq, bool(flags & FLAG_REDELIVERED), exchange, routing_key, props, data[pos:]
    except (IndexError, KeyError, struct.error, ValueError, ArithmeticError, RecursionError) as exc:
        raise CodecError(str(exc)) from None


def peek_seq(payload: bytes | memoryview) -> int:
    return int.from_bytes(payload[0:8], "big")


def peek_expires(payload: bytes | memoryview) -> int:
    """The record's absolute expiry in ms since the epoch; 0 when it has none."""
    if len(payload) < 17 or not payload[8] & FLAG_EXPIRES:
        return 0
    return int(_I64.unpack_from(payload, 9)[0])
