"""paho-mqtt 2.x (MQTT 3.1, 3.1.1 and 5.0) against a server made of the codec: the
codec reads every packet the real client sends, byte-exact where the encoding is
canonical, and the client accepts every packet the codec encodes."""

from __future__ import annotations

import threading
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties as PahoProperties

from roost.mqtt import codec
from roost.mqtt.packets import (
    MQTT_3_1,
    MQTT_3_1_1,
    MQTT_5,
    Connect,
    Disconnect,
    PubComp,
    Publish,
    PubRel,
    Subscribe,
    Subscription,
    Unsubscribe,
    Will,
)
from tests.mqtt.stub_server import StubServer

PAHO_LEVEL = {MQTT_3_1: mqtt.MQTTv31, MQTT_3_1_1: mqtt.MQTTv311, MQTT_5: mqtt.MQTTv5}


def _wait(event: threading.Event, what: str) -> None:
    assert event.wait(10), f"timed out waiting for {what}"


@pytest.mark.parametrize("level", [MQTT_3_1, MQTT_3_1_1, MQTT_5])
def test_paho_session_through_the_codec(level: int) -> None:
    server = StubServer()
    server.start()
    v5 = level == MQTT_5
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"paho-{level}", protocol=PAHO_LEVEL[level]
    )
    client.username_pw_set("guest", "secret")
    client.will_set("clients/gone", b"bye", qos=1, retain=True)
    connected, subscribed, unsubscribed = threading.Event(), threading.Event(), threading.Event()
    messages: list[Any] = []
    got_all = threading.Event()

    def on_message(_c: Any, _u: Any, msg: Any) -> None:
        messages.append(msg)
        if len(messages) == 3:
            got_all.set()

    client.on_connect = lambda *a: connected.set()
    client.on_subscribe = lambda *a: subscribed.set()
    client.on_unsubscribe = lambda *a: unsubscribed.set()
    client.on_message = on_message
    connect_props = None
    if v5:
        connect_props = PahoProperties(PacketTypes.CONNECT)
        connect_props.SessionExpiryInterval = 120
    client.connect("127.0.0.1", server.port, keepalive=30, properties=connect_props)
    client.loop_start()
    try:
        _wait(connected, "CONNACK")
        client.subscribe([("sensors/+/temp", 2), ("other/#", 0)])
        _wait(subscribed, "SUBACK")
        publish_props = None
        if v5:
            publish_props = PahoProperties(PacketTypes.PUBLISH)
            publish_props.ContentType = "text/plain"
            publish_props.UserProperty = [("unit", "C"), ("unit", "K")]
            publish_props.MessageExpiryInterval = 60
        for qos in (0, 1, 2):
            info = client.publish(f"sensors/{qos}/temp", f"t{qos}".encode(), qos=qos,
                                  properties=publish_props)
            info.wait_for_publish(10)
        _wait(got_all, "three messages back")
        client.unsubscribe("other/#")
        _wait(unsubscribed, "UNSUBACK")
        client.disconnect()
    finally:
        client.loop_stop()
    server.join(10)
    assert server.error is None, server.error

    received = server.received
    connect = received[0]
    assert isinstance(connect, Connect)
    assert connect == Connect(
        f"paho-{level}", level, True, 30, "guest", b"secret", Will("clients/gone", b"bye", 1, True),
        connect.properties,
    )
    if v5:
        assert connect.properties.session_expiry_interval == 120
    subscribe = next(p for p in received if isinstance(p, Subscribe))
    assert [(s.topic_filter, s.qos) for s in subscribe.subscriptions] == [
        ("sensors/+/temp", 2), ("other/#", 0)
    ]
    assert subscribe.subscriptions[0] == Subscription("sensors/+/temp", 2)
    publishes = [p for p in received if isinstance(p, Publish)]
    assert [(p.topic, p.payload, p.qos) for p in publishes] == [
        ("sensors/0/temp", b"t0", 0), ("sensors/1/temp", b"t1", 1), ("sensors/2/temp", b"t2", 2)
    ]
    if v5:
        assert publishes[0].properties.content_type == "text/plain"
        assert publishes[0].properties.user_properties == [("unit", "C"), ("unit", "K")]
        assert publishes[0].properties.message_expiry_interval == 60
    # the client's QoS 2 handshakes (as publisher: PUBREL; as subscriber: PUBCOMP)
    assert any(isinstance(p, PubRel) for p in received)
    assert any(isinstance(p, PubComp) for p in received)
    assert any(isinstance(p, Unsubscribe) and p.topic_filters == ["other/#"] for p in received)
    assert isinstance(received[-1], Disconnect)
    # paho's bytes are the codec's bytes for the same packets (3.x has one encoding; in
    # 5.0 the property order is the sender's choice, so compare decoded packets there)
    re_encoded = b"".join(codec.encode(p, level) for p in received)
    if not v5:
        assert re_encoded == bytes(server.stream)
    else:
        reader = codec.PacketReader(role="server")
        reader.feed(re_encoded)
        first = reader.next_packet()
        assert isinstance(first, Connect)
        reader.protocol_level = MQTT_5
        assert [first, *reader.packets()] == received

    # and the client got what the codec encoded
    assert sorted((m.topic, m.payload, m.qos) for m in messages) == [
        ("sensors/0/temp", b"t0", 0), ("sensors/1/temp", b"t1", 1), ("sensors/2/temp", b"t2", 2)
    ]
    if v5:
        props = messages[0].properties
        assert props.ContentType == "text/plain"
        assert props.UserProperty == [("unit", "C"), ("unit", "K")]
