"""The MQTT session without sockets and without an event loop: a fake transport and the
STOMP tests' fake clock over an in-memory broker. The state table (mqtt/states.py)
decides what each packet may do; keepalive and the CONNECT deadline run on the clock."""

from __future__ import annotations

import pytest

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
from tests.stomp.test_session import FakeClock


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
