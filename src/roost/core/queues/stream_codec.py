"""A message as a stream record's payload, protocol-neutral.

``exchange len | routing key len | properties len`` then the three, then the body. The
properties are the core's ``Properties`` values as a pickled tuple of plain values
(strings, numbers, dicts, lists, bytes, datetimes, decimals): the log is written and read
only by this broker, never by clients.
"""

from __future__ import annotations

import pickle
import struct

from roost.core.message import EMPTY_PROPERTIES, PROPERTY_NAMES, Message, Properties

_HEAD = struct.Struct("<HHI")


def encode_message(message: Message) -> bytes:
    props = message.properties
    raw_props = (
        b""
        if props is EMPTY_PROPERTIES
        else pickle.dumps(tuple(getattr(props, n) for n in PROPERTY_NAMES), protocol=5)
    )
    ex = message.exchange.encode("utf-8")
    rk = message.routing_key.encode("utf-8")
    return b"".join((_HEAD.pack(len(ex), len(rk), len(raw_props)), ex, rk, raw_props, message.body))


def decode_message(payload: bytes) -> Message:
    lex, lrk, lprops = _HEAD.unpack_from(payload)
    pos = _HEAD.size
    exchange = payload[pos : pos + lex].decode("utf-8")
    pos += lex
    routing_key = payload[pos : pos + lrk].decode("utf-8")
    pos += lrk
    props = Properties(*pickle.loads(payload[pos : pos + lprops])) if lprops else EMPTY_PROPERTIES
    pos += lprops
    return Message(exchange, routing_key, props, payload[pos:])


def decode_for_delivery(payload: bytes, offset: int, timestamp: int) -> Message:
    """``decode_message`` plus the ``x-stream-offset``/``x-stream-timestamp`` headers,
    built in one pass (this runs once per delivery)."""
    lex, lrk, lprops = _HEAD.unpack_from(payload)
    pos = _HEAD.size
    exchange = payload[pos : pos + lex].decode("utf-8")
    pos += lex
    routing_key = payload[pos : pos + lrk].decode("utf-8")
    pos += lrk
    if lprops:
        values = list(pickle.loads(payload[pos : pos + lprops]))  # fresh objects: ours
        headers = values[2]
        if headers is None:
            headers = values[2] = {}
    else:
        values = [None] * len(PROPERTY_NAMES)
        headers = values[2] = {}
    headers["x-stream-offset"] = offset
    headers["x-stream-timestamp"] = timestamp
    return Message(exchange, routing_key, Properties(*values), payload[pos + lprops :])
