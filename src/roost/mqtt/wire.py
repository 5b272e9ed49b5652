"""MQTT's data representations (spec 1.5): two- and four-byte integers, variable byte
integers, UTF-8 strings, binary data and string pairs; readers raise ``MQTTError``.

UTF-8 string rules (1.5.4): well-formed UTF-8 (Python's strict codec also refuses
encoded surrogates U+D800..U+DFFF, which the spec forbids) and no U+0000, else the
packet is malformed (0x81). Control characters and non-characters are only "SHOULD
NOT": they are accepted, as RabbitMQ and Mosquitto accept them.
"""

from __future__ import annotations

import struct
from typing import Final

from roost.mqtt.errors import MQTTError
from roost.mqtt.reason_codes import MALFORMED_PACKET

MAX_VARINT: Final = 268_435_455  # four bytes of seven bits
MAX_STRING: Final = 65_535

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


def encode_varint(value: int) -> bytes:
    if not 0 <= value <= MAX_VARINT:
        raise ValueError(f"variable byte integer out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int] | None:
    """``(value, next position)``, or None when the integer is not complete yet. More
    than four bytes is malformed (1.5.5)."""
    value = 0
    for i in range(4):
        if pos + i >= len(data):
            return None
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise MQTTError(MALFORMED_PACKET, "variable byte integer longer than 4 bytes")


def encode_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > MAX_STRING:
        raise ValueError(f"UTF-8 string longer than {MAX_STRING} bytes")
    return _U16.pack(len(raw)) + raw


def encode_binary(data: bytes) -> bytes:
    if len(data) > MAX_STRING:
        raise ValueError(f"binary data longer than {MAX_STRING} bytes")
    return _U16.pack(len(data)) + data


def check_utf8(raw: bytes | memoryview, what: str) -> str:
    try:
        text = str(raw, "utf-8")
    except UnicodeDecodeError:
        raise MQTTError(MALFORMED_PACKET, f"{what} is not well-formed UTF-8") from None
    if "\x00" in text:
        raise MQTTError(MALFORMED_PACKET, f"{what} contains U+0000")
    return text


class Reader:
    """Reads one packet's body; running past its end is a malformed packet."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, what: str) -> bytes | memoryview:
        pos = self.pos
        if pos + n > self.end:
            raise MQTTError(MALFORMED_PACKET, f"packet ends inside the {what}")
        self.pos = pos + n
        return self.data[pos : pos + n]

    def byte(self, what: str) -> int:
        if self.pos >= self.end:
            raise MQTTError(MALFORMED_PACKET, f"packet ends before the {what}")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def u16(self, what: str) -> int:
        value: int = _U16.unpack(self._take(2, what))[0]
        return value

    def u32(self, what: str) -> int:
        value: int = _U32.unpack(self._take(4, what))[0]
        return value

    def varint(self, what: str) -> int:
        result = decode_varint(self.data[: self.end], self.pos)
        if result is None:
            raise MQTTError(MALFORMED_PACKET, f"packet ends inside the {what}")
        value, self.pos = result
        return value

    def binary(self, what: str) -> bytes:
        return bytes(self._take(self.u16(what), what))

    def string(self, what: str) -> str:
        return check_utf8(self._take(self.u16(what), what), what)

    def rest(self) -> bytes:
        return bytes(self._take(self.end - self.pos, "payload"))
