"""Golden bytes from a real broker: paho-mqtt sessions with RabbitMQ 3.10.8 recorded by
``tests/record_wire.py`` (``data/*.json``; RabbitMQ 3.10 speaks MQTT 3.1 and 3.1.1 only,
MQTT 5 is covered live in ``test_paho.py``). Both directions decode, and the codec
re-encodes every packet to the recorded bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roost.mqtt import codec
from roost.mqtt.packets import ConnAck, Connect, Packet, Publish, SubAck, Subscribe

DATA = Path(__file__).parent / "data"
RECORDINGS = sorted(DATA.glob("rabbitmq-*.json"))


def _decode(raw: bytes, role: str, level: int) -> list[Packet]:
    reader = codec.PacketReader(role=role, protocol_level=None if role == "server" else level)
    reader.feed(raw)
    packets: list[Packet] = []
    if role == "server":
        first = reader.next_packet()
        assert isinstance(first, Connect)
        packets.append(first)
        reader.protocol_level = first.protocol_level
    packets += reader.packets()
    assert reader.next_packet() is codec.NEED_DATA
    return packets


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_recorded_sessions_decode_and_reencode_byte_for_byte(path: Path) -> None:
    recording = json.loads(path.read_text())
    level = recording["protocol_level"]
    assert "RabbitMQ" in recording["recorded_with"]
    (conn,) = recording["connections"]
    for role, key in (("server", "client_to_server"), ("client", "server_to_client")):
        raw = bytes.fromhex(conn[key])
        packets = _decode(raw, role, level)
        assert b"".join(codec.encode(p, level) for p in packets) == raw
    client = _decode(bytes.fromhex(conn["client_to_server"]), "server", level)
    server = _decode(bytes.fromhex(conn["server_to_client"]), "client", level)
    connect = client[0]
    assert isinstance(connect, Connect)
    assert (connect.protocol_level, connect.username, connect.will is not None) == (
        level, "guest", True
    )
    subscribe = next(p for p in client if isinstance(p, Subscribe))
    assert [(s.topic_filter, s.qos) for s in subscribe.subscriptions] == [
        ("rec/+/t", 1), ("rec/#", 0)
    ]
    assert server[0] == ConnAck(0, False)
    assert next(p for p in server if isinstance(p, SubAck)).reason_codes == [1, 0]
    delivered = [(p.topic, p.payload, p.qos) for p in server if isinstance(p, Publish)]
    assert ("rec/1/t", b"m1", 1) in delivered  # QoS 1 through the QoS 1 subscription


def test_recordings_are_present() -> None:
    assert [p.name for p in RECORDINGS] == [
        "rabbitmq-paho-mqtt-3.1.1.json", "rabbitmq-paho-mqtt-3.1.json"
    ]
