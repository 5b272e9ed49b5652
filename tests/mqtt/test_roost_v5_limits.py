"""MQTT 5 negotiation and per-connection limits against a real Roost started with small
limits: server-to-client topic aliases, server keep alive, response information,
maximum packet size both ways, the server's Receive Maximum (5.0: 0x93; 3.1.1: held),
the subscription cap (0x97 / 0x80), and enhanced authentication refused (0x8C)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties as PahoProperties

from roost.mqtt.packets import (
    MQTT_3_1_1,
    MQTT_5,
    Auth,
    ConnAck,
    Connect,
    Disconnect,
    PingReq,
    PingResp,
    Properties,
    PubAck,
    Publish,
    SubAck,
    Subscribe,
    Subscription,
    Unsubscribe,
)
from tests.mqtt.clients import TIMEOUT, Paho, Raw
from tests.support import RoostProcess, running

MAX_KEEP_ALIVE = 2  # raw clients below stay within 1.5 x this, or are cut off
RECEIVE_MAXIMUM = 4
MAX_SUBSCRIPTIONS = 3
MAX_PACKET = 2048


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    yield from running(RoostProcess(
        tmp_path_factory.mktemp("mqtt-limits") / "data",
        "--mqtt-max-keep-alive", str(MAX_KEEP_ALIVE),
        "--mqtt-receive-maximum", str(RECEIVE_MAXIMUM),
        "--mqtt-max-subscriptions", str(MAX_SUBSCRIPTIONS),
        "--mqtt-max-packet-size", str(MAX_PACKET),
        # PUBACKs for a durable queue wait for this timer: acks stay owed meanwhile
        "--fsync", "interval", "--fsync-interval-ms", "300",
    ))


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _connect(port: int, level: int = MQTT_5, keep_alive: int = MAX_KEEP_ALIVE, **properties: Any
             ) -> tuple[Raw, ConnAck]:
    raw = Raw(port, level)
    cid = properties.pop("client_id", _id("raw"))
    raw.send(Connect(cid, level, keep_alive=keep_alive,
                     properties=Properties(**properties)))
    connack = raw.recv()
    assert isinstance(connack, ConnAck) and connack.reason_code == 0, connack
    return raw, connack


def _sub(raw: Raw, packet_id: int, *filters: str) -> list[int]:
    raw.send(Subscribe(packet_id, [Subscription(f, 1) for f in filters]))
    suback = raw.recv()
    assert isinstance(suback, SubAck) and suback.packet_id == packet_id
    return suback.reason_codes


def test_server_to_client_topic_aliases(limited: RoostProcess) -> None:
    topic = _id("alias")
    raw, _ = _connect(limited.mqtt_port, topic_alias_maximum=2)
    plain, _ = _connect(limited.mqtt_port)  # did not allow aliases: gets none
    _sub(raw, 1, f"{topic}/#")
    _sub(plain, 1, f"{topic}/#")
    pub = Paho(limited.mqtt_port, _id("pub"), version=MQTT_5)
    names = ["a", "a", "b", "a", "c", "a", "c"]
    for n in names:
        pub.publish(f"{topic}/{n}", n.encode(), qos=0)
    got = [raw.recv() for _ in names]
    seen = [(p.topic, p.properties.topic_alias) for p in got]  # type: ignore[union-attr]
    # a new topic carries its name and alias, a known one the alias only; with both
    # aliases taken the least recently used (b) is given to c
    assert seen == [(f"{topic}/a", 1), ("", 1), (f"{topic}/b", 2), ("", 1),
                    (f"{topic}/c", 2), ("", 1), ("", 2)]
    for _ in names:
        p = plain.recv()
        assert isinstance(p, Publish) and p.topic and p.properties.topic_alias is None
    raw.close()
    plain.close()
    pub.close()


def test_a_dropped_oversized_delivery_teaches_no_alias(limited: RoostProcess) -> None:
    topic = _id("bigalias")
    raw, _ = _connect(limited.mqtt_port, topic_alias_maximum=5, maximum_packet_size=200)
    _sub(raw, 1, topic)
    pub = Paho(limited.mqtt_port, _id("pub"), version=MQTT_5)
    pub.publish(topic, b"x" * 500, qos=1)  # above the client's maximum: dropped
    pub.publish(topic, b"small", qos=1)
    p = raw.recv()
    assert isinstance(p, Publish) and p.payload == b"small"
    assert (p.topic, p.properties.topic_alias) == (topic, 1)  # the name, as the first
    raw.close()
    pub.close()


def test_the_servers_maximum_packet_size(limited: RoostProcess) -> None:
    raw, connack = _connect(limited.mqtt_port)
    assert connack.properties.maximum_packet_size == MAX_PACKET
    raw.send(Publish(_id("big"), b"x" * (MAX_PACKET + 10), 0))
    bye = raw.recv()
    assert isinstance(bye, Disconnect) and bye.reason_code == 0x95  # packet too large
    assert raw.recv() is None
    raw.close()
    v3, _ = _connect(limited.mqtt_port, MQTT_3_1_1)
    v3.send(Publish(_id("big"), b"x" * (MAX_PACKET + 10), 0))
    assert v3.recv() is None  # 3.1.1 has no DISCONNECT from the server: closed
    v3.close()


def test_server_keep_alive(limited: RoostProcess) -> None:
    v3, connack3 = _connect(limited.mqtt_port, MQTT_3_1_1, keep_alive=0)
    assert connack3.properties.server_keep_alive is None  # 3.x has no such field
    raw, connack = _connect(limited.mqtt_port, keep_alive=0)  # asks for none
    assert connack.properties.server_keep_alive == MAX_KEEP_ALIVE
    start = time.monotonic()
    bye = raw.recv()  # silent: closed after 1.5 x the server's keepalive
    assert isinstance(bye, Disconnect) and bye.reason_code == 0x8D
    assert 2.9 <= time.monotonic() - start < 8
    raw.close()
    v3.send(PingReq())  # the 3.1.1 client keeps its own keepalive (none): still open
    assert isinstance(v3.recv(), PingResp)
    v3.close()


def test_response_information_only_when_asked(limited: RoostProcess) -> None:
    cid = _id("rr")
    raw, connack = _connect(limited.mqtt_port, request_response_information=1, client_id=cid)
    assert connack.properties.response_information == f"response/{cid}"
    raw.close()
    raw, connack = _connect(limited.mqtt_port)
    assert connack.properties.response_information is None
    raw.close()


def _durable_subscriber(port: int, topic: str) -> None:
    """A persistent session's queue: PUBACKs for it wait for the fsync timer."""
    sub = Paho(port, _id("keep"), version=MQTT_5, clean=False, session_expiry=60)
    sub.subscribe(topic, 1)
    sub.close()


def test_receive_maximum_exceeded_closes_a_v5_connection(limited: RoostProcess) -> None:
    topic = _id("recvmax")
    _durable_subscriber(limited.mqtt_port, topic)
    raw, connack = _connect(limited.mqtt_port)
    assert connack.properties.receive_maximum == RECEIVE_MAXIMUM
    raw.send(*[Publish(topic, b"m", 1, packet_id=i + 1) for i in range(RECEIVE_MAXIMUM + 1)])
    bye = None
    for _ in range(RECEIVE_MAXIMUM + 2):
        bye = raw.recv()
        if not isinstance(bye, PubAck):
            break
    assert isinstance(bye, Disconnect) and bye.reason_code == 0x93
    raw.close()


def test_within_receive_maximum_and_a_v3_publisher_is_held_not_closed(
    limited: RoostProcess,
) -> None:
    topic = _id("recvmax3")
    _durable_subscriber(limited.mqtt_port, topic)
    ok, _ = _connect(limited.mqtt_port)
    ok.send(*[Publish(topic, b"m", 1, packet_id=i + 1) for i in range(RECEIVE_MAXIMUM)])
    assert sorted(ok.recv().packet_id for _ in range(RECEIVE_MAXIMUM)) == [  # type: ignore[union-attr]
        1, 2, 3, 4]
    ok.close()
    v3, _ = _connect(limited.mqtt_port, MQTT_3_1_1)
    count = RECEIVE_MAXIMUM * 3
    start = time.monotonic()
    v3.send(*[Publish(topic, b"m", 1, packet_id=i + 1) for i in range(count)])
    acks = [v3.recv() for _ in range(count)]
    assert sorted(a.packet_id for a in acks if isinstance(a, PubAck)) == list(  # type: ignore[union-attr]
        range(1, count + 1))
    # read in rounds of RECEIVE_MAXIMUM, each waiting for an fsync (300 ms timer)
    assert time.monotonic() - start >= 0.5
    v3.close()


@pytest.mark.parametrize("level,refused", [(MQTT_5, 0x97), (MQTT_3_1_1, 0x80)])
def test_subscription_cap(limited: RoostProcess, level: int, refused: int) -> None:
    t = _id("cap")
    raw, _ = _connect(limited.mqtt_port, level)
    assert _sub(raw, 1, f"{t}/1", f"{t}/2", f"{t}/3", f"{t}/4") == [1, 1, 1, refused]
    assert _sub(raw, 2, f"{t}/2") == [1]  # one it has: not a new one
    raw.send(Unsubscribe(3, [f"{t}/1"]))
    raw.recv()
    assert _sub(raw, 4, f"$share/g/{t}/4", f"{t}/5") == [1, refused]
    raw.close()


def test_enhanced_authentication_is_refused_with_bad_authentication_method(
    limited: RoostProcess,
) -> None:
    raw = Raw(limited.mqtt_port, MQTT_5)
    raw.send(Connect(_id("scram"), MQTT_5, properties=Properties(
        authentication_method="SCRAM-SHA-256", authentication_data=b"n,,n=guest")))
    connack = raw.recv()
    assert isinstance(connack, ConnAck) and connack.reason_code == 0x8C
    assert raw.recv() is None
    raw.close()
    # AUTH from a client that named no method at CONNECT: a protocol error
    raw, _ = _connect(limited.mqtt_port)
    raw.send(Auth(0x18, Properties(authentication_method="SCRAM-SHA-256")))
    bye = raw.recv()
    assert isinstance(bye, Disconnect) and bye.reason_code == 0x82
    raw.close()
    # and paho sees the refusal as the reason code
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=_id("p"), protocol=mqtt.MQTTv5)
    props = PahoProperties(PacketTypes.CONNECT)
    props.AuthenticationMethod = "SCRAM-SHA-256"
    codes: list[Any] = []
    client.on_connect = lambda _c, _u, _f, rc, _p: codes.append(rc)
    client.connect("127.0.0.1", limited.mqtt_port, properties=props)
    deadline = time.monotonic() + TIMEOUT
    while not codes and time.monotonic() < deadline:
        client.loop(0.1)
    # paho keeps its socket and a wake-up socket pair until collected: close them now
    for sock in (client.socket(), getattr(client, "_sockpairR", None),
                 getattr(client, "_sockpairW", None)):
        if sock is not None:
            sock.close()
    assert [c.value for c in codes] == [0x8C]
