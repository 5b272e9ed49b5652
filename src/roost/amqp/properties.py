"""Message properties as AMQP carries them: a channel's cache of the last decoded
property bytes (publishers repeat theirs), and a message's encoding for deliveries,
made once and kept on the message, with RabbitMQ's field types for the headers the
broker writes."""

from __future__ import annotations

from roost.amqp.codec import Long, decode_properties, encode_properties
from roost.core import EMPTY_PROPERTIES, Message, Properties

EMPTY_PROPERTY_BYTES = b"\x00\x00"
_HEADERS_FLAG = 0x2000  # the property flag of ``headers``, the only mutable property


class PropertiesCache:
    """The last decoded properties of one channel, reused while the bytes repeat.

    Publishers mostly send the same property bytes message after message (a content
    type, a delivery mode), and decoding them was ~7% of the broker's time in bench
    scenario 3. ``Properties`` without headers hold only immutable values, so sharing
    one object between messages is safe; property lists with headers (a dict) are
    decoded anew each time, unless ``share_headers``.

    ``share_headers``: the headers dict is shared too. The core never changes a
    message's headers in place (dead-lettering, ``x-delivery-count``, BCC stripping make
    a new dict: one message routed to several queues is one object already), so the
    cluster's links share it: a sender's repeated headers, decoded each time, were the
    one property decode left per crossing (``docs/cluster.md``).
    """

    __slots__ = ("_props", "_raw", "_share_headers")

    def __init__(self, share_headers: bool = False) -> None:
        self._raw = EMPTY_PROPERTY_BYTES
        self._props = EMPTY_PROPERTIES
        self._share_headers = share_headers

    def decode(self, raw: bytes) -> Properties:
        if raw == self._raw:
            return self._props
        props = Properties(*decode_properties(raw))
        if self._share_headers or not raw[0] << 8 & _HEADERS_FLAG:
            self._raw, self._props = raw, props
        return props


def encoded_properties(message: Message) -> bytes:
    raw = message.encoded_properties
    if raw is None:
        raw = message.encoded_properties = encode_properties(_broker_typed(message.properties))
    return raw


def _broker_typed(props: Properties) -> Properties:
    """The headers the broker writes, with RabbitMQ's field types (its counts are longs)."""
    headers = props.headers
    if not headers or ("x-death" not in headers and "x-delivery-count" not in headers):
        return props
    typed = dict(headers)
    if isinstance(typed.get("x-delivery-count"), int):
        typed["x-delivery-count"] = Long(typed["x-delivery-count"])
    deaths = typed.get("x-death")
    if isinstance(deaths, list):
        typed["x-death"] = [
            {**d, "count": Long(d["count"])}
            if isinstance(d, dict) and isinstance(d.get("count"), int)
            else d
            for d in deaths
        ]
    return props.replace(headers=typed)

