"""What many MQTT packet bodies end with or hold: the end of the body, a packet
identifier, a reason code; each checked, with the MQTT 5 reason code of a refusal."""

from __future__ import annotations

from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import PACKET_NAMES
from roost.mqtt.reason_codes import ALLOWED, MALFORMED_PACKET, PROTOCOL_ERROR
from roost.mqtt.wire import Reader


def _done(r: Reader, ptype: int) -> None:
    if r.remaining():
        raise MQTTError(
            MALFORMED_PACKET, f"{r.remaining()} bytes after the end of {PACKET_NAMES[ptype]}", ptype
        )


def _packet_id(r: Reader, ptype: int) -> int:
    packet_id = r.u16("packet identifier")
    if packet_id == 0:
        raise MQTTError(PROTOCOL_ERROR, "packet identifier 0", ptype)
    return packet_id


def _reason(r: Reader, ptype: int) -> int:
    code = r.byte("reason code")
    if code not in ALLOWED[ptype]:
        raise MQTTError(
            PROTOCOL_ERROR, f"reason code 0x{code:02X} is not one of {PACKET_NAMES[ptype]}'s", ptype
        )
    return code
