"""Client-id takeover, the will, keepalive, malformed packets, retained messages and
persistent sessions, against a real Roost (restarted where the test says so)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import requests

from roost.mqtt.packets import (
    MQTT_5,
    ConnAck,
    Connect,
    Disconnect,
    PingReq,
    PingResp,
    Publish,
    SubAck,
    Subscribe,
    Subscription,
)
from roost.mqtt.reason_codes import MALFORMED_PACKET, SESSION_TAKEN_OVER
from tests.mqtt.clients import Paho, Raw
from tests.support import RoostProcess, restart


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("level", [4, MQTT_5])
def test_second_connection_with_the_same_id_takes_over(roost: RoostProcess, level: int) -> None:
    cid = _id("twin")
    first = Raw(roost.mqtt_port, level)
    first.send(Connect(cid, level))
    assert isinstance(first.recv(), ConnAck)
    second = Paho(roost.mqtt_port, cid, version=level)
    try:
        assert second.rc.value == 0
        last = first.recv()
        if level == MQTT_5:  # MQTT 5 says why: 0x8E Session taken over
            assert last == Disconnect(SESSION_TAKEN_OVER, last.properties)  # type: ignore[union-attr]
            last = first.recv()
        assert last is None  # closed
        second.subscribe("takeover/still/works", 0)
        second.publish("takeover/still/works", b"yes", qos=1)
        assert second.get().payload == b"yes"
    finally:
        first.close()
        second.close()


def test_will_published_when_the_client_vanishes_not_after_disconnect(
    roost: RoostProcess,
) -> None:
    topic = _id("will")
    watcher = Paho(roost.mqtt_port, _id("watch"))
    try:
        watcher.subscribe(f"{topic}/#", 1)
        polite = Paho(roost.mqtt_port, _id("polite"), will=(f"{topic}/polite", b"gone", 1, False))
        polite.close()  # DISCONNECT withdraws the will
        crashed = Paho(roost.mqtt_port, _id("crash"), will=(f"{topic}/crash", b"lost", 1, False))
        crashed.drop()
        msg = watcher.get()
        assert (msg.topic, msg.payload, msg.qos) == (f"{topic}/crash", b"lost", 1)
        time.sleep(0.3)
        assert watcher.messages.empty()
    finally:
        watcher.close()


def test_keepalive_enforced_at_one_and_a_half_times(roost: RoostProcess) -> None:
    raw = Raw(roost.mqtt_port)
    raw.send(Connect(_id("idle"), keep_alive=1))
    assert isinstance(raw.recv(), ConnAck)
    raw.send(PingReq())
    assert isinstance(raw.recv(), PingResp)
    start = time.monotonic()
    assert raw.recv() is None  # silent: closed 1.5 s after the last packet
    assert 1.4 < time.monotonic() - start < 3.5
    raw.close()


@pytest.mark.parametrize("level", [4, MQTT_5])
def test_malformed_packet_closes_only_that_connection(roost: RoostProcess, level: int) -> None:
    topic = _id("bystander")
    bystander = Paho(roost.mqtt_port, _id("ok"))
    bad = Raw(roost.mqtt_port, level)
    try:
        bystander.subscribe(topic, 1)
        bad.send(Connect(_id("bad"), level))
        assert isinstance(bad.recv(), ConnAck)
        # a SUBSCRIBE with flags 0 (they must be 0b0010): malformed
        bad.send_raw(bytes([0x80, 0x06, 0x00, 0x01, 0x00, 0x01, 0x61, 0x00]))
        last = bad.recv()
        if level == MQTT_5:
            assert isinstance(last, Disconnect) and last.reason_code == MALFORMED_PACKET
            last = bad.recv()
        assert last is None
        bystander.publish(topic, b"unaffected", qos=1)
        assert bystander.get().payload == b"unaffected"
    finally:
        bad.close()
        bystander.close()


def test_retained_message_delivered_on_subscribe_and_cleared(roost: RoostProcess) -> None:
    topic = _id("retained")
    pub = Paho(roost.mqtt_port, _id("pub"))
    try:
        pub.publish(f"{topic}/a", b"kept", qos=1, retain=True)
        pub.publish(f"{topic}/b", b"also", qos=0, retain=True)
        late = Paho(roost.mqtt_port, _id("late"))
        late.subscribe(f"{topic}/+", 1)
        got = sorted((m.topic, m.payload, m.retain, m.qos) for m in (late.get(), late.get()))
        assert got == [(f"{topic}/a", b"kept", 1, 1), (f"{topic}/b", b"also", 1, 0)]
        late.close()
        pub.publish(f"{topic}/a", b"", qos=1, retain=True)  # an empty payload clears it
        later = Paho(roost.mqtt_port, _id("later"))
        later.subscribe(f"{topic}/+", 1)
        msg = later.get()
        assert (msg.topic, msg.payload) == (f"{topic}/b", b"also")
        time.sleep(0.2)
        assert later.messages.empty()
        later.close()
    finally:
        pub.close()


def test_retained_messages_and_persistent_session_survive_a_restart(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data").start()
    try:
        cid = _id("durable")
        sub = Paho(server.mqtt_port, cid, clean=False)
        assert sub.subscribe("plant/+/level", 1)[0] == 1
        sub.close()
        pub = Paho(server.mqtt_port, _id("pub"))
        pub.publish("plant/tank/level", b"while away", qos=1)
        pub.publish("plant/config", b"retained", qos=1, retain=True)
        pub.close()
        server = restart(server)
        back = Paho(server.mqtt_port, cid, clean=False)
        assert back.flags.session_present
        msg = back.get()
        assert (msg.topic, msg.payload, msg.qos) == ("plant/tank/level", b"while away", 1)
        back.close()
        fresh = Paho(server.mqtt_port, _id("fresh"))
        fresh.subscribe("plant/config", 1)
        msg = fresh.get()
        assert (msg.payload, msg.retain) == (b"retained", True)
        fresh.close()
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log


def test_subscribe_answered_in_order_with_later_packets(roost: RoostProcess) -> None:
    """A SUBACK of a durable queue waits for the disk; the PINGRESP after it waits too."""
    raw = Raw(roost.mqtt_port)
    raw.send(Connect(_id("order"), clean_start=False))
    assert isinstance(raw.recv(), ConnAck)
    raw.send(Subscribe(1, [Subscription("order/x", 1)]), PingReq(),
             Publish("order/x", b"p", 1, packet_id=7))
    assert isinstance(raw.recv(), SubAck)
    assert isinstance(raw.recv(), PingResp)
    raw.close()


def test_a_user_without_rights_on_the_retained_queue_still_subscribes_and_publishes(
    fresh_roost: RoostProcess,
) -> None:
    """Retained messages live in the vhost's 'mqtt-retained-messages' queue: a user whose
    permissions do not cover it keeps working, only without retained messages."""
    api = f"{fresh_roost.http_url}/api"
    auth = ("guest", "guest")
    assert requests.put(f"{api}/users/sensor", json={"password": "pw", "tags": ""},
                        auth=auth, timeout=5).status_code in (201, 204)
    assert requests.put(f"{api}/permissions/%2F/sensor",
                        json={"configure": "^mqtt-subscription-", "write": ".*",
                              "read": ".*"},
                        auth=auth, timeout=5).status_code in (201, 204)
    client = Paho(fresh_roost.mqtt_port, _id("limited"), username="sensor", password="pw")
    try:
        assert client.subscribe("limited/#", 1)[0] == 1
        client.publish("limited/x", b"kept anyway?", qos=1, retain=True)
        msg = client.get()
        assert (msg.topic, msg.payload) == ("limited/x", b"kept anyway?")
    finally:
        client.close()
    fresh_roost.wait_for_log("not retained")
