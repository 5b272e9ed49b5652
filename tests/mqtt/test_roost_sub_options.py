"""MQTT 5 subscription options (no local, retain as published, retain handling) and
shared subscriptions against a real Roost, with paho-mqtt."""

from __future__ import annotations

import queue
import uuid
from typing import Any

import httpx
import pytest
from paho.mqtt.subscribeoptions import SubscribeOptions

from roost.mqtt.packets import (
    MQTT_5,
    ConnAck,
    Connect,
    Properties,
    PubAck,
    Publish,
    SubAck,
    Subscribe,
    Subscription,
)
from tests.mqtt.clients import TIMEOUT, Paho, Raw
from tests.support import RoostProcess


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _v5(roost: RoostProcess, prefix: str) -> Paho:
    return Paho(roost.mqtt_port, _id(prefix), version=MQTT_5)


def _subscribe(client: Paho, topic: str, **options: Any) -> list[Any]:
    client.client.subscribe(topic, options=SubscribeOptions(**options))
    return list(client.suback.get(timeout=TIMEOUT))


def _next(client: Paho) -> tuple[str, bytes, bool]:
    msg = client.get()
    return msg.topic, msg.payload, bool(msg.retain)


def test_no_local_skips_only_the_subscribers_own_messages(roost: RoostProcess) -> None:
    topic = _id("nolocal")
    me, other = _v5(roost, "me"), _v5(roost, "other")
    try:
        assert [rc.value for rc in _subscribe(me, f"{topic}/#", qos=1, noLocal=True)] == [1]
        other.subscribe(f"{topic}/#", 1)
        me.publish(f"{topic}/mine", b"from me", qos=1)
        other.publish(f"{topic}/theirs", b"from other", qos=1)
        # the other client gets both; I get only the other's (mine was skipped, not late)
        assert sorted(_next(other)[1] for _ in range(2)) == [b"from me", b"from other"]
        assert _next(me) == (f"{topic}/theirs", b"from other", False)
        me.publish(f"{topic}/mine", b"again", qos=0)
        other.publish(f"{topic}/theirs", b"marker", qos=1)
        assert _next(me)[1] == b"marker"
    finally:
        me.close()
        other.close()


def test_retain_as_published_keeps_the_retain_flag(roost: RoostProcess) -> None:
    topic = _id("rap")
    keep, plain, pub = _v5(roost, "keep"), _v5(roost, "plain"), _v5(roost, "pub")
    try:
        _subscribe(keep, topic, qos=1, retainAsPublished=True)
        _subscribe(plain, topic, qos=1)
        pub.publish(topic, b"retained", qos=1, retain=True)
        pub.publish(topic, b"not retained", qos=1)
        assert [_next(keep) for _ in range(2)] == [
            (topic, b"retained", True), (topic, b"not retained", False)]
        assert [_next(plain) for _ in range(2)] == [
            (topic, b"retained", False), (topic, b"not retained", False)]
        pub.publish(topic, b"", qos=1, retain=True)  # clear it
    finally:
        for c in (keep, plain, pub):
            c.close()


def test_retain_handling_0_1_2(roost: RoostProcess) -> None:
    topic = _id("rh")
    pub = _v5(roost, "pub")
    pub.publish(topic, b"kept", qos=1, retain=True)
    sub = _v5(roost, "sub")
    try:
        def retained_after(handling: int) -> bytes:
            _subscribe(sub, topic, qos=1, retainHandling=handling)
            pub.publish(topic, b"marker", qos=1)
            first = _next(sub)
            if first[1] == b"kept":
                assert first[2] is True  # a retained message on subscribe says so
                assert _next(sub)[1] == b"marker"
            return first[1]

        assert retained_after(2) == b"marker"  # never
        assert retained_after(1) == b"marker"  # the subscription exists (made just now)
        sub.client.unsubscribe(topic)
        assert retained_after(1) == b"kept"  # new again after UNSUBSCRIBE
        assert retained_after(1) == b"marker"  # exists
        assert retained_after(0) == b"kept"  # always
        other = _v5(roost, "other")
        try:
            _subscribe(other, topic, qos=1, retainHandling=1)  # new for this connection
            assert _next(other) == (topic, b"kept", True)
        finally:
            other.close()
        pub.publish(topic, b"", qos=1, retain=True)
    finally:
        sub.close()
        pub.close()


def _drain(client: Paho, timeout: float = 0.5, qos: int | None = None) -> list[bytes]:
    """The payloads that arrive until none comes for ``timeout``; each at ``qos`` if given."""
    got = []
    while True:
        try:
            msg = client.get(timeout=timeout)
        except queue.Empty:
            return got
        assert qos is None or msg.qos == qos, (msg.payload, msg.qos)
        got.append(msg.payload)


def test_shared_subscription_spreads_messages_across_the_group(roost: RoostProcess) -> None:
    topic = _id("shared")
    group = _id("g")
    a, b, c = _v5(roost, "a"), _v5(roost, "b"), _v5(roost, "c")
    plain = _v5(roost, "plain")
    other_group = Paho(roost.mqtt_port, _id("v3"))  # MQTT 3.1.1 may join a group too
    pub = _v5(roost, "pub")
    try:
        for member in (a, b):
            assert [rc.value for rc in _subscribe(member, f"$share/{group}/{topic}/+", qos=1)] \
                == [1]
        plain.subscribe(f"{topic}/+", 1)
        assert other_group.subscribe(f"$share/{_id('h')}/{topic}/#", 0) == [0]
        sent = [f"m{i}".encode() for i in range(40)]
        for body in sent:
            pub.publish(f"{topic}/x", body, qos=1)
        got_a, got_b = _drain(a, qos=1), _drain(b, qos=1)  # QoS 1 members: acked
        # each message to one member of the group, both members used
        assert sorted(got_a + got_b) == sorted(sent)
        assert got_a and got_b
        # every other subscription gets its own copy
        assert sorted(_drain(plain)) == sorted(sent)
        assert sorted(_drain(other_group)) == sorted(sent)
        # a member that leaves gets no more; the rest of the group gets all
        a.client.unsubscribe(f"$share/{group}/{topic}/+")
        _subscribe(c, f"{topic}/none", qos=0)  # a round trip: the UNSUBSCRIBE was handled
        for body in sent[:10]:
            pub.publish(f"{topic}/y", body, qos=1)
        assert sorted(_drain(b)) == sorted(sent[:10])
        assert _drain(a, 0.2) == []
    finally:
        for cl in (a, b, c, plain, other_group, pub):
            cl.close()


def test_a_shared_groups_unacknowledged_messages_go_to_another_member(
    roost: RoostProcess,
) -> None:
    topic = _id("sharedfail")
    shared = f"$share/{_id('g')}/{topic}"
    quitter = Raw(roost.mqtt_port, MQTT_5)
    quitter.send(Connect(_id("quit"), MQTT_5))
    assert isinstance(quitter.recv(), ConnAck)
    quitter.send(Subscribe(1, [Subscription(shared, 1)]))
    assert isinstance(quitter.recv(), SubAck)
    stayer, pub = _v5(roost, "stay"), _v5(roost, "pub")
    try:
        _subscribe(stayer, shared, qos=1)
        sent = [f"m{i}".encode() for i in range(20)]
        for body in sent:
            pub.publish(topic, body, qos=1)
        held = quitter.recv()  # it gets some and never acknowledges them
        assert isinstance(held, Publish)
        quitter.close()
        got = _drain(stayer)
        assert held.payload in got
        assert sorted(set(got)) == sorted(sent)
    finally:
        stayer.close()
        pub.close()


def test_receive_maximum_bounds_plain_and_shared_subscriptions_together(
    roost: RoostProcess,
) -> None:
    topic = _id("rmshared")
    raw = Raw(roost.mqtt_port, MQTT_5)
    raw.send(Connect(_id("rm"), MQTT_5, properties=Properties(receive_maximum=3)))
    assert isinstance(raw.recv(), ConnAck)
    raw.send(Subscribe(1, [Subscription(f"{topic}/plain", 1),
                           Subscription(f"$share/{_id('g')}/{topic}/shared", 1)]))
    assert isinstance(raw.recv(), SubAck)
    pub = _v5(roost, "pub")
    try:
        for i in range(3):
            pub.publish(f"{topic}/plain", f"p{i}".encode(), qos=1)
            pub.publish(f"{topic}/shared", f"s{i}".encode(), qos=1)
        first = [raw.recv() for _ in range(3)]
        raw.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            raw.recv()  # a fourth QoS 1 delivery before any PUBACK breaks the client's limit
        raw.sock.settimeout(10)
        raw.send(PubAck(first[0].packet_id))  # type: ignore[union-attr]
        assert isinstance(raw.recv(), Publish)
    finally:
        raw.close()
        pub.close()


def test_a_persistent_session_resumes_its_options_and_shared_groups(
    roost: RoostProcess,
) -> None:
    topic = _id("resume")
    shared = f"$share/{_id('g')}/{topic}/jobs"
    cid = _id("persist")

    def connect() -> Raw:
        raw = Raw(roost.mqtt_port, MQTT_5)
        raw.send(Connect(cid, MQTT_5, clean_start=False,
                         properties=Properties(session_expiry_interval=60)))
        assert isinstance(raw.recv(), ConnAck)
        return raw

    raw = connect()
    raw.send(Subscribe(1, [Subscription(f"{topic}/news", 1, no_local=True)],
                       Properties(subscription_identifiers=[42])),
             Subscribe(2, [Subscription(shared, 1)]))
    assert [type(raw.recv()), type(raw.recv())] == [SubAck, SubAck]
    raw.close()
    raw = connect()  # subscribes to nothing: the session has it all
    pub = _v5(roost, "pub")
    try:
        raw.send(Publish(f"{topic}/news", b"mine", 1, packet_id=1))  # no local: not back
        assert isinstance(raw.recv(), PubAck)
        pub.publish(f"{topic}/news", b"news", qos=1)
        pub.publish(f"{topic}/jobs", b"job", qos=1)
        got = sorted(((p.topic, p.payload, p.properties.subscription_identifiers)  # type: ignore[union-attr]
                      for p in (raw.recv(), raw.recv())), key=str)
        assert got == [(f"{topic}/jobs", b"job", []), (f"{topic}/news", b"news", [42])]
    finally:
        raw.close()
        pub.close()


def test_a_shared_subscription_needs_rights_on_its_group_queue(roost: RoostProcess) -> None:
    user = _id("limited")
    auth = ("guest", "guest")
    base = f"{roost.http_url}/api"
    assert httpx.put(f"{base}/users/{user}", json={"password": "pw", "tags": ""},
                     auth=auth).status_code in (201, 204)
    perms = {"configure": "^mqtt-subscription-", "write": "^(mqtt-subscription-|amq\\.topic)",
             "read": "^(mqtt-subscription-|amq\\.topic)"}
    assert httpx.put(f"{base}/permissions/%2F/{user}", json=perms,
                     auth=auth).status_code in (201, 204)
    try:
        client = Paho(roost.mqtt_port, _id("lim"), version=MQTT_5, username=user, password="pw")
        try:
            codes = _subscribe(client, f"$share/{_id('g')}/{_id('t')}", qos=1)
            assert [rc.value for rc in codes] == [0x87]  # not authorized, that filter only
            assert client.subscribe(_id("plain"), 1)[0].value == 1
        finally:
            client.close()
    finally:
        httpx.delete(f"{base}/users/{user}", auth=auth)
