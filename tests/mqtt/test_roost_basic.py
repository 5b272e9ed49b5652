"""MQTT 3.1.1 and 5.0 against a real Roost: CONNECT, QoS 0 and 1 end to end, wildcards,
the subscription queues RabbitMQ's plugin would make, and bad logins."""

from __future__ import annotations

import uuid

import pytest
import requests

from tests.mqtt.clients import MQTT_5, Paho
from tests.support import RoostProcess

LEVELS = [4, MQTT_5]


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("version", LEVELS)
def test_qos0_and_qos1_through_wildcards(roost: RoostProcess, version: int) -> None:
    base = _id("sensors")
    sub = Paho(roost.mqtt_port, _id("sub"), version=version)
    pub = Paho(roost.mqtt_port, _id("pub"), version=version)
    try:
        assert sub.subscribe(f"{base}/+/temp", 1)[0] == 1
        assert sub.subscribe(f"{base}/all/#", 0)[0] == 0
        pub.publish(f"{base}/kitchen/temp", b"21.5", qos=1)
        pub.publish(f"{base}/hall/temp", b"19", qos=0)
        pub.publish(f"{base}/all/a/b", b"deep", qos=1)
        pub.publish(f"{base}/kitchen/humidity", b"not matched", qos=1)
        got = sorted((m.topic, m.payload, m.qos) for m in (sub.get(), sub.get(), sub.get()))
        assert got == [
            (f"{base}/all/a/b", b"deep", 0),  # a QoS 0 subscription gets QoS 0
            (f"{base}/hall/temp", b"19", 0),
            (f"{base}/kitchen/temp", b"21.5", 1),
        ]
        assert sub.messages.empty()
    finally:
        sub.close()
        pub.close()


@pytest.mark.parametrize("version", LEVELS)
def test_a_star_in_a_topic_name_reaches_subscribers_as_it_was_sent(
    roost: RoostProcess, version: int
) -> None:
    """``*`` is an ordinary character in an MQTT topic name. It travels as amq.topic's
    ``*`` and must come back as ``*``: a ``+`` in a PUBLISH's topic name is a wildcard,
    which a server may not send (RabbitMQ 3.x's plugin sends it)."""
    base = _id("star")
    sub = Paho(roost.mqtt_port, _id("sub"), version=version)
    pub = Paho(roost.mqtt_port, _id("pub"), version=version)
    try:
        sub.subscribe(f"{base}/#", 1)
        pub.publish(f"{base}/*", b"star", qos=1)
        pub.publish(f"{base}/a*b/c", b"inside", qos=1)
        got = sorted((m.topic, m.payload) for m in (sub.get(), sub.get()))
        assert got == [(f"{base}/*", b"star"), (f"{base}/a*b/c", b"inside")]
    finally:
        sub.close()
        pub.close()


@pytest.mark.parametrize("version", LEVELS)
def test_qos2_subscription_is_granted_qos1(roost: RoostProcess, version: int) -> None:
    topic = _id("q2")
    sub = Paho(roost.mqtt_port, _id("sub"), version=version)
    try:
        granted = sub.subscribe(topic, 2)[0]
        assert granted == 1
        sub.publish(topic, b"exactly?", qos=2)  # PUBREC/PUBREL/PUBCOMP with the server
        msg = sub.get()
        assert (msg.payload, msg.qos) == (b"exactly?", 1)
    finally:
        sub.close()


def _queues(roost: RoostProcess) -> dict[str, dict[str, object]]:
    response = requests.get(f"{roost.http_url}/api/queues", auth=("guest", "guest"), timeout=5)
    return {q["name"]: q for q in response.json()}


def test_clean_session_queue_is_auto_delete_and_persistent_one_durable(
    roost: RoostProcess,
) -> None:
    clean_id, kept_id = _id("clean"), _id("kept")
    clean = Paho(roost.mqtt_port, clean_id)
    kept = Paho(roost.mqtt_port, kept_id, clean=False)
    try:
        clean.subscribe("q/names", 1)
        kept.subscribe("q/names", 1)
        kept.subscribe("q/names0", 0)
        queues = _queues(roost)
        q = queues[f"mqtt-subscription-{clean_id}qos1"]
        assert (q["durable"], q["auto_delete"]) == (False, True)
        q = queues[f"mqtt-subscription-{kept_id}qos1"]
        assert (q["durable"], q["auto_delete"]) == (True, False)
        assert f"mqtt-subscription-{kept_id}qos0" in queues
    finally:
        clean.close()
        kept.close()
    # the clean session's queue went with its connection; the persistent one stays
    queues = _queues(roost)
    assert f"mqtt-subscription-{clean_id}qos1" not in queues
    assert f"mqtt-subscription-{kept_id}qos1" in queues
    # a clean start with the same id ends the old session
    again = Paho(roost.mqtt_port, kept_id, clean=True)
    assert again.flags.session_present is False
    again.close()
    assert f"mqtt-subscription-{kept_id}qos1" not in _queues(roost)


@pytest.mark.parametrize("version", LEVELS)
def test_bad_password_is_refused(roost: RoostProcess, version: int) -> None:
    client = Paho(roost.mqtt_port, _id("bad"), version=version, password="wrong", connect=False)
    try:
        _flags, rc = client.connect()
        # 3.1.1 return code 4, MQTT 5 reason 0x86 (paho names both alike)
        assert str(rc) == "Bad user name or password"
    finally:
        client.client.loop_stop()
        client._close_wakeup()


def test_vhost_in_user_name(roost: RoostProcess) -> None:
    ok = Paho(roost.mqtt_port, _id("vh"), username="/:guest")
    assert ok.rc.value == 0
    ok.close()
    missing = Paho(roost.mqtt_port, _id("vh"), username="nosuchvhost:guest", connect=False)
    try:
        _flags, rc = missing.connect()
        assert str(rc) == "Not authorized"  # 3.1.1 return code 5
    finally:
        missing.client.loop_stop()
        missing._close_wakeup()


def test_connection_listed_with_its_protocol(roost: RoostProcess) -> None:
    cid = _id("listed")
    client = Paho(roost.mqtt_port, cid, version=MQTT_5)
    try:
        response = requests.get(
            f"{roost.http_url}/api/connections", auth=("guest", "guest"), timeout=5
        )
        protocols = {c["protocol"] for c in response.json()}
        assert "MQTT 5.0" in protocols
    finally:
        client.close()
