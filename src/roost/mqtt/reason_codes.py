"""MQTT 5 reason codes (spec 2.4, table 2-6) with their names, which packets may carry
each one, and the MQTT 3.x CONNACK return codes (3.1.1 spec 3.2.2.3).

Several codes below 0x80 mean different things in different packets (0x00 is Success,
Normal disconnection and Granted QoS 0); ``reason_name(code, packet_type)`` picks the
name a packet gives it.
"""

from __future__ import annotations

from typing import Final

from roost.mqtt.packets import (
    AUTH,
    CONNACK,
    DISCONNECT,
    PUBACK,
    PUBCOMP,
    PUBREC,
    PUBREL,
    SUBACK,
    UNSUBACK,
)

SUCCESS: Final = 0x00
NORMAL_DISCONNECTION: Final = 0x00
GRANTED_QOS_0: Final = 0x00
GRANTED_QOS_1: Final = 0x01
GRANTED_QOS_2: Final = 0x02
DISCONNECT_WITH_WILL_MESSAGE: Final = 0x04
NO_MATCHING_SUBSCRIBERS: Final = 0x10
NO_SUBSCRIPTION_EXISTED: Final = 0x11
CONTINUE_AUTHENTICATION: Final = 0x18
RE_AUTHENTICATE: Final = 0x19
UNSPECIFIED_ERROR: Final = 0x80
MALFORMED_PACKET: Final = 0x81
PROTOCOL_ERROR: Final = 0x82
IMPLEMENTATION_SPECIFIC_ERROR: Final = 0x83
UNSUPPORTED_PROTOCOL_VERSION: Final = 0x84
CLIENT_IDENTIFIER_NOT_VALID: Final = 0x85
BAD_USER_NAME_OR_PASSWORD: Final = 0x86
NOT_AUTHORIZED: Final = 0x87
SERVER_UNAVAILABLE: Final = 0x88
SERVER_BUSY: Final = 0x89
BANNED: Final = 0x8A
SERVER_SHUTTING_DOWN: Final = 0x8B
BAD_AUTHENTICATION_METHOD: Final = 0x8C
KEEP_ALIVE_TIMEOUT: Final = 0x8D
SESSION_TAKEN_OVER: Final = 0x8E
TOPIC_FILTER_INVALID: Final = 0x8F
TOPIC_NAME_INVALID: Final = 0x90
PACKET_IDENTIFIER_IN_USE: Final = 0x91
PACKET_IDENTIFIER_NOT_FOUND: Final = 0x92
RECEIVE_MAXIMUM_EXCEEDED: Final = 0x93
TOPIC_ALIAS_INVALID: Final = 0x94
PACKET_TOO_LARGE: Final = 0x95
MESSAGE_RATE_TOO_HIGH: Final = 0x96
QUOTA_EXCEEDED: Final = 0x97
ADMINISTRATIVE_ACTION: Final = 0x98
PAYLOAD_FORMAT_INVALID: Final = 0x99
RETAIN_NOT_SUPPORTED: Final = 0x9A
QOS_NOT_SUPPORTED: Final = 0x9B
USE_ANOTHER_SERVER: Final = 0x9C
SERVER_MOVED: Final = 0x9D
SHARED_SUBSCRIPTIONS_NOT_SUPPORTED: Final = 0x9E
CONNECTION_RATE_EXCEEDED: Final = 0x9F
MAXIMUM_CONNECT_TIME: Final = 0xA0
SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED: Final = 0xA1
WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED: Final = 0xA2

NAMES: Final[dict[int, str]] = {
    0x00: "Success",
    0x01: "Granted QoS 1",
    0x02: "Granted QoS 2",
    0x04: "Disconnect with Will Message",
    0x10: "No matching subscribers",
    0x11: "No subscription existed",
    0x18: "Continue authentication",
    0x19: "Re-authenticate",
    0x80: "Unspecified error",
    0x81: "Malformed Packet",
    0x82: "Protocol Error",
    0x83: "Implementation specific error",
    0x84: "Unsupported Protocol Version",
    0x85: "Client Identifier not valid",
    0x86: "Bad User Name or Password",
    0x87: "Not authorized",
    0x88: "Server unavailable",
    0x89: "Server busy",
    0x8A: "Banned",
    0x8B: "Server shutting down",
    0x8C: "Bad authentication method",
    0x8D: "Keep Alive timeout",
    0x8E: "Session taken over",
    0x8F: "Topic Filter invalid",
    0x90: "Topic Name invalid",
    0x91: "Packet Identifier in use",
    0x92: "Packet Identifier not found",
    0x93: "Receive Maximum exceeded",
    0x94: "Topic Alias invalid",
    0x95: "Packet too large",
    0x96: "Message rate too high",
    0x97: "Quota exceeded",
    0x98: "Administrative action",
    0x99: "Payload format invalid",
    0x9A: "Retain not supported",
    0x9B: "QoS not supported",
    0x9C: "Use another server",
    0x9D: "Server moved",
    0x9E: "Shared Subscriptions not supported",
    0x9F: "Connection rate exceeded",
    0xA0: "Maximum connect time",
    0xA1: "Subscription Identifiers not supported",
    0xA2: "Wildcard Subscriptions not supported",
}

_ZERO_NAMES: Final = {DISCONNECT: "Normal disconnection", SUBACK: "Granted QoS 0"}

# which packets may carry each code (spec table 2-6)
_CONNACK_ERRORS: Final = frozenset(
    {0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8C, 0x90, 0x95,
     0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F}
)
_PUB_RESULT: Final = frozenset({0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99})
ALLOWED: Final[dict[int, frozenset[int]]] = {
    CONNACK: _CONNACK_ERRORS | {0x00},
    PUBACK: _PUB_RESULT,
    PUBREC: _PUB_RESULT,
    PUBREL: frozenset({0x00, 0x92}),
    PUBCOMP: frozenset({0x00, 0x92}),
    SUBACK: frozenset({0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2}),
    UNSUBACK: frozenset({0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91}),
    DISCONNECT: frozenset(
        {0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F, 0x90, 0x93,
         0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1,
         0xA2}
    ),
    AUTH: frozenset({0x00, 0x18, 0x19}),
}

# MQTT 3.1 / 3.1.1 CONNACK return codes
V3_ACCEPTED: Final = 0
V3_UNACCEPTABLE_PROTOCOL_VERSION: Final = 1
V3_IDENTIFIER_REJECTED: Final = 2
V3_SERVER_UNAVAILABLE: Final = 3
V3_BAD_USER_NAME_OR_PASSWORD: Final = 4
V3_NOT_AUTHORIZED: Final = 5
V3_NAMES: Final[dict[int, str]] = {
    0: "Connection Accepted",
    1: "Connection Refused, unacceptable protocol version",
    2: "Connection Refused, identifier rejected",
    3: "Connection Refused, Server unavailable",
    4: "Connection Refused, bad user name or password",
    5: "Connection Refused, not authorized",
}
V3_SUBACK_FAILURE: Final = 0x80

# the nearest 3.x CONNACK return code for an MQTT 5 CONNACK reason (the 5.0 spec's
# section 3.2.2.2 pairs 0x84, 0x85, 0x86, 0x87 and 0x88 with 1 to 5)
_V3_CONNACK: Final = {
    SUCCESS: V3_ACCEPTED,
    UNSUPPORTED_PROTOCOL_VERSION: V3_UNACCEPTABLE_PROTOCOL_VERSION,
    CLIENT_IDENTIFIER_NOT_VALID: V3_IDENTIFIER_REJECTED,
    SERVER_UNAVAILABLE: V3_SERVER_UNAVAILABLE,
    SERVER_BUSY: V3_SERVER_UNAVAILABLE,
    SERVER_SHUTTING_DOWN: V3_SERVER_UNAVAILABLE,
    USE_ANOTHER_SERVER: V3_SERVER_UNAVAILABLE,
    SERVER_MOVED: V3_SERVER_UNAVAILABLE,
    CONNECTION_RATE_EXCEEDED: V3_SERVER_UNAVAILABLE,
    BAD_USER_NAME_OR_PASSWORD: V3_BAD_USER_NAME_OR_PASSWORD,
    BAD_AUTHENTICATION_METHOD: V3_BAD_USER_NAME_OR_PASSWORD,
    NOT_AUTHORIZED: V3_NOT_AUTHORIZED,
    BANNED: V3_NOT_AUTHORIZED,
}


def connack_code_v3(reason_code: int) -> int | None:
    """The 3.x CONNACK return code for an MQTT 5 reason, or None where 3.x has none (the
    server then closes the connection without a CONNACK, as 3.1.1 section 4.8 allows)."""
    return _V3_CONNACK.get(reason_code)


def reason_name(code: int, packet_type: int | None = None) -> str:
    """``reason_name(0x87)`` → ``"Not authorized"``; ``reason_name(0, DISCONNECT)`` →
    ``"Normal disconnection"``."""
    if code == 0 and packet_type in _ZERO_NAMES:
        return _ZERO_NAMES[packet_type]
    return NAMES.get(code, f"reason code 0x{code:02X}")
