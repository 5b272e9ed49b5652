"""The MQTT session without sockets and without an event loop: a fake transport and the
STOMP tests' fake clock over an in-memory broker. The state table (mqtt/states.py)
decides what each packet may do; keepalive and the CONNECT deadline run on the clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from roost.backpressure import FRAMES_PER_TURN
from roost.mqtt.codec import PacketReader, encode
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    CONNECT,
    DISCONNECT,
    MQTT_5,
    PUBLISH,
    SUBSCRIBE,
    ConnAck,
    Connect,
    Disconnect,
    Packet,
    PingReq,
    PingResp,
    PubAck,
    Publish,
    SubAck,
    Subscribe,
    Subscription,
)
from roost.mqtt.reason_codes import KEEP_ALIVE_TIMEOUT, PROTOCOL_ERROR
from roost.mqtt.retained import MQTTState
from roost.mqtt.session import MQTTSession, MQTTSettings
from roost.mqtt.states import State, advance
from tests.brokers import memory_broker
from tests.fake_clock import FakeClock

if TYPE_CHECKING:
    from roost.core.ports.adapter import Queue


class FakeTransport:
    peer = "127.0.0.1:5000"
    tls = False
    cert_user: str | None = None

    def __init__(self) -> None:
        self.data = b""
        self.closed = False
        self.reading = True

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def packets(self, level: int) -> list[Packet]:
        reader = PacketReader(role="client", protocol_level=level)
        reader.feed(self.data)
        return reader.packets()


def session() -> tuple[MQTTSession, FakeTransport, FakeClock]:
    broker = memory_broker()
    transport, clock = FakeTransport(), FakeClock()
    mqtt = MQTTSession(broker, MQTTSettings(), transport, MQTTState(broker), set(), clock=clock)
    return mqtt, transport, clock


def test_the_state_table() -> None:
    assert advance(State.AWAITING_CONNECT, CONNECT) is State.CONNECTED
    assert advance(State.CONNECTED, PUBLISH) is State.CONNECTED
    assert advance(State.CONNECTED, DISCONNECT) is State.CLOSED
    with pytest.raises(MQTTError, match="expected CONNECT"):
        advance(State.AWAITING_CONNECT, SUBSCRIBE)
    with pytest.raises(MQTTError, match="a second CONNECT"):
        advance(State.CONNECTED, CONNECT)


def test_publish_subscribe_and_puback_without_a_loop() -> None:
    mqtt, transport, clock = session()
    mqtt.data_received(encode(Connect("c1", MQTT_5), MQTT_5))
    mqtt.data_received(encode(Subscribe(1, [Subscription("a/+", 1)]), MQTT_5))
    clock.advance(0)  # the consumer starts after the SUBACK
    mqtt.data_received(encode(Publish("a/b", b"hi", 1, packet_id=9), MQTT_5))
    clock.advance(0)
    connack, suback, *rest = transport.packets(MQTT_5)
    assert isinstance(connack, ConnAck) and connack.reason_code == 0
    assert suback == SubAck(1, [1], suback.properties)  # type: ignore[union-attr]
    kinds = {type(p) for p in rest}
    assert kinds == {PubAck, Publish}
    delivered = next(p for p in rest if isinstance(p, Publish))
    assert (delivered.topic, delivered.payload, delivered.qos) == ("a/b", b"hi", 1)
    assert mqtt.session is not None and mqtt.session.unacked_count == 1
    mqtt.data_received(encode(PubAck(delivered.packet_id or 0), MQTT_5))
    assert mqtt.session.unacked_count == 0


def test_a_second_connect_is_a_protocol_error() -> None:
    mqtt, transport, _clock = session()
    mqtt.data_received(encode(Connect("c1", MQTT_5), MQTT_5) * 2)
    connack, disconnect = transport.packets(MQTT_5)
    assert isinstance(connack, ConnAck)
    assert isinstance(disconnect, Disconnect) and disconnect.reason_code == PROTOCOL_ERROR
    assert transport.closed and mqtt.closed


def test_keepalive_on_the_clock() -> None:
    mqtt, transport, clock = session()
    mqtt.data_received(encode(Connect("c1", MQTT_5, keep_alive=10), MQTT_5))
    clock.advance(14)
    mqtt.data_received(encode(PingReq(), MQTT_5))  # heard at 14 s: good until 29 s
    clock.advance(14.9)
    assert not transport.closed
    clock.advance(0.2)  # 15.1 s of silence > 1.5 x 10 s
    assert transport.closed
    *_, pingresp, disconnect = transport.packets(MQTT_5)
    assert isinstance(pingresp, PingResp)
    assert isinstance(disconnect, Disconnect) and disconnect.reason_code == KEEP_ALIVE_TIMEOUT


def test_no_connect_in_time_closes_on_the_clock() -> None:
    mqtt, transport, clock = session()
    clock.advance(MQTTSettings().connect_timeout - 0.1)
    assert not transport.closed
    clock.advance(0.2)
    assert transport.closed and mqtt.close_reason == "no CONNECT in time"


def bound_queue(mqtt: MQTTSession, topic_key: str) -> Queue:
    """A queue bound to ``amq.topic``, declared through the port as the session's client."""
    assert mqtt.client is not None
    queue = mqtt.port.declare_queue(mqtt.client, "q")
    mqtt.port.bind_queue(mqtt.client, "q", "amq.topic", topic_key, {})
    return queue


def test_a_read_is_handled_a_turn_at_a_time_on_the_clock() -> None:
    # one socket read of 600 PUBLISHes: a turn's worth now, the rest on the clock's next
    # turns, and the socket is not read meanwhile (roost/backpressure.py)
    mqtt, transport, clock = session()
    mqtt.data_received(encode(Connect("c1"), 4))
    queue = bound_queue(mqtt, "a.b")
    mqtt.data_received(encode(Publish("a/b", b"x"), 4) * 600)
    # CONNECT and 255 of them make one turn's share of packets
    assert queue.message_count == FRAMES_PER_TURN - 1
    assert not transport.reading and mqtt.gate.paused
    clock.turn()
    assert queue.message_count == 2 * FRAMES_PER_TURN - 1
    assert not transport.reading
    clock.turn()
    assert queue.message_count == 600
    assert transport.reading and not mqtt.gate.paused


def test_a_resource_alarm_blocks_a_publisher_until_it_clears() -> None:
    mqtt, transport, clock = session()
    mqtt.data_received(encode(Connect("c1", MQTT_5), MQTT_5))
    queue = bound_queue(mqtt, "a.b")
    alarms = mqtt.port.alarms
    alarms.set_store_full(True)  # a disk alarm: connections that publish are blocked
    assert transport.reading  # not before it publishes (as RabbitMQ)
    mqtt.data_received(encode(Publish("a/b", b"x", 1, packet_id=1), MQTT_5) * 10)
    # the PUBLISH that met the alarm went through; the rest of the read waits unread
    assert queue.message_count == 1
    assert not transport.reading and mqtt.gate.paused
    clock.advance(5)
    assert queue.message_count == 1
    alarms.set_store_full(False)
    clock.advance(0)
    assert queue.message_count == 10 and transport.reading
    assert len([p for p in transport.packets(MQTT_5) if isinstance(p, PubAck)]) == 10
