"""Hand-written encoders and decoders for the frames every forwarded message makes
(Publish, PublishResult, Deliver, Settle, Credit): the same bytes as the generic codec's
(``codec.py``; its tests run against these), in a few struct calls instead of a loop over
the fields. ``bench/link_codec.py``: one hop's four frames of a 1 KiB message took
39 µs to encode and decode generically on the 2-core box, against a broker's whole
per-message cost of 10-20 µs; these take a fraction (figures in docs/cluster.md).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from roost.cluster.link import frames as f

_PUB = struct.Struct("!IBQB")  # size, kind, publish_id, flags
_DEL = struct.Struct("!IBQQBI")  # size, kind, consumer_id, delivery_id, flags, count
_SETTLE = struct.Struct("!IBQBBQ")
_CREDIT = struct.Struct("!IBQI")
_RESULT = struct.Struct("!IBQB")
_U32 = struct.Struct("!I")
_U16 = struct.Struct("!H")
_QB = struct.Struct("!QB")

PUBLISH = f.Kind.PUBLISH
DELIVER = f.Kind.DELIVER
SETTLE = f.Kind.SETTLE
CREDIT = f.Kind.CREDIT
RESULT = f.Kind.PUBLISH_RESULT
BATCH = f.Kind.BATCH
_HEADER = struct.Struct("!IB")


Buffer = bytes | bytearray | memoryview  # decoded in place: a body is copied once


class Truncated(Exception):
    """A field runs past the frame: the caller raises its LinkError."""


def _name(value: str) -> bytes:
    raw = value.encode()
    if len(raw) > 255:
        raise ValueError(f"name longer than 255 bytes: {value[:40]!r}…")
    return bytes((len(raw),)) + raw


# A sender repeats the same names (vhost, queues, exchange, routing key) message after
# message: their encoded bytes are kept, and on the receiving side the names decoded from
# those bytes, so a message pays one dict lookup for them instead of four UTF-8 encodes or
# decodes (py-spy on a 2-node hop run: name encoding and decoding were ~8% of each node's
# CPU). Bounded: cleared when full, for senders of ever-new routing keys.
_NAMES_MAX = 4096
_encoded: dict[tuple[str, ...], bytes] = {}  # Publish: (vhost, exchange, key, *queues)
_encoded_pair: dict[tuple[str, str], bytes] = {}  # Deliver: (exchange, routing key)
_decoded: dict[bytes, tuple[str, ...]] = {}  # the names' bytes -> the names


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _NAMES_MAX:
        cache.clear()
    cache[key] = value


def _publish_names(fr: f.Publish) -> bytes:
    key = (fr.vhost, fr.exchange, fr.routing_key, *fr.queues)
    raw = _encoded.get(key)
    if raw is None:
        raw = _name(fr.vhost) + _U16.pack(len(fr.queues))
        raw += b"".join(map(_name, (*fr.queues, fr.exchange, fr.routing_key)))
        _remember(_encoded, key, raw)
    return raw


def encode_publish(fr: f.Publish) -> list[bytes]:
    names = _publish_names(fr)
    props, body = fr.properties, fr.body
    size = 1 + 9 + len(names) + 8 + len(props) + len(body)
    head = _PUB.pack(size, PUBLISH, fr.publish_id, fr.flags) + names
    return [head + _U32.pack(len(props)) + props + _U32.pack(len(body)), body]


_encoded_one: dict[tuple[str, str, str, str], bytes] = {}  # (vhost, queue, exchange, key)


def publish_parts(
    publish_id: int,
    flags: int,
    vhost: str,
    queue: str,
    exchange: str,
    routing_key: str,
    props: bytes,
    body: bytes,
) -> tuple[list[bytes], int]:
    """A Publish to one queue, encoded without its frame object (a forwarded publish's
    path: ``Link.send_publish``), and its size in bytes; the same bytes as
    ``encode_publish``."""
    key = (vhost, queue, exchange, routing_key)
    names = _encoded_one.get(key)
    if names is None:
        names = _name(vhost) + b"\x00\x01" + _name(queue) + _name(exchange) + _name(routing_key)
        _remember(_encoded_one, key, names)
    size = 1 + 9 + len(names) + 8 + len(props) + len(body)
    head = _PUB.pack(size, PUBLISH, publish_id, flags) + names
    return [head + _U32.pack(len(props)) + props + _U32.pack(len(body)), body], size + 4


def encode_deliver(fr: f.Deliver) -> list[bytes]:
    pair = (fr.exchange, fr.routing_key)
    names = _encoded_pair.get(pair)
    if names is None:
        names = _name(fr.exchange) + _name(fr.routing_key)
        _remember(_encoded_pair, pair, names)
    props, body = fr.properties, fr.body
    size = 1 + 21 + len(names) + 8 + len(props) + len(body)
    head = _DEL.pack(size, DELIVER, fr.consumer_id, fr.delivery_id, fr.flags, fr.delivery_count)
    return [head + names + _U32.pack(len(props)) + props + _U32.pack(len(body)), body]


def encode_settle(fr: f.Settle) -> list[bytes]:
    return [_SETTLE.pack(19, SETTLE, fr.consumer_id, fr.op, fr.flags, fr.delivery_id)]


def encode_credit(fr: f.Credit) -> list[bytes]:
    return [_CREDIT.pack(13, CREDIT, fr.consumer_id, fr.credit)]


def encode_result(fr: f.PublishResult) -> list[bytes]:
    text = _name(fr.text)
    return [_RESULT.pack(10 + len(text), RESULT, fr.publish_id, fr.outcome) + text]


def encode_batch(fr: f.Batch) -> list[bytes]:
    parts: list[bytes] = [b""]
    for inner in fr.frames:
        parts += ENCODERS[type(inner)](inner)
    parts[0] = _HEADER.pack(1 + sum(map(len, parts)), BATCH)
    return parts


ENCODERS: dict[type, Callable[..., list[bytes]]] = {
    f.Batch: encode_batch,
    f.Publish: encode_publish,
    f.Deliver: encode_deliver,
    f.Settle: encode_settle,
    f.Credit: encode_credit,
    f.PublishResult: encode_result,
}


def _read_name(data: Buffer, pos: int, end: int) -> tuple[int, str]:
    if pos >= end:
        raise Truncated("name runs past the frame")
    stop = pos + 1 + data[pos]
    if stop > end:
        raise Truncated("name runs past the frame")
    try:
        return stop, str(data[pos + 1 : stop], "utf-8")
    except UnicodeDecodeError:
        raise Truncated("name is not UTF-8") from None


def _read_names(
    data: Buffer, pos: int, end: int, count: int, counted: bool = False
) -> tuple[int, tuple[str, ...]]:
    """``count`` names in a row (``counted``: a name, then a 16-bit count of names, then
    that many and ``count`` more: a Publish's vhost, queues, exchange and routing key),
    decoded once per distinct bytes (see ``_encoded``)."""
    stop = pos
    if counted:
        if stop >= end:
            raise Truncated("name runs past the frame")
        stop += 1 + data[stop]
        if stop + 2 > end:
            raise Truncated("Publish frame truncated")
        count += _U16.unpack_from(data, stop)[0]
        stop += 2
    for _ in range(count):
        if stop >= end:
            raise Truncated("name runs past the frame")
        stop += 1 + data[stop]
    if stop > end:
        raise Truncated("name runs past the frame")
    raw = bytes(data[pos:stop])
    found = _decoded.get(raw)
    if found is None:
        names = []
        at = pos
        for k in range(count + counted):
            at, name = _read_name(data, at, end)
            names.append(name)
            if counted and k == 0:
                at += 2
        found = tuple(names)
        _remember(_decoded, raw, found)
    return stop, found


def _read_bytes(data: Buffer, pos: int, end: int) -> tuple[int, bytes]:
    if pos + 4 > end:
        raise Truncated("bytes run past the frame")
    stop = pos + 4 + _U32.unpack_from(data, pos)[0]
    if stop > end:
        raise Truncated("bytes run past the frame")
    return stop, bytes(data[pos + 4 : stop])


_last_publish: list[Any] = [b"", ()]  # (the names' bytes, the names) of the last Publish


def decode_publish(data: Buffer, pos: int, end: int) -> tuple[f.Publish, int]:
    """``data[pos:end]`` is the payload after the kind byte; returns the frame and where
    its fields ended (the caller checks that is ``end``)."""
    if pos + 9 > end:
        raise Truncated("Publish frame truncated")
    publish_id, flags = _QB.unpack_from(data, pos)
    pos += 9
    # a run of publishes mostly repeats the last one's names: their bytes matched in
    # place (names are length-prefixed, so equal bytes parse alike), else looked up
    raw, names = _last_publish
    if raw and type(data) is bytes and data.startswith(raw, pos, end):
        pos += len(raw)
    else:
        start = pos
        pos, names = _read_names(data, pos, end, 2, counted=True)
        _last_publish[:] = bytes(data[start:pos]), names
    # the properties' and the body's lengths read in line (two calls a message saved)
    if pos + 4 > end:
        raise Truncated("bytes run past the frame")
    stop = pos + 4 + _U32.unpack_from(data, pos)[0]
    if stop + 4 > end:
        raise Truncated("bytes run past the frame")
    props = bytes(data[pos + 4 : stop])
    last = stop + 4 + _U32.unpack_from(data, stop)[0]
    if last > end:
        raise Truncated("bytes run past the frame")
    frame = f.Publish(
        publish_id,
        flags,
        names[0],
        list(names[1:-2]),
        names[-2],
        names[-1],
        props,
        bytes(data[stop + 4 : last]),
    )
    return frame, last


def decode_deliver(data: Buffer, pos: int, end: int) -> tuple[f.Deliver, int]:
    if pos + 21 > end:
        raise Truncated("Deliver frame truncated")
    consumer_id, delivery_id, flags, count = struct.unpack_from("!QQBI", data, pos)
    pos, (exchange, routing_key) = _read_names(data, pos + 21, end, 2)
    pos, props = _read_bytes(data, pos, end)
    pos, body = _read_bytes(data, pos, end)
    frame = f.Deliver(consumer_id, delivery_id, flags, count, exchange, routing_key, props, body)
    return frame, pos


_SETTLE_BODY = struct.Struct("!QBBQ")
_CREDIT_BODY = struct.Struct("!QI")
_RESULT_BODY = struct.Struct("!QB")
_OPS = tuple(f.SettleOp)
_OUTCOMES = tuple(f.Outcome)


def decode_settle(data: Buffer, pos: int, end: int) -> tuple[f.Settle, int]:
    if pos + 18 > end:
        raise Truncated("Settle frame truncated")
    consumer_id, op, flags, delivery_id = _SETTLE_BODY.unpack_from(data, pos)
    if op >= len(_OPS):
        raise Truncated(f"Settle: bad op {op}")
    return f.Settle(consumer_id, _OPS[op], flags, delivery_id), pos + 18


def decode_credit(data: Buffer, pos: int, end: int) -> tuple[f.Credit, int]:
    if pos + 12 > end:
        raise Truncated("Credit frame truncated")
    consumer_id, credit = _CREDIT_BODY.unpack_from(data, pos)
    return f.Credit(consumer_id, credit), pos + 12


def decode_result(data: Buffer, pos: int, end: int) -> tuple[f.PublishResult, int]:
    if pos + 9 > end:
        raise Truncated("PublishResult frame truncated")
    publish_id, outcome = _RESULT_BODY.unpack_from(data, pos)
    if outcome >= len(_OUTCOMES):
        raise Truncated(f"PublishResult: bad outcome {outcome}")
    pos, text = _read_name(data, pos + 9, end)
    return f.PublishResult(publish_id, _OUTCOMES[outcome], text), pos


def decode_batch(data: Buffer, pos: int, end: int) -> tuple[f.Batch, int]:
    """The inner frames, each a whole frame (size, kind, fields) of a kind in f.BATCHED."""
    frames: list[f.Publish | f.Deliver] = []
    while pos < end:
        if pos + 5 > end:
            raise Truncated("Batch: an inner frame's header runs past the frame")
        size, kind = _HEADER.unpack_from(data, pos)
        stop = pos + 4 + size
        if size < 1 or stop > end:
            raise Truncated("Batch: an inner frame runs past the frame")
        if kind == PUBLISH:
            inner: f.Publish | f.Deliver
            inner, fields_end = decode_publish(data, pos + 5, stop)
        elif kind == DELIVER:
            inner, fields_end = decode_deliver(data, pos + 5, stop)
        else:
            raise Truncated(f"Batch: kind {kind} cannot be batched")
        if fields_end != stop:
            raise Truncated(f"Batch: an inner frame has {stop - fields_end} bytes past its fields")
        frames.append(inner)
        pos = stop
    if not frames:
        raise Truncated("Batch frame with no frames")
    return f.Batch(frames), pos


DECODERS: dict[int, Callable[[Buffer, int, int], tuple[f.Frame, int]]] = {
    BATCH: decode_batch,
    PUBLISH: decode_publish,
    DELIVER: decode_deliver,
    SETTLE: decode_settle,
    CREDIT: decode_credit,
    RESULT: decode_result,
}
