"""MQTT 5 additions against a real Roost: properties end to end, topic aliases, message
expiry, receive maximum as flow control, the client's maximum packet size."""

from __future__ import annotations

import time
import uuid

from roost.mqtt.packets import (
    MQTT_5,
    ConnAck,
    Connect,
    Properties,
    PubAck,
    Publish,
    SubAck,
    Subscribe,
    Subscription,
)
from tests.mqtt.clients import Paho, Raw, props
from tests.support import RoostProcess


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_properties_travel_from_publisher_to_subscriber(roost: RoostProcess) -> None:
    topic = _id("v5")
    sub = Paho(roost.mqtt_port, _id("sub"), version=MQTT_5)
    pub = Paho(roost.mqtt_port, _id("pub"), version=MQTT_5)
    try:
        sub.subscribe(topic, 1)
        pub.publish(topic, b"{}", qos=1, properties=props(
            ContentType="application/json", UserProperty=[("a", "1"), ("b", "2")],
            ResponseTopic=f"{topic}/reply", CorrelationData=b"c-42",
            MessageExpiryInterval=60))
        p = sub.get().properties
        assert p.ContentType == "application/json"
        assert [kv for kv in p.UserProperty if kv[0] in ("a", "b")] == [("a", "1"), ("b", "2")]
        assert p.ResponseTopic == f"{topic}/reply"
        assert p.CorrelationData == b"c-42"
        assert 0 < p.MessageExpiryInterval <= 60
    finally:
        sub.close()
        pub.close()


def _connect(port: int, **properties: int) -> Raw:
    raw = Raw(port, MQTT_5)
    raw.send(Connect(_id("raw"), MQTT_5, properties=Properties(**properties)))
    connack = raw.recv()
    assert isinstance(connack, ConnAck) and connack.reason_code == 0
    return raw


def test_topic_alias_and_message_expiry(roost: RoostProcess) -> None:
    topic = _id("alias")
    cid = _id("sub")
    sub = Paho(roost.mqtt_port, cid, version=MQTT_5, clean=False, session_expiry=60)
    sub.subscribe(f"{topic}/#", 1)
    sub.close()  # away: what is published now waits in its queue
    raw = _connect(roost.mqtt_port)
    raw.send(
        Publish(f"{topic}/long/name", b"first", 1, packet_id=1,
                properties=Properties(topic_alias=3)),
        Publish("", b"by alias", 1, packet_id=2, properties=Properties(topic_alias=3)),
        Publish(f"{topic}/short", b"expires", 1, packet_id=3,
                properties=Properties(message_expiry_interval=1)),
    )
    assert [raw.recv(), raw.recv(), raw.recv()] == [PubAck(1), PubAck(2), PubAck(3)]
    raw.close()
    time.sleep(1.3)
    sub = Paho(roost.mqtt_port, cid, version=MQTT_5, clean=False, session_expiry=60)
    got = [(m.topic, m.payload) for m in (sub.get(), sub.get())]
    assert got == [(f"{topic}/long/name", b"first"), (f"{topic}/long/name", b"by alias")]
    time.sleep(0.2)
    assert sub.messages.empty()  # the expired one was dropped
    sub.close()


def test_receive_maximum_bounds_unacknowledged_deliveries(roost: RoostProcess) -> None:
    topic = _id("recvmax")
    raw = _connect(roost.mqtt_port, receive_maximum=3)
    raw.send(Subscribe(1, [Subscription(topic, 1)]))
    assert isinstance(raw.recv(), SubAck)
    pub = Paho(roost.mqtt_port, _id("pub"), version=MQTT_5)
    for i in range(6):
        pub.publish(topic, str(i).encode(), qos=1)
    first = [raw.recv() for _ in range(3)]
    assert [p.payload for p in first] == [b"0", b"1", b"2"]  # type: ignore[union-attr]
    raw.sock.settimeout(0.5)
    try:
        raw.recv()
        raise AssertionError("a fourth delivery before any PUBACK")
    except TimeoutError:
        pass
    raw.sock.settimeout(5)
    raw.send(PubAck(first[0].packet_id))  # type: ignore[union-attr]
    nxt = raw.recv()
    assert isinstance(nxt, Publish) and nxt.payload == b"3"
    raw.close()
    pub.close()


def test_deliveries_above_the_clients_maximum_packet_size_are_dropped(
    roost: RoostProcess,
) -> None:
    topic = _id("maxsize")
    raw = _connect(roost.mqtt_port, maximum_packet_size=200)
    raw.send(Subscribe(1, [Subscription(topic, 1)]))
    assert isinstance(raw.recv(), SubAck)
    pub = Paho(roost.mqtt_port, _id("pub"), version=MQTT_5)
    pub.publish(topic, b"x" * 500, qos=1)
    pub.publish(topic, b"small", qos=1)
    got = raw.recv()
    assert isinstance(got, Publish) and got.payload == b"small"
    raw.close()
    pub.close()
