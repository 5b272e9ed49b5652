"""MQTT 5 additions against a real Roost: properties end to end, topic aliases, message
expiry, receive maximum as flow control, the client's maximum packet size."""

from __future__ import annotations

import time
import uuid

import requests

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
    Will,
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


def test_subscription_identifiers_name_every_matching_subscription(
    roost: RoostProcess,
) -> None:
    topic = _id("subid")
    raw = _connect(roost.mqtt_port)
    raw.send(Subscribe(1, [Subscription(f"{topic}/#", 1)],
                       Properties(subscription_identifiers=[7])))
    assert isinstance(raw.recv(), SubAck)
    raw.send(Subscribe(2, [Subscription(f"{topic}/b", 1)],
                       Properties(subscription_identifiers=[9])))
    assert isinstance(raw.recv(), SubAck)
    pub = Paho(roost.mqtt_port, _id("pub"), version=MQTT_5)
    pub.publish(f"{topic}/b", b"both", qos=1)
    pub.publish(f"{topic}/c", b"one", qos=1)
    got = [raw.recv(), raw.recv()]
    assert [(p.payload, p.properties.subscription_identifiers)  # type: ignore[union-attr]
            for p in got] == [(b"both", [7, 9]), (b"one", [7])]
    raw.close()
    pub.close()


def test_will_delay_and_a_session_resumed_within_it(roost: RoostProcess) -> None:
    topic = _id("willdelay")
    watcher = Paho(roost.mqtt_port, _id("watch"))
    watcher.subscribe(f"{topic}/#", 1)

    def vanish(client_id: str, what: bytes) -> None:
        raw = Raw(roost.mqtt_port, MQTT_5)
        will = Will(f"{topic}/{client_id}", what, 1,
                    properties=Properties(will_delay_interval=1))
        raw.send(Connect(client_id, MQTT_5, will=will,
                         properties=Properties(session_expiry_interval=60)))
        assert isinstance(raw.recv(), ConnAck)
        raw.close()  # no DISCONNECT

    gone, back = _id("gone"), _id("back")
    start = time.monotonic()
    vanish(gone, b"gone for good")
    vanish(back, b"never sent")
    returning = Raw(roost.mqtt_port, MQTT_5)  # resumes within the delay: no will
    returning.send(Connect(back, MQTT_5, clean_start=False,
                           properties=Properties(session_expiry_interval=60)))
    assert isinstance(returning.recv(), ConnAck)
    msg = watcher.get()
    assert (msg.topic, msg.payload) == (f"{topic}/{gone}", b"gone for good")
    assert time.monotonic() - start >= 0.9
    time.sleep(0.5)
    assert watcher.messages.empty()
    returning.close()
    watcher.close()


def test_session_expiry_becomes_the_queue_expiry(roost: RoostProcess) -> None:
    cid = _id("expiry")
    client = Paho(roost.mqtt_port, cid, version=MQTT_5, clean=False, session_expiry=30)
    client.subscribe("expiry/x", 1)
    client.close()
    response = requests.get(f"{roost.http_url}/api/queues/%2F/mqtt-subscription-{cid}qos1",
                            auth=("guest", "guest"), timeout=5)
    queue = response.json()
    assert queue["durable"] is True
    assert queue["arguments"] == {"x-expires": 30_000}


def test_a_will_delay_ends_with_the_session(roost: RoostProcess) -> None:
    """Will delay 60 s, session expiry 0: the session ends with the connection, and the
    will goes then (MQTT 5 3.1.3.2.2: the delay or the session's end, whichever first)."""
    topic = _id("willexpiry")
    watcher = Paho(roost.mqtt_port, _id("watch"))
    watcher.subscribe(topic, 1)
    raw = Raw(roost.mqtt_port, MQTT_5)
    will = Will(topic, b"session over", 1, properties=Properties(will_delay_interval=60))
    raw.send(Connect(_id("short"), MQTT_5, will=will))
    assert isinstance(raw.recv(), ConnAck)
    start = time.monotonic()
    raw.close()  # no DISCONNECT
    msg = watcher.get(timeout=5)
    assert msg.payload == b"session over" and time.monotonic() - start < 5
    watcher.close()
