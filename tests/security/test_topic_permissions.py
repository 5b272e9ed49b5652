"""Topic permissions (RabbitMQ's topic authorisation): write patterns on the routing key
of a publish to a topic exchange, read patterns on the key of a binding from it. Other
exchange types and exchanges without a topic permission are not restricted. Texts as
observed on RabbitMQ 3.10.8, with the permission named as current RabbitMQ does."""

from __future__ import annotations

import os
import queue

import httpx
import pytest
from pika.exceptions import ChannelClosedByBroker

from tests.security.conftest import MakeUser, amqp_as, put, sync
from tests.stomp.conftest import Connect, connect  # noqa: F401 (fixture)
from tests.support import RoostProcess

REFUSED = (
    "ACCESS_REFUSED - {perm} access to topic '{key}' in exchange 'amq.topic' in vhost '/' "
    "refused for user '{user}'"
)


@pytest.fixture
def user(make_user: MakeUser, admin: httpx.Client) -> str:
    name = make_user()
    put(admin, f"/topic-permissions/%2F/{name}",
        {"exchange": "amq.topic", "write": "^a\\.", "read": "^b\\."})
    put(admin, f"/topic-permissions/%2F/{name}",
        {"exchange": "amq.direct", "write": "^a\\.", "read": "^b\\."})
    return name


def test_publish_with_an_allowed_key(roost: RoostProcess, user: str) -> None:
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.basic_publish("amq.topic", "a.x", b"ok")
        sync(ch)


def test_publish_with_a_refused_key(roost: RoostProcess, user: str) -> None:
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.basic_publish("amq.topic", "x.y", b"no")
            sync(ch)
        assert err.value.reply_code == 403
        assert err.value.reply_text == REFUSED.format(perm="write", key="x.y", user=user)


def test_non_topic_exchanges_are_not_restricted(roost: RoostProcess, user: str) -> None:
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.basic_publish("amq.direct", "x.y", b"direct")
        sync(ch)


@pytest.mark.parametrize("method", ["queue_bind", "queue_unbind"])
def test_binding_needs_read_on_the_key(roost: RoostProcess, user: str, method: str) -> None:
    q = f"tq-{os.urandom(4).hex()}"
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.queue_declare(q, exclusive=True)
        ch.queue_bind(q, "amq.topic", "b.allowed")
        with pytest.raises(ChannelClosedByBroker) as err:
            getattr(ch, method)(q, "amq.topic", "x.refused")
        assert err.value.reply_text == REFUSED.format(perm="read", key="x.refused", user=user)


def test_exchange_binding_needs_read_on_the_key(roost: RoostProcess, user: str) -> None:
    dest = f"tx-{os.urandom(4).hex()}"
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.exchange_declare(dest, "topic", auto_delete=True)
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.exchange_bind(dest, "amq.topic", "x")
        assert err.value.reply_text == REFUSED.format(perm="read", key="x", user=user)


def test_username_variable_in_pattern(
    roost: RoostProcess, make_user: MakeUser, admin: httpx.Client
) -> None:
    name = make_user()
    put(admin, f"/topic-permissions/%2F/{name}",
        {"exchange": "amq.topic", "write": "^{username}\\.", "read": ".*"})
    with amqp_as(roost, name) as conn:
        ch = conn.channel()
        ch.basic_publish("amq.topic", f"{name}.news", b"mine")
        sync(ch)
        with pytest.raises(ChannelClosedByBroker):
            ch.basic_publish("amq.topic", "someone-else.news", b"theirs")
            sync(ch)


def test_stomp_send_to_a_topic_checks_the_key(
    connect: Connect, user: str  # noqa: F811
) -> None:
    conn, inbox = connect(username=user, passcode="pw")
    conn.send("/topic/a.ok", "fine", receipt="r1")
    assert inbox.receipt() == "r1"
    conn.send("/topic/x", "refused")
    err = inbox.errors.get(timeout=5)
    assert err.headers["message"] == "access_refused"
    assert err.body == REFUSED.format(perm="write", key="x", user=user)


def test_stomp_subscribe_to_a_topic_checks_the_key(
    connect: Connect, user: str  # noqa: F811
) -> None:
    """SUBSCRIBE /topic/K binds a private queue to amq.topic with key K: read on K."""
    conn, inbox = connect(username=user, passcode="pw")
    conn.subscribe("/topic/b.ok", id="1", receipt="r1")
    assert inbox.receipt() == "r1"
    conn.subscribe("/topic/x.nope", id="2")
    err = inbox.errors.get(timeout=5)
    assert err.headers["message"] == "access_refused"
    assert err.body == REFUSED.format(perm="read", key="x.nope", user=user)


def test_deleting_the_topic_permission_lifts_it(
    roost: RoostProcess, user: str, admin: httpx.Client
) -> None:
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        assert admin.delete(f"/topic-permissions/%2F/{user}").status_code == 204
        ch.basic_publish("amq.topic", "x.y", b"now allowed")
        sync(ch)


@pytest.mark.parametrize("version", [4, 5])
def test_mqtt_topic_permissions(roost: RoostProcess, user: str, version: int) -> None:
    """MQTT topics are checked as their routing keys (a/x is a.x): a SUBSCRIBE outside the
    read pattern fails for that filter; a PUBLISH outside the write pattern gets PUBACK
    0x87 in MQTT 5 and closes a 3.1.1 connection (it has no other way to say it), and it
    is not retained either."""
    from roost.mqtt.packets import Connect as MQTTConnect
    from roost.mqtt.packets import PubAck, Publish, SubAck, Subscribe, Subscription
    from tests.mqtt.clients import Raw

    raw = Raw(roost.mqtt_port, version)
    raw.send(MQTTConnect(f"tp-{version}-{user}"[:60], version, username=user,
                         password=b"pw"))
    raw.recv()
    raw.send(Subscribe(1, [Subscription("b/+", 1), Subscription("a/+", 1)]))
    suback = raw.recv()
    assert isinstance(suback, SubAck)
    assert suback.reason_codes == [1, 0x87 if version == 5 else 0x80]
    nobody = 0x10 if version == 5 else 0  # MQTT 5: "no matching subscribers" (a/+ failed)
    raw.send(Publish("a/x", b"allowed", 1, packet_id=1))
    assert raw.recv() == PubAck(1, nobody)
    raw.send(Publish("b/x", b"refused", 1, retain=True, packet_id=2))
    if version == 5:
        assert raw.recv() == PubAck(2, 0x87)
        raw.send(Publish("a/y", b"still connected", 1, packet_id=3))
        assert raw.recv() == PubAck(3, nobody)
    else:
        assert raw.recv() is None  # closed
    raw.close()
    from tests.mqtt.clients import Paho

    guest = Paho(roost.mqtt_port, f"tp-check-{version}")
    try:
        guest.subscribe("b/x", 1)
        with pytest.raises(queue.Empty):  # the refused message was not retained
            guest.get(timeout=0.5)
    finally:
        guest.close()
