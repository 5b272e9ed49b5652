"""One or more packets of every kind, per protocol level, and who reads them."""

from __future__ import annotations

from roost.mqtt.packets import (
    MQTT_3_1,
    MQTT_3_1_1,
    MQTT_5,
    Auth,
    ConnAck,
    Connect,
    Disconnect,
    Packet,
    PingReq,
    PingResp,
    Properties,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
    SubAck,
    Subscribe,
    Subscription,
    UnsubAck,
    Unsubscribe,
    Will,
)

LEVELS = (MQTT_3_1, MQTT_3_1_1, MQTT_5)

V5_PROPS = Properties(
    payload_format_indicator=1,
    message_expiry_interval=3600,
    content_type="text/plain",
    response_topic="replies/1",
    correlation_data=b"\x00\x01",
    topic_alias=3,
    user_properties=[("a", "1"), ("a", "2"), ("ключ", "значение")],
)


def client_packets(level: int) -> list[Packet]:
    """What a client sends (a server reads), after the CONNECT that opens the list."""
    v5 = level == MQTT_5
    will_props = Properties(will_delay_interval=30, content_type="x") if v5 else Properties()
    return [
        Connect(
            "client-1", level, True, 30, "guest", b"guest",
            Will("last/will", b"bye", 1, True, will_props),
            Properties(session_expiry_interval=60, receive_maximum=10, maximum_packet_size=1 << 20,
                       topic_alias_maximum=5, request_problem_information=0,
                       user_properties=[("k", "v")]) if v5 else Properties(),
        ),
        Publish("a/b", b"payload", 0),
        Publish("a/b", b"", 1, True, False, 1),
        Publish("a/b", b"\x00" * 300, 2, False, True, 65535, V5_PROPS if v5 else Properties()),
        PubAck(1),
        PubRec(2),
        PubRel(3),
        PubComp(4),
        Subscribe(5, [Subscription("a/+/c", 1), Subscription("#", 2)]),
        Unsubscribe(6, ["a/+/c", "#"]),
        PingReq(),
        *(_client_v5() if v5 else []),
        Disconnect(),
    ]


def _client_v5() -> list[Packet]:
    return [
        Publish("", b"aliased", 1, False, False, 7, Properties(topic_alias=3)),
        PubAck(8, 0x10, Properties(reason_string="nobody", user_properties=[("x", "y")])),
        PubRec(9, 0x80),
        PubRel(10, 0x92, Properties(reason_string="gone")),
        PubComp(11, 0x92),
        Subscribe(
            12,
            [Subscription("a/#", 1, True, True, 2), Subscription("$share/g/t", 0, False, False, 1)],
            Properties(subscription_identifiers=[42], user_properties=[("u", "v")]),
        ),
        Unsubscribe(13, ["a/#"], Properties(user_properties=[("u", "v")])),
        Auth(0x18, Properties(authentication_method="SCRAM-SHA-1", authentication_data=b"\x01")),
        Auth(),
        Disconnect(0x04, Properties(session_expiry_interval=0, reason_string="bye")),
    ]


def server_packets(level: int) -> list[Packet]:
    """What a server sends (a client reads)."""
    v5 = level == MQTT_5
    packets: list[Packet] = [
        ConnAck(0, level != MQTT_3_1),
        ConnAck(5 if not v5 else 0x87),
        Publish("a/b", b"x", 0, True),
        Publish("a/b", b"y", 1, False, True, 9),
        PubAck(1),
        PubRec(2),
        PubRel(3),
        PubComp(4),
        SubAck(5, [0, 1, 2, 0x80]),
        UnsubAck(6, [0, 0x11] if v5 else []),
        PingResp(),
    ]
    if v5:
        packets += [
            ConnAck(0, False, Properties(
                session_expiry_interval=60, receive_maximum=100, maximum_qos=1,
                retain_available=1, maximum_packet_size=65536, assigned_client_identifier="gen-1",
                topic_alias_maximum=10, reason_string="ok", wildcard_subscription_available=1,
                subscription_identifier_available=0, shared_subscription_available=0,
                server_keep_alive=30, response_information="resp/", server_reference="other:1883",
                authentication_method="PLAIN", authentication_data=b"x",
                user_properties=[("k", "v")],
            )),
            Publish("a/b", b"z", 1, False, False, 10,
                    Properties(subscription_identifiers=[1, 268_435_455], content_type="c")),
            SubAck(11, [0x8F, 0x9E, 0xA1, 0xA2, 0x87, 0x97, 0x91, 0x83],
                   Properties(reason_string="r")),
            Disconnect(0x8E, Properties(reason_string="taken over", server_reference="x")),
            Auth(0x19),
        ]
    return packets
