"""Hot-path AMQP 0-9-1 encoders (sans-IO; stdlib and librt): method frames, heartbeats and a
message's frames (method, content header, body frames) for publish, deliver, get-ok
and return. ``roost.amqp.codec`` re-exports every public name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from librt.strings import BytesWriter, write_i16_be, write_i32_be, write_i64_be
from mypy_extensions import i16, i32, i64

from roost.amqp.field_table import (
    _UINT8,
    _UINT16,
    encode_shortstr,
)
from roost.amqp.frames import (
    _DELIVER_HEAD,
    _DELIVER_TAIL,
    _END,
    _END_BODY_HEAD,
    _END_HEADER_FRAME,
    _FRAME_HEAD,
    _GET_OK_COUNT,
    _HEADER_FIELDS,
    BASIC_CLASS_ID,
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_OVERHEAD,
    NATIVE,
)

if TYPE_CHECKING:
    from roost.amqp.codec_methods import Method


# -- hot-path encoders ------------------------------------------------------------------


def encode_method_frame(channel: int, method: Method) -> bytes:
    payload = method.encode()
    return _FRAME_HEAD.pack(FRAME_METHOD, channel, len(payload)) + payload + _END


_HEARTBEAT_BYTES: Final = _FRAME_HEAD.pack(FRAME_HEARTBEAT, 0, 0) + _END


def encode_heartbeat() -> bytes:
    return _HEARTBEAT_BYTES


def encode_content(
    channel: int, class_id: int, properties: bytes, body: bytes, frame_max: int
) -> bytes:
    """Header frame + body frames (split at frame_max - 8; none for an empty body)."""
    header = _FRAME_HEAD.pack(FRAME_HEADER, channel, 12 + len(properties))
    header += _HEADER_FIELDS.pack(class_id, 0, len(body))
    return b"".join(_content_parts(header, channel, properties, body, frame_max))


def _with_content(
    channel: int, method: bytes, properties: bytes, body: bytes, frame_max: int
) -> bytes:
    """Method frame for ``method`` (a payload) + header frame + body frames, in one bytes."""
    size = len(body)
    head = _FRAME_HEAD.pack(FRAME_METHOD, channel, len(method))
    header = _END_HEADER_FRAME.pack(
        FRAME_END, FRAME_HEADER, channel, 12 + len(properties), BASIC_CLASS_ID, 0, size
    )
    if 0 < size <= frame_max - FRAME_OVERHEAD or (size and not frame_max):
        # the common case: one body frame
        body_head = _END_BODY_HEAD.pack(FRAME_END, FRAME_BODY, channel, size)
        return b"".join((head, method, header, properties, body_head, body, _END))
    return b"".join((head, method, *_content_parts(header, channel, properties, body, frame_max)))


def _content_parts(
    header: bytes, channel: int, properties: bytes, body: bytes, frame_max: int
) -> list[bytes]:
    """``header`` (already packed) + properties + the body split into frames."""
    parts = [header, properties]
    size = len(body)
    if frame_max and frame_max <= FRAME_OVERHEAD:
        raise ValueError(f"frame_max {frame_max} leaves no room for a body")
    chunk = frame_max - FRAME_OVERHEAD if frame_max else max(size, 1)
    view = memoryview(body)
    for start in range(0, size, chunk):
        piece = view[start : start + chunk]
        parts.append(_END_BODY_HEAD.pack(FRAME_END, FRAME_BODY, channel, len(piece)))
        parts.append(piece)  # type: ignore[arg-type]  # join takes any buffer
    parts.append(_END)
    return parts


def encode_basic_deliver(
    channel: int,
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """basic.deliver method + header + body frames: the broker's hottest encoder."""
    size = len(body)
    tag = encode_shortstr(consumer_tag)
    ex = encode_shortstr(exchange)
    rk = encode_shortstr(routing_key)
    if 0 < size <= frame_max - FRAME_OVERHEAD:
        # the common case, one body frame: all three frames in one bytes
        if NATIVE:  # compiled, the writer is 4x faster; interpreted, 2x slower
            return _deliver_written(
                channel, tag, delivery_tag, redelivered, ex, rk, properties, body
            )
        return _deliver_packed(channel, tag, delivery_tag, redelivered, ex, rk, properties, body)
    flag = 1 if redelivered else 0
    method = b"".join((b"\x00\x3c\x00\x3c", tag, _DELIVER_TAIL.pack(delivery_tag, flag), ex, rk))
    return _with_content(channel, method, properties, body, frame_max)


def _deliver_packed(
    channel: int,
    tag: bytes,
    delivery_tag: int,
    redelivered: bool,
    ex: bytes,
    rk: bytes,
    properties: bytes,
    body: bytes,
) -> bytes:
    """encode_basic_deliver's one-body-frame case (consumer tag, exchange and routing key
    given as encoded short strings) with struct: one join and three packs
    for the three frames (the pure build's way; 1.54 -> 1.16 us per delivery against
    building the method payload first)."""
    size = len(body)
    return b"".join(
        (
            _DELIVER_HEAD.pack(FRAME_METHOD, channel, 13 + len(tag) + len(ex) + len(rk), 60, 60),
            tag,
            _DELIVER_TAIL.pack(delivery_tag, 1 if redelivered else 0),
            ex,
            rk,
            _END_HEADER_FRAME.pack(
                FRAME_END, FRAME_HEADER, channel, 12 + len(properties), BASIC_CLASS_ID, 0, size
            ),
            properties,
            _END_BODY_HEAD.pack(FRAME_END, FRAME_BODY, channel, size),
            body,
            _END,
        )
    )


def _deliver_written(
    channel: int,
    tag: bytes,
    delivery_tag: int,
    redelivered: bool,
    ex: bytes,
    rk: bytes,
    properties: bytes,
    body: bytes,
) -> bytes:
    """The same bytes as ``_deliver_packed``, written with librt's BytesWriter: compiled,
    each write is inline C, where a struct pack is a Python method call with its
    arguments boxed in a tuple (135 against 530 ns per 16 B delivery in a micro-benchmark;
    the deliver encoder was 13% of the broker in bench scenario 1)."""
    size = len(body)
    ch = _u16(channel)
    w = BytesWriter()
    w.append(FRAME_METHOD)
    write_i16_be(w, ch)
    write_i32_be(w, _u32(13 + len(tag) + len(ex) + len(rk)))
    write_i32_be(w, _BASIC_DELIVER_IDS)
    w.write(tag)
    write_i64_be(w, _u64(delivery_tag))
    w.append(1 if redelivered else 0)
    w.write(ex)
    w.write(rk)
    w.append(FRAME_END)
    w.append(FRAME_HEADER)
    write_i16_be(w, ch)
    write_i32_be(w, _u32(12 + len(properties)))
    write_i32_be(w, _BASIC_CONTENT_IDS)
    write_i64_be(w, i64(size))
    w.write(properties)
    w.append(FRAME_END)
    w.append(FRAME_BODY)
    write_i16_be(w, ch)
    write_i32_be(w, _u32(size))
    w.write(body)
    w.append(FRAME_END)
    return w.getvalue()


# librt's writers take signed ints: the wire's unsigned fields go in as the signed value
# with the same bits.
_BASIC_DELIVER_IDS: Final = i32(BASIC_CLASS_ID << 16 | 60)  # class 60, method 60
_BASIC_CONTENT_IDS: Final = i32(BASIC_CLASS_ID << 16)  # class 60, weight 0


def _u16(n: int) -> i16:
    return i16(n - 0x10000 if n > 0x7FFF else n)


def _u32(n: int) -> i32:
    return i32(n - 0x1_0000_0000 if n > 0x7FFF_FFFF else n)


def _u64(n: int) -> i64:
    return i64(n - 0x1_0000_0000_0000_0000 if n > 0x7FFF_FFFF_FFFF_FFFF else n)


def encode_basic_publish(
    channel: int,
    exchange: str,
    routing_key: str,
    mandatory: bool,
    immediate: bool,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """basic.publish (ticket 0) method + header + body frames, for clients."""
    bits = (1 if mandatory else 0) | (2 if immediate else 0)
    method = b"".join(
        (
            b"\x00\x3c\x00\x28\x00\x00",
            encode_shortstr(exchange),
            encode_shortstr(routing_key),
            _UINT8.pack(bits),
        )
    )
    return _with_content(channel, method, properties, body, frame_max)


def encode_basic_get_ok(
    channel: int,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    message_count: int,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """basic.get-ok method + header + body frames."""
    method = b"".join(
        (
            b"\x00\x3c\x00\x47",
            _DELIVER_TAIL.pack(delivery_tag, 1 if redelivered else 0),
            encode_shortstr(exchange),
            encode_shortstr(routing_key),
            _GET_OK_COUNT.pack(message_count),
        )
    )
    return _with_content(channel, method, properties, body, frame_max)


def encode_basic_return(
    channel: int,
    reply_code: int,
    reply_text: str,
    exchange: str,
    routing_key: str,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """basic.return method + header + body frames."""
    method = b"".join(
        (
            b"\x00\x3c\x00\x32",
            _UINT16.pack(reply_code),
            encode_shortstr(reply_text),
            encode_shortstr(exchange),
            encode_shortstr(routing_key),
        )
    )
    return _with_content(channel, method, properties, body, frame_max)
