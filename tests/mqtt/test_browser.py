"""MQTT.js (the npm ``mqtt`` package) in headless Chromium over Roost's Web-MQTT listener
(ws://HOST:PORT/ws, subprotocol mqtt), sharing topics with paho and pika."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pika
import pytest

from tests.mqtt.clients import Paho
from tests.support import MQTTJS, RoostProcess, browser_page, prerequisite

CONNECT_JS = """([url, version]) => new Promise((resolve, reject) => {
    window.received = [];
    const client = mqtt.connect(url, {protocolVersion: version, username: 'guest',
                                      password: 'guest', reconnectPeriod: 0});
    window.client = client;
    client.on('message', (topic, payload, packet) =>
        window.received.push([topic, new TextDecoder().decode(payload), packet.qos]));
    client.on('connect', () => resolve(client.options.protocolVersion));
    client.on('error', (e) => reject(String(e)));
})"""

SUBSCRIBE_JS = """([topic, qos]) => new Promise((resolve, reject) =>
    window.client.subscribe(topic, {qos}, (err, granted) =>
        err ? reject(String(err)) : resolve(granted.map((g) => g.qos))))"""

PUBLISH_JS = """([topic, text, qos]) => new Promise((resolve, reject) =>
    window.client.publish(topic, text, {qos}, (err) => err ? reject(String(err)) : resolve(1)))"""


class _Blank(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name for it
        body = b"<html><body></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def page() -> Iterator[Any]:
    """A blank page served from loopback (Chromium lets a loopback page open a WebSocket
    to loopback, not an about:blank one), with MQTT.js loaded into it."""
    if not MQTTJS.exists():
        prerequisite("MQTT.js was not fetched from npm")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Blank)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with browser_page() as pg:
            pg.goto(f"http://127.0.0.1:{server.server_address[1]}/")
            pg.add_script_tag(path=str(MQTTJS))
            yield pg
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("version", [4, 5])
def test_mqttjs_in_chromium_with_paho_and_pika(
    roost: RoostProcess, page: Any, version: int
) -> None:
    base = f"browser-{uuid.uuid4().hex[:8]}"
    url = f"ws://127.0.0.1:{roost.mqtt_ws_port}/ws"
    assert page.evaluate(CONNECT_JS, [url, version]) == version
    assert page.evaluate(SUBSCRIBE_JS, [f"{base}/in/#", 2]) == [1]  # QoS 2 granted as 1
    paho = Paho(roost.mqtt_port, f"paho-{base}")
    try:
        paho.subscribe(f"{base}/out", 1)
        paho.publish(f"{base}/in/paho", b"from paho", qos=1)
        with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
            conn.channel().basic_publish("amq.topic", f"{base}.in.pika", b"from pika")
        page.wait_for_function("window.received.length >= 2")
        assert sorted(map(tuple, page.evaluate("window.received"))) == [
            (f"{base}/in/paho", "from paho", 1),
            (f"{base}/in/pika", "from pika", 0),
        ]
        page.evaluate(PUBLISH_JS, [f"{base}/out", "from the browser", 1])
        msg = paho.get()
        assert (msg.topic, msg.payload) == (f"{base}/out", b"from the browser")
    finally:
        paho.close()
        page.evaluate("window.client.end(true)")


MEMBERS_JS = """([url, filter]) => Promise.all([0, 1].map((i) => new Promise((resolve, reject) => {
    window.got = window.got || [[], []];
    // topicAliasMaximum: Roost may name repeated topics by alias; MQTT.js resolves them
    const c = mqtt.connect(url, {protocolVersion: 5, username: 'guest', password: 'guest',
                                 reconnectPeriod: 0, properties: {topicAliasMaximum: 4}});
    window['member' + i] = c;
    c.on('message', (topic, payload, packet) => window.got[i].push(
        [topic, new TextDecoder().decode(payload),
         (packet.properties || {}).topicAlias || 0]));
    c.on('error', (e) => reject(String(e)));
    c.on('connect', () => c.subscribe(filter, {qos: 1}, (err, granted) =>
        err ? reject(String(err)) : resolve(granted[0].qos)));
})))"""


def test_mqttjs_shared_subscription_members_and_server_topic_aliases(
    roost: RoostProcess, page: Any
) -> None:
    topic = f"browser-share-{uuid.uuid4().hex[:8]}/t"
    url = f"ws://127.0.0.1:{roost.mqtt_ws_port}/ws"
    assert page.evaluate(MEMBERS_JS, [url, f"$share/web/{topic}"]) == [1, 1]
    paho = Paho(roost.mqtt_port, f"paho-{uuid.uuid4().hex[:8]}")
    try:
        sent = [f"m{i}" for i in range(30)]
        for body in sent:
            paho.publish(topic, body.encode(), qos=1)
        page.wait_for_function(f"window.got[0].length + window.got[1].length >= {len(sent)}")
        got = page.evaluate("window.got")
        # each message to one member of the group, both members used
        assert sorted(m[1] for m in got[0] + got[1]) == sorted(sent)
        assert got[0] and got[1]
        for member in got:
            # every message reached MQTT.js with its topic, though after the first the
            # server sent only the alias
            assert {m[0] for m in member} == {topic}
            assert all(m[2] == 1 for m in member)
    finally:
        paho.close()
        page.evaluate("window.member0.end(true); window.member1.end(true)")
