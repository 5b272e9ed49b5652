"""Sans-IO MQTT 3.1, 3.1.1 and 5.0: ``PacketReader.feed()`` then ``next_packet()``, which
returns a packet (``packets.py``) or ``NEED_DATA``, and ``encode(packet, level)``.

Only malformed or forbidden input raises, always ``MQTTError`` with the MQTT 5 reason
code the server answers with (DISCONNECT, or CONNACK during the handshake; a 3.x
session maps or just closes, see ``reason_codes.connack_code_v3``).

Framing (MQTT 5 spec 2.1, the same in 3.1.1 2.2 and 3.1): a fixed header of one byte
(packet type in the high nibble, flags in the low one) and the remaining length as a
variable byte integer (1.5.5, at most four bytes), then that many bytes of variable
header and payload. The reader checks the type and flags from the first byte and the
whole packet's size (fixed header included, as MQTT 5's Maximum Packet Size counts it)
as soon as the remaining length is complete: a packet above ``max_packet_size`` is
refused (0x95 Packet too large) before its body is buffered.

Protocol levels: CONNECT is decoded on its own (its protocol name and level say how,
3.1 is "MQIsdp" level 3 as RabbitMQ accepts it); every other packet needs the level,
which the session sets on the reader (``reader.protocol_level = connect.protocol_level``)
once it has accepted the CONNECT. Until then only CONNECT is accepted (server role).
``role`` says which side's packets are read: "server" reads what clients send.

Where each packet's layout comes from (MQTT 5.0 spec section, 3.1.1 section):
CONNECT 3.1 / 3.1; CONNACK 3.2 / 3.2; PUBLISH 3.3 / 3.3; PUBACK, PUBREC, PUBREL, PUBCOMP
3.4-3.7 / 3.4-3.7; SUBSCRIBE 3.8 / 3.8 (subscription options 3.8.3.1); SUBACK 3.9 /
3.9; UNSUBSCRIBE 3.10 / 3.10; UNSUBACK 3.11 / 3.11; PINGREQ, PINGRESP 3.12-3.13 /
3.12-3.13; DISCONNECT 3.14 / 3.14; AUTH 3.15 (5.0 only). Properties: 2.2.2
(``properties.py``); reason codes: 2.4 (``reason_codes.py``); strings: 1.5
(``wire.py``); topics: 4.7 (``topics.py``).

The reason code each kind of malformed input raises is tabled in ``decode.py``;
the encoders are in ``encode.py``.

Topic filters in SUBSCRIBE and UNSUBSCRIBE are not validated here: an MQTT 5 server
refuses a bad filter in its SUBACK (0x8F) and keeps the connection, so the session
checks each with ``topics.validate_topic_filter``.
"""

from __future__ import annotations

from typing import Final

from roost.mqtt.decode import check_first_byte, decode_body, decode_packet
from roost.mqtt.encode import encode
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import LEVELS, Packet
from roost.mqtt.reason_codes import PACKET_TOO_LARGE
from roost.mqtt.wire import MAX_VARINT, decode_varint

__all__ = ["MAX_PACKET_SIZE", "NEED_DATA", "PacketReader", "decode_packet", "encode"]


class _NeedData:
    """The type of ``NEED_DATA``: more bytes are needed before the next packet."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()

MAX_PACKET_SIZE: Final = 1 + 4 + MAX_VARINT  # the largest packet the framing can carry


class PacketReader:
    """Incremental reader of one connection's packets."""

    def __init__(
        self,
        *,
        role: str = "server",
        protocol_level: int | None = None,
        max_packet_size: int = MAX_PACKET_SIZE,
    ) -> None:
        if role not in ("server", "client"):
            raise ValueError(f"role must be 'server' or 'client', not {role!r}")
        if role == "client" and protocol_level is None:
            raise ValueError("a client knows its protocol level: pass protocol_level")
        if protocol_level is not None and protocol_level not in LEVELS:
            raise ValueError(f"unknown protocol level {protocol_level}")
        self.role = role
        self.protocol_level = protocol_level
        self.max_packet_size = max_packet_size
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_packet(self) -> Packet | _NeedData:
        buf = self._buf
        pos = self._pos
        if pos >= len(buf):
            return NEED_DATA
        first = buf[pos]
        level = self.protocol_level
        check_first_byte(first, level, self.role)
        length_end = decode_varint(buf, pos + 1)
        if length_end is None:
            return NEED_DATA
        length, start = length_end
        end = start + length
        if end - pos > self.max_packet_size:
            raise MQTTError(
                PACKET_TOO_LARGE,
                f"{end - pos} byte packet above the maximum of {self.max_packet_size}",
                first >> 4,
            )
        if len(buf) < end:
            return NEED_DATA
        with memoryview(buf) as view:  # one copy of the body, the view released at once
            body = view[start:end].tobytes()
        self._pos = end
        if end > 65_536 and end * 2 > len(buf):  # keep the buffer from growing forever
            del buf[:end]
            self._pos = 0
        return decode_body(first, body, level, self.role)

    def packets(self) -> list[Packet]:
        """Every complete packet in the buffer."""
        out: list[Packet] = []
        while True:
            packet = self.next_packet()
            if isinstance(packet, _NeedData):
                return out
            out.append(packet)

