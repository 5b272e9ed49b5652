"""MQTT codec: round trips of every packet kind at every level, golden bytes from the
spec, malformed input with its reason code, the size limit checked from the header."""

from __future__ import annotations

import pytest

from roost.mqtt import codec, properties, reason_codes
from roost.mqtt.codec import NEED_DATA, PacketReader, encode
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    AUTH,
    CONNACK,
    DISCONNECT,
    MQTT_3_1,
    MQTT_3_1_1,
    MQTT_5,
    PUBLISH,
    SUBACK,
    WILL,
    Auth,
    ConnAck,
    Connect,
    Disconnect,
    Packet,
    PingReq,
    PingResp,
    Properties,
    PubAck,
    Publish,
    PubRel,
    SubAck,
    Subscribe,
    Subscription,
    UnsubAck,
    Unsubscribe,
)
from roost.mqtt.wire import Reader, decode_varint, encode_varint
from tests.mqtt.samples import LEVELS, client_packets, server_packets


def server_reader(level: int | None, **kw: int) -> PacketReader:
    return PacketReader(role="server", protocol_level=level, **kw)


def read_all(reader: PacketReader, data: bytes) -> list[Packet]:
    reader.feed(data)
    out = reader.packets()
    assert reader.next_packet() is NEED_DATA
    return out


# -- round trips ----------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_client_packets_round_trip_whole_and_split_everywhere(level: int) -> None:
    packets = client_packets(level)
    stream = b"".join(encode(p, level) for p in packets)
    reader = server_reader(None)
    reader.feed(stream)
    connect = reader.next_packet()
    assert connect == packets[0]
    assert isinstance(connect, Connect)
    reader.protocol_level = connect.protocol_level  # what the session does
    assert reader.packets() == packets[1:]
    # every split of the stream in two reads gives the same packets
    first_len = len(encode(packets[0], level))
    for cut in range(first_len, len(stream) + 1):
        reader = server_reader(level)
        reader.feed(stream[first_len:cut])
        got = reader.packets()
        reader.feed(stream[cut:])
        assert got + reader.packets() == packets[1:], cut


@pytest.mark.parametrize("level", LEVELS)
def test_server_packets_round_trip_byte_by_byte(level: int) -> None:
    packets = server_packets(level)
    stream = b"".join(encode(p, level) for p in packets)
    reader = PacketReader(role="client", protocol_level=level)
    got: list[Packet] = []
    for i in range(len(stream)):
        reader.feed(stream[i : i + 1])
        got += reader.packets()
    assert got == packets


# -- golden bytes (MQTT 5.0 and 3.1.1 specs; varints from 5.0 table 1-1) ----------------

GOLDEN: list[tuple[int, Packet, str]] = [
    (MQTT_3_1_1, Connect("c", MQTT_3_1_1), "100d 0004 4d515454 04 02 003c 0001 63"),
    (MQTT_3_1, Connect("c", MQTT_3_1), "100f 0006 4d5149736470 03 02 003c 0001 63"),
    (MQTT_5, Connect("c", MQTT_5), "100e 0004 4d515454 05 02 003c 00 0001 63"),
    (MQTT_3_1_1, Connect("c", MQTT_3_1_1, False, 0, "u", b"p"),
     "1013 0004 4d515454 04 c0 0000 0001 63 0001 75 0001 70"),
    (MQTT_3_1_1, ConnAck(0, True), "2002 01 00"),
    (MQTT_3_1, ConnAck(0), "2002 00 00"),
    (MQTT_5, ConnAck(0x86), "2003 00 86 00"),
    (MQTT_5, ConnAck(0, False, Properties(receive_maximum=10, maximum_qos=1)),
     "2008 00 00 05 21000a 2401"),
    (MQTT_3_1_1, Publish("a/b", b"hi", 1, packet_id=10), "3209 0003 612f62 000a 6869"),
    (MQTT_5, Publish("a/b", b"hi", 1, packet_id=10), "320a 0003 612f62 000a 00 6869"),
    (MQTT_5, Publish("a/b", b"", 0, True, properties=Properties(message_expiry_interval=1)),
     "310b 0003 612f62 05 0200000001"),
    (MQTT_3_1_1, PubAck(10), "4002 000a"),
    (MQTT_5, PubAck(10), "4002 000a"),
    (MQTT_5, PubAck(10, 0x10), "4003 000a 10"),
    (MQTT_5, PubAck(10, 0, Properties(reason_string="r")),
     "4008 000a 00 04 1f 0001 72"),
    (MQTT_3_1_1, PubRel(10), "6202 000a"),
    (MQTT_3_1_1, Subscribe(1, [Subscription("a/#", 1)]), "8208 0001 0003 612f23 01"),
    (MQTT_5, Subscribe(1, [Subscription("a/#", 1, True, True, 2)]),
     "8209 0001 00 0003 612f23 2d"),
    (MQTT_3_1_1, SubAck(1, [1, 0x80]), "9004 0001 0180"),
    (MQTT_3_1_1, SubAck(1, [0x87]), "9003 0001 80"),  # 3.x has one failure code
    (MQTT_3_1_1, Unsubscribe(2, ["a/#"]), "a207 0002 0003 612f23"),
    (MQTT_3_1_1, UnsubAck(2), "b002 0002"),
    (MQTT_5, UnsubAck(2, [0x11]), "b004 0002 00 11"),
    (MQTT_3_1_1, PingReq(), "c000"),
    (MQTT_3_1_1, PingResp(), "d000"),
    (MQTT_3_1_1, Disconnect(), "e000"),
    (MQTT_5, Disconnect(), "e000"),
    (MQTT_5, Disconnect(0x8E), "e001 8e"),
    (MQTT_5, Auth(), "f000"),
    (MQTT_5, Auth(0x18, Properties(authentication_method="M")),
     "f006 18 04 1500014d"),
]


@pytest.mark.parametrize(("level", "packet", "hexbytes"), GOLDEN)
def test_golden_bytes(level: int, packet: Packet, hexbytes: str) -> None:
    raw = bytes.fromhex(hexbytes.replace(" ", ""))
    if isinstance(packet, SubAck) and level < MQTT_5 and 0x87 in packet.reason_codes:
        assert encode(packet, level) == raw  # encoded only: it reads back as 0x80
        return
    assert encode(packet, level) == raw
    role = "client" if isinstance(packet, ConnAck | SubAck | UnsubAck | PingResp) else "server"
    reader = PacketReader(role=role, protocol_level=level)
    assert read_all(reader, raw) == [packet]


@pytest.mark.parametrize(
    ("value", "hexbytes"),
    [(0, "00"), (127, "7f"), (128, "8001"), (16_383, "ff7f"), (16_384, "808001"),
     (2_097_151, "ffff7f"), (2_097_152, "80808001"), (268_435_455, "ffffff7f")],
)
def test_variable_byte_integers(value: int, hexbytes: str) -> None:
    raw = bytes.fromhex(hexbytes)
    assert encode_varint(value) == raw
    assert decode_varint(raw, 0) == (value, len(raw))
    assert decode_varint(raw[:-1], 0) is None  # not complete yet: no error
    with pytest.raises(ValueError):
        encode_varint(268_435_456)


def test_short_forms_of_v5_acks_and_disconnect_decode_to_defaults() -> None:
    reader = server_reader(MQTT_5)
    # PUBACK with a reason and no property length; DISCONNECT with a reason only
    assert read_all(reader, bytes.fromhex("4003000a10e00104")) == [
        PubAck(10, 0x10), Disconnect(0x04)
    ]


# -- malformed input and its reason code -----------------------------------------------

M = reason_codes.MALFORMED_PACKET
P = reason_codes.PROTOCOL_ERROR

MALFORMED: list[tuple[str, int | None, str, str, int]] = [
    # (name, level, role, hex bytes, reason code); level None: before CONNECT
    ("reserved type 0", MQTT_5, "server", "0000", M),
    ("AUTH below MQTT 5", MQTT_3_1_1, "server", "f000", M),
    ("reserved flags on PUBACK", MQTT_5, "server", "4102000a", M),
    ("PUBREL flags not 0010", MQTT_5, "server", "6002000a", M),
    ("SUBSCRIBE flags not 0010", MQTT_3_1_1, "server", "8008000100036123 2301", M),
    ("PUBLISH QoS 3", MQTT_5, "server", "36050003612f62", M),
    ("remaining length of five bytes", MQTT_5, "server", "30ffffffff01", M),
    ("CONNACK sent to a server", MQTT_5, "server", "20020000", P),
    ("CONNECT sent to a client", MQTT_5, "client", "100d00044d5154540402003c000163", P),
    ("PUBLISH before CONNECT", None, "server", "30050003612f62", P),
    ("DISCONNECT from a 3.x server", MQTT_3_1_1, "client", "e000", P),
    ("PINGREQ with a body", MQTT_5, "server", "c00100", M),
    ("bad protocol name", None, "server", "100d00044d515458 0402003c000163",
     reason_codes.UNSUPPORTED_PROTOCOL_VERSION),
    ("MQTT at level 3", None, "server", "100d00044d515454 0302003c000163",
     reason_codes.UNSUPPORTED_PROTOCOL_VERSION),
    ("level 6", None, "server", "100d00044d515454 0602003c000163",
     reason_codes.UNSUPPORTED_PROTOCOL_VERSION),
    ("reserved connect flag", None, "server", "100d00044d515454 0403003c000163", M),
    ("will QoS 3", None, "server", "100d00044d515454 041e003c000163", M),
    ("will retain without will", None, "server", "100d00044d515454 0422003c000163", M),
    ("3.1.1 password without user name", None, "server",
     "100f00044d515454 0442003c000163 0000", M),
    ("CONNECT ends inside client id", None, "server", "100c00044d5154540402003c0001", M),
    ("CONNECT with a trailing byte", None, "server", "100e00044d5154540402003c00016300", M),
    ("client id not UTF-8", None, "server", "100d00044d5154540402003c0001ff", M),
    ("client id with U+0000", None, "server", "100d00044d5154540402003c000100", M),
    ("client id with an encoded surrogate", None, "server",
     "100f00044d5154540402003c0003eda080", M),
    ("will topic with a wildcard", None, "server",
     "101200044d5154540406003c000163 000123 0000", reason_codes.TOPIC_NAME_INVALID),
    ("property not allowed in CONNECT", None, "server",
     "101000044d5154540502003c 03 230001 000163", M),
    ("unknown property id", None, "server", "100f00044d5154540502003c 02 0000 000163", M),
    ("Receive Maximum 0", None, "server", "101000044d5154540502003c 03 210000 000163", P),
    ("Session Expiry Interval twice", None, "server",
     "101800044d5154540502003c 0a 1100000001 1100000002 000163", P),
    ("Request Problem Information 2", None, "server",
     "100f00044d5154540502003c 02 1702 000163", P),
    ("authentication data without a method", None, "server",
     "101000044d5154540502003c 03 160000 000163", P),
    ("property length past the end", None, "server", "100e00044d5154540502003c 09 000163", M),
    ("PUBLISH topic with +", MQTT_3_1_1, "server", "30050003612b62",
     reason_codes.TOPIC_NAME_INVALID),
    ("PUBLISH empty topic 3.1.1", MQTT_3_1_1, "server", "30020000",
     reason_codes.TOPIC_NAME_INVALID),
    ("PUBLISH empty topic without alias 5", MQTT_5, "server", "3003000000", P),
    ("PUBLISH packet id 0", MQTT_3_1_1, "server", "32070003612f620000", P),
    ("PUBLISH QoS 0 with DUP", MQTT_3_1_1, "server", "38050003612f62", P),
    ("client PUBLISH with a subscription id", MQTT_5, "server",
     "30080003612f62 02 0b01", P),
    ("Topic Alias 0", MQTT_5, "server", "30090003612f62 03 230000", P),
    ("PUBACK reason not a PUBACK code", MQTT_5, "server", "4003000a8e", P),
    ("PUBACK 3.1.1 with a reason byte", MQTT_3_1_1, "server", "4003000a00", M),
    ("PUBACK cut short", MQTT_5, "server", "400100", M),
    ("PUBACK packet id 0", MQTT_5, "server", "40020000", P),
    ("SUBSCRIBE without filters", MQTT_3_1_1, "server", "82020001", P),
    ("SUBSCRIBE 3.1.1 reserved option bits", MQTT_3_1_1, "server", "820800010003612f2304", M),
    ("SUBSCRIBE 5 reserved option bits", MQTT_5, "server", "82090001000003612f2340", M),
    ("SUBSCRIBE QoS 3", MQTT_5, "server", "82090001000003612f2303", M),
    ("SUBSCRIBE retain handling 3", MQTT_5, "server", "82090001000003612f2330", P),
    ("no-local on a shared subscription", MQTT_5, "server",
     "8210 0001 00 000a 2473686172652f672f74 04", P),
    ("two subscription identifiers", MQTT_5, "server",
     "820d0001 04 0b010b02 0003612f2301", P),
    ("UNSUBSCRIBE without filters", MQTT_5, "server", "a203000100", P),
    ("SUBACK 3.1.1 code 0x87", MQTT_3_1_1, "client", "9003000187", P),
    ("SUBACK without codes", MQTT_5, "client", "9003000100", P),
    ("UNSUBACK reason 0x01", MQTT_5, "client", "b00400020001", P),
    ("CONNACK reserved ack flags", MQTT_3_1_1, "client", "20020200", M),
    ("CONNACK return code 6", MQTT_3_1_1, "client", "20020006", P),
    ("CONNACK session present on refusal", MQTT_5, "client", "2003018700", P),
    ("CONNACK property for CONNECT only", MQTT_5, "client", "200500000217 01", M),
    ("DISCONNECT reason not a DISCONNECT code", MQTT_5, "server", "e00101", P),
    ("AUTH reason 0x87", MQTT_5, "server", "f00187", P),
]


@pytest.mark.parametrize(
    ("level", "role", "hexbytes", "code"),
    [m[1:] for m in MALFORMED],
    ids=[m[0] for m in MALFORMED],
)
def test_malformed_input_raises_its_reason_code(
    level: int | None, role: str, hexbytes: str, code: int
) -> None:
    raw = bytes.fromhex(hexbytes.replace(" ", ""))
    reader = PacketReader(role=role, protocol_level=level or (MQTT_5 if role == "client" else None))
    if role == "client":
        reader.protocol_level = level
    with pytest.raises(MQTTError) as info:
        read_all(reader, raw)
    assert info.value.reason_code == code, info.value


def test_packet_above_the_maximum_is_refused_from_its_fixed_header() -> None:
    reader = server_reader(MQTT_5, max_packet_size=1024)
    ok = encode(Publish("t", b"x" * 1017), MQTT_5)
    assert len(ok) == 1024  # fixed header included, as MQTT 5 counts it
    assert read_all(reader, ok) == [Publish("t", b"x" * 1017)]
    # a 2 GiB PUBLISH announced by five bytes: refused before any body arrives
    reader.feed(bytes([0x30]) + encode_varint(268_435_455))
    with pytest.raises(MQTTError) as info:
        reader.next_packet()
    assert info.value.reason_code == reason_codes.PACKET_TOO_LARGE
    reader = server_reader(MQTT_5, max_packet_size=1024)
    reader.feed(encode(Publish("t", b"x" * 1018), MQTT_5)[:3])
    with pytest.raises(MQTTError):
        reader.next_packet()


def test_type_and_flags_are_checked_before_the_length_is_complete() -> None:
    reader = server_reader(MQTT_5)
    reader.feed(b"\x20")  # CONNACK from a client: no need to wait for more
    with pytest.raises(MQTTError) as info:
        reader.next_packet()
    assert info.value.reason_code == P


def test_reader_needs_a_known_level_on_the_client_side() -> None:
    with pytest.raises(ValueError):
        PacketReader(role="client")
    with pytest.raises(ValueError):
        PacketReader(role="server", protocol_level=6)


# -- properties --------------------------------------------------------------------------

_VALUES = {
    properties.BYTE: 1,
    properties.TWO_BYTE_INTEGER: 513,
    properties.FOUR_BYTE_INTEGER: 70_000,
    properties.VARIABLE_BYTE_INTEGER: 16_384,
    properties.UTF8_STRING: "välue",
    properties.BINARY_DATA: b"\x00\xff",
    properties.UTF8_STRING_PAIR: ("n", "v"),
}
_PACKET_TYPES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15, WILL]


@pytest.mark.parametrize("spec", list(properties.PROPERTIES.values()), ids=lambda s: s.name)
def test_every_property_round_trips_where_allowed_and_is_refused_elsewhere(
    spec: properties.PropertySpec,
) -> None:
    value = _VALUES[spec.type]
    props = Properties()
    if spec.attr in ("user_properties", "subscription_identifiers"):
        getattr(props, spec.attr).append(value)
    else:
        setattr(props, spec.attr, value)
    for ptype in _PACKET_TYPES:
        if ptype in spec.packets:
            block = properties.encode_properties(props, ptype)
            reader = Reader(memoryview(block))
            assert properties.decode_properties(reader, ptype) == props
            assert reader.remaining() == 0
        else:
            with pytest.raises(ValueError):
                properties.encode_properties(props, ptype)
            raw = encode_varint(spec.id) + bytes(8)  # any value: the id alone is refused
            block = encode_varint(len(raw)) + raw
            with pytest.raises(MQTTError) as info:
                properties.decode_properties(Reader(memoryview(block)), ptype)
            assert info.value.reason_code == M


def test_property_table_matches_the_spec() -> None:
    # MQTT 5.0 table 2-4: 27 properties, ids 1..42 with gaps
    assert sorted(properties.PROPERTIES) == [
        1, 2, 3, 8, 9, 11, 17, 18, 19, 21, 22, 23, 24, 25, 26, 28, 31, 33, 34, 35, 36, 37,
        38, 39, 40, 41, 42,
    ]
    assert properties.PROPERTIES[0x26].packets == frozenset(
        {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15, WILL}
    )
    assert properties.PROPERTIES[0x18].packets == frozenset({WILL})


def test_publish_from_a_server_may_repeat_subscription_identifiers() -> None:
    packet = Publish("t", b"", 0, properties=Properties(subscription_identifiers=[1, 2, 3]))
    reader = PacketReader(role="client", protocol_level=MQTT_5)
    assert read_all(reader, encode(packet, MQTT_5)) == [packet]


# -- reason codes -----------------------------------------------------------------------


def test_reason_code_names_and_3x_mapping() -> None:
    assert reason_codes.reason_name(0x87) == "Not authorized"
    assert reason_codes.reason_name(0, DISCONNECT) == "Normal disconnection"
    assert reason_codes.reason_name(0, SUBACK) == "Granted QoS 0"
    assert reason_codes.reason_name(0) == "Success"
    assert len(reason_codes.NAMES) == 43
    assert reason_codes.connack_code_v3(reason_codes.UNSUPPORTED_PROTOCOL_VERSION) == 1
    assert reason_codes.connack_code_v3(reason_codes.CLIENT_IDENTIFIER_NOT_VALID) == 2
    assert reason_codes.connack_code_v3(reason_codes.BAD_USER_NAME_OR_PASSWORD) == 4
    assert reason_codes.connack_code_v3(reason_codes.NOT_AUTHORIZED) == 5
    assert reason_codes.connack_code_v3(reason_codes.MALFORMED_PACKET) is None
    assert 0x8E in reason_codes.ALLOWED[DISCONNECT]
    assert 0x8E not in reason_codes.ALLOWED[CONNACK]
    assert reason_codes.ALLOWED[AUTH] == {0x00, 0x18, 0x19}
    error = MQTTError(reason_codes.PACKET_TOO_LARGE, "big", PUBLISH)
    assert str(error) == "0x95 Packet too large: big"


def test_encoding_refuses_what_the_caller_got_wrong() -> None:
    with pytest.raises(ValueError):
        encode(Publish("t", b"", 1), MQTT_5)  # QoS 1 without a packet id
    with pytest.raises(ValueError):
        encode(Auth(), MQTT_3_1_1)
    with pytest.raises(ValueError):  # a CONNECT-only property on a PUBLISH
        encode(Publish("t", properties=Properties(receive_maximum=1)), MQTT_5)


def test_mqtt_3_1_connack_has_no_session_present_flag() -> None:
    assert encode(ConnAck(0, True), MQTT_3_1) == bytes.fromhex("20020000")


def test_3x_encoding_leaves_mqtt5_fields_off_the_wire() -> None:
    packet = Publish("t", b"x", 1, packet_id=1, properties=Properties(content_type="c"))
    assert encode(packet, MQTT_3_1_1) == encode(Publish("t", b"x", 1, packet_id=1), MQTT_3_1_1)
    assert encode(PubAck(1, 0x80), MQTT_3_1_1) == bytes.fromhex("40020001")


def test_subscribe_keeps_filters_for_the_session_to_judge() -> None:
    # an invalid filter is the SUBACK's business (0x8F), not a reason to drop the packet
    packet = Subscribe(1, [Subscription("a/#/b", 0), Subscription("ok/+", 1)])
    assert read_all(server_reader(MQTT_5), encode(packet, MQTT_5)) == [packet]


def test_codec_module_exports() -> None:
    assert codec.MAX_PACKET_SIZE == 268_435_460
    assert repr(NEED_DATA) == "NEED_DATA"
