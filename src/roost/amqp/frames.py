"""AMQP 0-9-1 frames (sans-IO, stdlib only): the frame types and their layout, shared by
the reader (codec.py) and the encoders (frame_encoders.py), and the frames the reader
returns. ``roost.amqp.codec`` re-exports every public name."""

from __future__ import annotations

import struct
from types import FunctionType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from roost.amqp.codec_methods import Method


PROTOCOL_HEADER: Final = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD: Final = 1
FRAME_HEADER: Final = 2
FRAME_BODY: Final = 3
FRAME_HEARTBEAT: Final = 8
FRAME_END: Final = 0xCE

BASIC_CLASS_ID: Final = 60
FRAME_OVERHEAD: Final = 8  # type octet + channel short + size long + frame-end octet

# reply codes of the codec's errors (the generated module has them all; it imports
# roost.amqp.codec)
_FRAME_ERROR: Final = 501
_SYNTAX_ERROR: Final = 502
_UNEXPECTED_FRAME: Final = 505


class _NeedData:
    """The type of ``NEED_DATA``: more bytes are needed before the next frame."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()

# -- struct formats of the frame layout -----------------------------------------------

# (Final: compiled code reads them as statics, not from the module's dict per call)
_FRAME_HEAD: Final = struct.Struct(">BHI")
_HEADER_FIELDS: Final = struct.Struct(">HHQ")
# frame-end of the previous frame + the next frame's head (+ header-frame fields)
_END_HEADER_FRAME: Final = struct.Struct(">BBHIHHQ")
_END_BODY_HEAD: Final = struct.Struct(">BBHI")
_DELIVER_HEAD: Final = struct.Struct(">BHIHH")  # method frame head + class and method ids
_DELIVER_TAIL: Final = struct.Struct(">QB")
_GET_OK_COUNT: Final = struct.Struct(">I")
_END: Final = b"\xce"


def _probe() -> None:
    """Compiled, a function is a builtin, not a ``FunctionType``: see ``NATIVE``."""


# Whether this build is the compiled one (the hot-path modules are compiled together or
# not at all: roost/_build.py). Where it is, librt's fixed-width reads and writes are
# inline C and beat struct, which is one Python call each; interpreted, struct wins.
NATIVE: Final = not isinstance(_probe, FunctionType)


# -- frames -----------------------------------------------------------------------------


class ProtocolHeader:
    """The first 8 bytes the peer sent, verbatim; valid iff ``raw == PROTOCOL_HEADER``."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __eq__(self, other: object) -> bool:
        return type(other) is ProtocolHeader and other.raw == self.raw

    def __repr__(self) -> str:
        return f"ProtocolHeader({self.raw!r})"


class MethodFrame:
    __slots__ = ("channel", "method")

    def __init__(self, channel: int, method: Method) -> None:
        self.channel = channel
        self.method = method

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is MethodFrame
            and other.channel == self.channel
            and other.method == self.method
        )

    def __repr__(self) -> str:
        return f"MethodFrame({self.channel}, {self.method!r})"


class HeaderFrame:
    """A content header; ``properties`` is the raw flags + property list, not decoded."""

    __slots__ = ("body_size", "channel", "class_id", "properties")

    def __init__(self, channel: int, class_id: int, body_size: int, properties: bytes) -> None:
        self.channel = channel
        self.class_id = class_id
        self.body_size = body_size
        self.properties = properties

    def __eq__(self, other: object) -> bool:
        return type(other) is HeaderFrame and (
            other.channel,
            other.class_id,
            other.body_size,
            other.properties,
        ) == (self.channel, self.class_id, self.body_size, self.properties)

    def __repr__(self) -> str:
        return (
            f"HeaderFrame({self.channel}, class_id={self.class_id}, "
            f"body_size={self.body_size}, properties={self.properties!r})"
        )


class BodyFrame:
    __slots__ = ("channel", "payload")

    def __init__(self, channel: int, payload: bytes) -> None:
        self.channel = channel
        self.payload = payload

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is BodyFrame
            and other.channel == self.channel
            and other.payload == self.payload
        )

    def __repr__(self) -> str:
        return f"BodyFrame({self.channel}, {self.payload[:32]!r}, size={len(self.payload)})"


class HeartbeatFrame:
    __slots__ = ("channel",)

    def __init__(self, channel: int = 0) -> None:
        self.channel = channel

    def __eq__(self, other: object) -> bool:
        return type(other) is HeartbeatFrame and other.channel == self.channel

    def __repr__(self) -> str:
        return f"HeartbeatFrame({self.channel})"


Frame = ProtocolHeader | MethodFrame | HeaderFrame | BodyFrame | HeartbeatFrame
