"""A message as a stream record's payload.

``exchange len | routing key len | properties len`` then the three, then the body. The
properties are the fourteen values as a pickled tuple: the log is written and read only
by this broker, never by clients.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

_HEAD = struct.Struct("<HHI")


def encode_stream_message(
    exchange: str, routing_key: str, properties: tuple[Any, ...], body: bytes
) -> bytes:
    raw_props = b"" if all(v is None for v in properties) else pickle.dumps(properties, 5)
    ex = exchange.encode("utf-8")
    rk = routing_key.encode("utf-8")
    return b"".join((_HEAD.pack(len(ex), len(rk), len(raw_props)), ex, rk, raw_props, body))


def decode_stream_message(payload: bytes) -> tuple[str, str, tuple[Any, ...], bytes]:
    lex, lrk, lprops = _HEAD.unpack_from(payload)
    pos = _HEAD.size
    exchange = payload[pos : pos + lex].decode("utf-8")
    pos += lex
    routing_key = payload[pos : pos + lrk].decode("utf-8")
    pos += lrk
    props = pickle.loads(payload[pos : pos + lprops]) if lprops else (None,) * 14
    return exchange, routing_key, props, payload[pos + lprops :]
