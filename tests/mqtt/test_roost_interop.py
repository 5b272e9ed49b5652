"""MQTT <-> AMQP (pika) and STOMP (stomp.py) through amq.topic, both ways, and MQTT over
WebSocket with paho's websocket transport."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pika
import pytest
import stomp

from tests.mqtt.clients import MQTT_5, Paho, props
from tests.support import RoostProcess


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_amqp_consumer_sees_mqtt_publishes_with_properties(roost: RoostProcess) -> None:
    base = _id("interop")
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(q, "amq.topic", f"{base}.#")
        pub = Paho(roost.mqtt_port, _id("pub"), version=MQTT_5)
        try:
            pub.publish(f"{base}/a/b", b"from mqtt", qos=1, properties=props(
                ContentType="text/plain", UserProperty=[("unit", "C")],
                CorrelationData=b"corr-1", ResponseTopic=f"{base}/reply"))
            pub.publish(f"{base}/zero", b"qos0", qos=0)
        finally:
            pub.close()
        got: list[Any] = []
        for _ in range(50):
            method, properties, body = ch.basic_get(q, auto_ack=True)
            if method is not None:
                got.append((method, properties, body))
            if len(got) == 2:
                break
            conn.sleep(0.05)
        (m1, p1, b1), (m2, p2, b2) = got
        assert (m1.exchange, m1.routing_key, b1) == ("amq.topic", f"{base}.a.b", b"from mqtt")
        assert p1.delivery_mode == 2  # QoS 1 is persistent, as in RabbitMQ
        assert p1.content_type == "text/plain"
        assert p1.correlation_id == "corr-1"
        assert p1.reply_to == f"{base}.reply"
        assert p1.headers["unit"] == "C"
        assert p1.headers["x-mqtt-publish-qos"] == 1
        assert (m2.routing_key, b2, p2.delivery_mode) == (f"{base}.zero", b"qos0", 1)


@pytest.mark.parametrize("version", [4, MQTT_5])
def test_mqtt_subscriber_sees_amqp_publishes(roost: RoostProcess, version: int) -> None:
    base = _id("interop")
    sub = Paho(roost.mqtt_port, _id("sub"), version=version)
    try:
        sub.subscribe(f"{base}/+/x", 1)
        with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
            ch = conn.channel()
            ch.basic_publish("amq.topic", f"{base}.p.x", b"persistent",
                             pika.BasicProperties(delivery_mode=2, content_type="a/b",
                                                  headers={"k": "v"}))
            ch.basic_publish("amq.topic", f"{base}.t.x", b"transient")
        got = {m.payload: m for m in (sub.get(), sub.get())}
        assert got[b"persistent"].topic == f"{base}/p/x"
        assert got[b"persistent"].qos == 1  # a persistent message is QoS 1
        assert got[b"transient"].qos == 0
        if version == MQTT_5:
            p = got[b"persistent"].properties
            assert p.ContentType == "a/b"
            assert ("k", "v") in p.UserProperty
    finally:
        sub.close()


def test_stomp_and_mqtt_both_ways(roost: RoostProcess) -> None:
    base = _id("stomp")
    received: list[Any] = []
    arrived = threading.Event()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            received.append(frame)
            arrived.set()

    conn = stomp.Connection([("127.0.0.1", roost.stomp_port)])
    conn.set_listener("", Listener())
    conn.connect("guest", "guest", wait=True)
    sub = Paho(roost.mqtt_port, _id("sub"))
    try:
        conn.subscribe(f"/topic/{base}.from-mqtt", id="1", ack="auto", receipt="r1")
        sub.subscribe(f"{base}/from-stomp", 1)
        pub = Paho(roost.mqtt_port, _id("pub"))
        pub.publish(f"{base}/from-mqtt", b"hello stomp", qos=1)
        pub.close()
        assert arrived.wait(10)
        assert received[0].body == "hello stomp"
        conn.send(f"/topic/{base}.from-stomp", "hello mqtt")
        msg = sub.get()
        assert (msg.topic, msg.payload) == (f"{base}/from-stomp", b"hello mqtt")
    finally:
        sub.close()
        conn.disconnect()


def test_websocket_transport(roost: RoostProcess) -> None:
    topic = _id("ws")
    ws = Paho(roost.mqtt_ws_port, _id("ws"), transport="websockets")
    tcp = Paho(roost.mqtt_port, _id("tcp"))
    try:
        assert ws.subscribe(f"{topic}/#", 1)[0] == 1
        tcp.publish(f"{topic}/a", b"over tcp", qos=1)
        msg = ws.get()
        assert (msg.topic, msg.payload, msg.qos) == (f"{topic}/a", b"over tcp", 1)
        tcp.subscribe(f"{topic}/back", 0)
        ws.publish(f"{topic}/back", b"over ws", qos=1)
        assert tcp.get().payload == b"over ws"
    finally:
        ws.close()
        tcp.close()
