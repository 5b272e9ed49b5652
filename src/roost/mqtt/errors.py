"""The MQTT codec's one error type, carrying the MQTT 5 reason code it is raised with."""

from __future__ import annotations


class MQTTError(Exception):
    """Malformed or forbidden input. ``reason_code`` is the MQTT 5 reason code the server
    sends in its DISCONNECT (or CONNACK while connecting); under 3.x, where there is no
    such packet, the session maps it with ``reason_codes.connack_code_v3`` or just closes.
    ``packet_type`` is the fixed header's type when it was known."""

    def __init__(self, reason_code: int, text: str, packet_type: int | None = None) -> None:
        super().__init__(reason_code, text, packet_type)
        self.reason_code = reason_code
        self.text = text
        self.packet_type = packet_type

    def __str__(self) -> str:
        from roost.mqtt.reason_codes import reason_name

        return f"0x{self.reason_code:02X} {reason_name(self.reason_code)}: {self.text}"
