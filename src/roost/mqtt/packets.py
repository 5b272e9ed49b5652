"""MQTT control packets as plain dataclasses, and the packet type numbers.

One class per packet type (spec 2.1.2). Fields that exist only in MQTT 5 (properties,
reason codes of acknowledgements, AUTH) keep their defaults under 3.x: the encoder
leaves them off the wire below protocol level 5 and the decoder fills in the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Final

CONNECT: Final = 1
CONNACK: Final = 2
PUBLISH: Final = 3
PUBACK: Final = 4
PUBREC: Final = 5
PUBREL: Final = 6
PUBCOMP: Final = 7
SUBSCRIBE: Final = 8
SUBACK: Final = 9
UNSUBSCRIBE: Final = 10
UNSUBACK: Final = 11
PINGREQ: Final = 12
PINGRESP: Final = 13
DISCONNECT: Final = 14
AUTH: Final = 15
WILL: Final = 0  # not a packet: the will properties' own "packet" in the property table

PACKET_NAMES: Final = {
    CONNECT: "CONNECT",
    CONNACK: "CONNACK",
    PUBLISH: "PUBLISH",
    PUBACK: "PUBACK",
    PUBREC: "PUBREC",
    PUBREL: "PUBREL",
    PUBCOMP: "PUBCOMP",
    SUBSCRIBE: "SUBSCRIBE",
    SUBACK: "SUBACK",
    UNSUBSCRIBE: "UNSUBSCRIBE",
    UNSUBACK: "UNSUBACK",
    PINGREQ: "PINGREQ",
    PINGRESP: "PINGRESP",
    DISCONNECT: "DISCONNECT",
    AUTH: "AUTH",
    WILL: "will",
}

# protocol levels (the CONNECT's "Protocol Level" byte) and their protocol names
MQTT_3_1: Final = 3
MQTT_3_1_1: Final = 4
MQTT_5: Final = 5
PROTOCOL_NAMES: Final = {MQTT_3_1: "MQIsdp", MQTT_3_1_1: "MQTT", MQTT_5: "MQTT"}
LEVELS: Final = frozenset(PROTOCOL_NAMES)

# retain handling (subscription option bits 4-5, MQTT 5 only)
SEND_RETAINED_ON_SUBSCRIBE: Final = 0
SEND_RETAINED_IF_NEW: Final = 1
DO_NOT_SEND_RETAINED: Final = 2


@dataclass(slots=True)
class Properties:
    """MQTT 5 properties (spec 2.2.2.2). ``None`` (or an empty list) means absent.

    Attribute names follow the spec's property names; ``properties.PROPERTIES`` says
    which id, wire type and packets each one has."""

    payload_format_indicator: int | None = None
    message_expiry_interval: int | None = None
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    subscription_identifiers: list[int] = field(default_factory=list)
    session_expiry_interval: int | None = None
    assigned_client_identifier: str | None = None
    server_keep_alive: int | None = None
    authentication_method: str | None = None
    authentication_data: bytes | None = None
    request_problem_information: int | None = None
    will_delay_interval: int | None = None
    request_response_information: int | None = None
    response_information: str | None = None
    server_reference: str | None = None
    reason_string: str | None = None
    receive_maximum: int | None = None
    topic_alias_maximum: int | None = None
    topic_alias: int | None = None
    maximum_qos: int | None = None
    retain_available: int | None = None
    user_properties: list[tuple[str, str]] = field(default_factory=list)
    maximum_packet_size: int | None = None
    wildcard_subscription_available: int | None = None
    subscription_identifier_available: int | None = None
    shared_subscription_available: int | None = None


@dataclass(slots=True)
class Will:
    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class Connect:
    client_id: str
    protocol_level: int = MQTT_3_1_1
    clean_start: bool = True  # "clean session" before MQTT 5
    keep_alive: int = 60
    username: str | None = None
    password: bytes | None = None
    will: Will | None = None
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = CONNECT


@dataclass(slots=True)
class ConnAck:
    """``reason_code`` is the MQTT 5 reason code, or under 3.x the CONNACK return code
    (``reason_codes.V3_*``)."""

    reason_code: int = 0
    session_present: bool = False
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = CONNACK


@dataclass(slots=True)
class Publish:
    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None  # present iff qos > 0
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = PUBLISH


@dataclass(slots=True)
class _PacketIdAck:
    packet_id: int
    reason_code: int = 0
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class PubAck(_PacketIdAck):
    packet_type: ClassVar[int] = PUBACK


@dataclass(slots=True)
class PubRec(_PacketIdAck):
    packet_type: ClassVar[int] = PUBREC


@dataclass(slots=True)
class PubRel(_PacketIdAck):
    packet_type: ClassVar[int] = PUBREL


@dataclass(slots=True)
class PubComp(_PacketIdAck):
    packet_type: ClassVar[int] = PUBCOMP


@dataclass(slots=True)
class Subscription:
    """One topic filter of a SUBSCRIBE with its options (spec 3.8.3.1); the last three
    are MQTT 5's and must stay at their defaults under 3.x."""

    topic_filter: str
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = SEND_RETAINED_ON_SUBSCRIBE


@dataclass(slots=True)
class Subscribe:
    packet_id: int
    subscriptions: list[Subscription]
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = SUBSCRIBE


@dataclass(slots=True)
class SubAck:
    """``reason_codes``: one per subscription, the granted QoS or a failure (3.x has only
    0x80 for every failure: the encoder sends any code >= 0x80 as 0x80 there)."""

    packet_id: int
    reason_codes: list[int]
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = SUBACK


@dataclass(slots=True)
class Unsubscribe:
    packet_id: int
    topic_filters: list[str]
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = UNSUBSCRIBE


@dataclass(slots=True)
class UnsubAck:
    """``reason_codes`` exist only in MQTT 5 (one per topic filter); empty under 3.x."""

    packet_id: int
    reason_codes: list[int] = field(default_factory=list)
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = UNSUBACK


@dataclass(slots=True)
class PingReq:
    packet_type: ClassVar[int] = PINGREQ


@dataclass(slots=True)
class PingResp:
    packet_type: ClassVar[int] = PINGRESP


@dataclass(slots=True)
class Disconnect:
    reason_code: int = 0
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = DISCONNECT


@dataclass(slots=True)
class Auth:
    """MQTT 5 only."""

    reason_code: int = 0
    properties: Properties = field(default_factory=Properties)
    packet_type: ClassVar[int] = AUTH


Packet = (
    Connect
    | ConnAck
    | Publish
    | PubAck
    | PubRec
    | PubRel
    | PubComp
    | Subscribe
    | SubAck
    | Unsubscribe
    | UnsubAck
    | PingReq
    | PingResp
    | Disconnect
    | Auth
)
