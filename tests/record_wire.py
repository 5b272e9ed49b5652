#!/usr/bin/env python3
"""Record real clients talking to RabbitMQ, byte for byte, as golden data for the MQTT and
stream-protocol codec tests.

    .venv/bin/python -m tests.record_wire     # from the repository root; rewrites
                                              # tests/*/data/rabbitmq-*.json

It starts a throwaway RabbitMQ node (``bench/_brokers.py``) with the rabbitmq_mqtt and
rabbitmq_stream plugins on free loopback ports, puts a recording TCP proxy in front of
each listener, and runs paho-mqtt (MQTT 3.1 and 3.1.1; RabbitMQ 3.10 has no MQTT 5) and
rstream sessions through it. Each connection's two directions are saved as hex with the
broker's and the client's versions. The tests decode every recorded byte with the codec
and re-encode it, so the files are the record of what RabbitMQ and the clients send.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._brokers import free_port, rabbitmq  # noqa: E402


class RecordingProxy:
    """Forwards each accepted connection to ``target`` and keeps both directions."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", listen_port))
        self.target = target_port
        self.connections: list[dict[str, bytearray]] = []
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            record = {"client_to_server": bytearray(), "server_to_client": bytearray()}
            self.connections.append(record)
            for src, dst, key in ((client, server, "client_to_server"),
                                  (server, client, "server_to_client")):
                t = threading.Thread(target=self._pump, args=(src, dst, record[key]), daemon=True)
                t.start()
                self._threads.append(t)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, into: bytearray) -> None:
        try:
            while data := src.recv(65536):
                into += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> list[dict[str, str]]:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        for t in self._threads:
            t.join(10)
        return [{k: v.hex() for k, v in c.items()} for c in self.connections]


def _mqtt_session(port: int, level: int) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    protocol = {3: mqtt.MQTTv31, 4: mqtt.MQTTv311}[level]
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"rec-{level}", protocol=protocol)
    client.username_pw_set("guest", "guest")
    client.will_set("rec/will", b"gone", qos=1, retain=False)
    done = threading.Event()
    got: list[Any] = []
    subscribed = threading.Event()
    client.on_subscribe = lambda *a: subscribed.set()

    def on_message(_c: Any, _u: Any, msg: Any) -> None:
        got.append(msg)
        if len(got) == 4:
            done.set()

    client.on_message = on_message
    client.connect("127.0.0.1", port, keepalive=60)
    client.loop_start()
    client.subscribe([("rec/+/t", 1), ("rec/#", 0)])
    assert subscribed.wait(10)
    for qos in (0, 1):
        client.publish(f"rec/{qos}/t", f"m{qos}".encode(), qos=qos).wait_for_publish(10)
    assert done.wait(10), f"got {len(got)} messages"
    unsubscribed = threading.Event()
    client.on_unsubscribe = lambda *a: unsubscribed.set()
    client.unsubscribe("rec/#")
    assert unsubscribed.wait(10)
    client.disconnect()
    client.loop_stop()


async def _stream_session(port: int) -> None:
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType, Producer

    async with Producer("127.0.0.1", port, username="guest", password="guest",
                        default_batch_publishing_delay=0.05) as producer:
        await producer.create_stream("rec", arguments={"max-length-bytes": 10_000_000})
        for i in range(3):
            await producer.send_wait("rec", f"m{i}".encode())
        confirmed = asyncio.Event()
        await producer.send_sub_entry("rec", [b"s1", b"s2"],
                                      on_publish_confirm=lambda _s: confirmed.set())
        await asyncio.wait_for(confirmed.wait(), 10)
    got: list[bytes] = []
    consumer = Consumer("127.0.0.1", port, username="guest", password="guest")
    await consumer.start()
    await consumer.subscribe("rec", lambda m, _ctx: got.append(m),
                             offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST))
    for _ in range(500):
        if len(got) == 5:
            break
        await asyncio.sleep(0.01)
    assert len(got) == 5, got
    await consumer.store_offset("rec", "rec-app", 4)
    await asyncio.sleep(0.2)
    assert await consumer.query_offset("rec", "rec-app") == 4
    await consumer.close()
    async with Producer("127.0.0.1", port, username="guest", password="guest") as producer:
        await producer.delete_stream("rec")


def _rabbitmq_version() -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"],
                         capture_output=True, text=True, check=False)
    return out.stdout.split("-")[0] or "unknown"


def main() -> None:
    mqtt_port, stream_port, stream_proxy_port = free_port(), free_port(), free_port()
    conf = (f"mqtt.listeners.tcp.default = 127.0.0.1:{mqtt_port}\n"
            f"stream.listeners.tcp.default = 127.0.0.1:{stream_port}\n"
            # clients connect to the proxy, also when they follow the metadata
            "stream.advertised_host = 127.0.0.1\n"
            f"stream.advertised_port = {stream_proxy_port}\n")
    with rabbitmq(plugins=("rabbitmq_mqtt", "rabbitmq_stream"), extra_conf=conf):
        broker = f"RabbitMQ {_rabbitmq_version()}"
        for level in (3, 4):
            proxy_port = free_port()
            proxy = RecordingProxy(proxy_port, mqtt_port)
            _mqtt_session(proxy_port, level)
            time.sleep(0.3)
            recording = {
                "recorded_with": f"tests/record_wire.py: paho-mqtt {version('paho-mqtt')} "
                                 f"against {broker} (rabbitmq_mqtt)",
                "protocol_level": level,
                "connections": proxy.close(),
            }
            name = {3: "3.1", 4: "3.1.1"}[level]
            out = REPO / "tests/mqtt/data" / f"rabbitmq-paho-mqtt-{name}.json"
            out.parent.mkdir(exist_ok=True)
            out.write_text(json.dumps(recording, indent=1) + "\n")
            print(f"wrote {out.relative_to(REPO)}")
        proxy = RecordingProxy(stream_proxy_port, stream_port)
        asyncio.run(_stream_session(stream_proxy_port))
        time.sleep(0.3)
        recording = {
            "recorded_with": f"tests/record_wire.py: rstream {version('rstream')} "
                             f"against {broker} (rabbitmq_stream)",
            "connections": proxy.close(),
        }
        out = REPO / "tests/stream_protocol/data/rabbitmq-rstream.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(recording, indent=1) + "\n")
        print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
