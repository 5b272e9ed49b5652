"""MQTT in the Prometheus metrics: RabbitMQ's global counter families with the protocol
labels RabbitMQ 3.13 gives MQTT (mqtt310, mqtt311, mqtt50), over TCP and WebSocket."""

from __future__ import annotations

import uuid

import httpx

from roost.mqtt.packets import MQTT_3_1, MQTT_5, ConnAck, Connect, Publish
from tests.http.exposition import parse
from tests.mqtt.clients import Paho, Raw
from tests.support import RoostProcess, eventually


def _metrics(roost: RoostProcess) -> dict[str, float]:
    return parse(httpx.get(f"{roost.http_url}/metrics", timeout=10).text)


def _series(m: dict[str, float], family: str, protocol: str) -> float:
    return m.get(f'{family}{{protocol="{protocol}"}}', 0.0)


def test_mqtt_counters_by_protocol_version(roost: RoostProcess) -> None:
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    before = _metrics(roost)
    sub = Paho(roost.mqtt_port, f"sub-{topic}", version=MQTT_5)
    ws_sub = Paho(roost.mqtt_ws_port, f"ws-{topic}", transport="websockets")
    pub = Paho(roost.mqtt_port, f"pub-{topic}")  # MQTT 3.1.1
    old = Raw(roost.mqtt_port, MQTT_3_1)
    old.send(Connect(f"v31-{topic}"[:23], MQTT_3_1))
    assert isinstance(old.recv(), ConnAck)
    try:
        sub.subscribe(topic, 1)
        ws_sub.subscribe(topic, 0)
        old.send(Publish(topic, b"from 3.1", 0))
        for i in range(5):
            pub.publish(topic, str(i).encode(), qos=1)
        for _ in range(6):  # five from 3.1.1 and one from 3.1
            sub.get()
            ws_sub.get()

        def grown() -> dict[str, float] | None:
            m = _metrics(roost)

            def delta(family: str, protocol: str) -> float:
                return _series(m, family, protocol) - _series(before, family, protocol)

            ok = (
                delta("rabbitmq_global_messages_received_total", "mqtt311") >= 5
                and delta("rabbitmq_global_messages_received_confirm_total", "mqtt311") >= 5
                and delta("rabbitmq_global_messages_confirmed_total", "mqtt311") >= 5
                and delta("rabbitmq_global_messages_delivered_consume_manual_ack_total",
                          "mqtt50") >= 5
                # the WebSocket subscriber (3.1.1, QoS 0: no acks) counts as mqtt311
                and delta("rabbitmq_global_messages_delivered_consume_auto_ack_total",
                          "mqtt311") >= 5
                and _series(m, "rabbitmq_global_consumers", "mqtt50") >= 1
                and _series(m, "rabbitmq_global_publishers", "mqtt311") >= 1
                and delta("rabbitmq_global_messages_received_total", "mqtt310") >= 1
            )
            return m if ok else None

        m = eventually(grown, what=lambda: _metrics(roost))
        assert not any('protocol="mqtt"' in k for k in m)  # always by version
    finally:
        for c in (sub, ws_sub, pub):
            c.close()
        old.close()
