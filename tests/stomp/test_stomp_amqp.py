"""STOMP and AMQP share the core: properties cross both ways, queues are shared."""

from __future__ import annotations

import pika

from tests.stomp.conftest import Connect
from tests.support import RoostProcess


def test_stomp_send_is_consumed_by_pika_with_properties(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    conn, inbox = connect()
    conn.send(
        f"/queue/{qname}",
        "from stomp",
        content_type="application/json",
        headers={
            "content-encoding": "utf-8",
            "persistent": "true",
            "priority": "5",
            "expiration": "60000",
            "amqp-message-id": "m-1",
            "correlation-id": "c-1",
            "reply-to": "somewhere",
            "timestamp": "1700000000",
            "type": "greeting",
            "user-id": "guest",
            "app-id": "tests",
            "x-trace": "t-1",
        },
        receipt="sent",
    )
    assert inbox.receipt() == "sent"  # routed (and fsync'ed) before pika looks
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        ch = amqp.channel()
        method, props, body = ch.basic_get(qname, auto_ack=True)
    assert method is not None and body == b"from stomp"
    assert props.content_type == "application/json"
    assert props.content_encoding == "utf-8"
    assert props.delivery_mode == 2
    assert props.priority == 5
    assert props.expiration == "60000"
    assert props.message_id == "m-1"
    assert props.correlation_id == "c-1"
    assert props.reply_to == "somewhere"
    assert props.timestamp == 1700000000
    assert props.type == "greeting"
    assert props.user_id == "guest"
    assert props.app_id == "tests"
    assert props.headers["x-trace"] == "t-1"


def test_pika_publish_reaches_stomp_with_headers(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    conn, inbox = connect()
    conn.subscribe(f"/queue/{qname}", id="s", receipt="r")
    inbox.receipt()
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        ch = amqp.channel()
        ch.basic_publish(
            "",
            qname,
            b"from pika",
            pika.BasicProperties(
                content_type="text/plain",
                content_encoding="gzip",
                delivery_mode=2,
                priority=3,
                expiration="1000",
                message_id="m-2",
                correlation_id="c-2",
                reply_to="back",
                timestamp=1700000001,
                type="t",
                user_id="guest",
                app_id="pika",
                headers={"x-num": 7, "x-str": "s"},
            ),
        )
    msg = inbox.message()
    h = msg.headers
    assert msg.body == "from pika"
    assert h["destination"] == f"/queue/{qname}"
    assert h["content-type"] == "text/plain"
    assert h["content-encoding"] == "gzip"
    assert h["persistent"] == "true"
    assert h["priority"] == "3"
    assert h["expiration"] == "1000"
    assert h["amqp-message-id"] == "m-2"
    assert h["correlation-id"] == "c-2"
    assert h["reply-to"] == "/reply-queue/back"  # a destination to SEND to, as RabbitMQ
    assert h["timestamp"] == "1700000001"
    assert h["type"] == "t"
    assert h["user-id"] == "guest"
    assert h["app-id"] == "pika"
    assert h["x-num"] == "7" and h["x-str"] == "s"


def test_topic_published_by_pika_reaches_stomp_subscriber(
    roost: RoostProcess, connect: Connect
) -> None:
    conn, inbox = connect()
    conn.subscribe("/topic/cross.proto", id="t", receipt="r")
    inbox.receipt()
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        amqp.channel().basic_publish("amq.topic", "cross.proto", b"hi")
    msg = inbox.message()
    assert msg.body == "hi" and msg.headers["destination"] == "/topic/cross.proto"


def test_queue_shared_between_stomp_and_amqp_consumers(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    conn, inbox = connect()
    conn.subscribe(f"/queue/{qname}", id="s", ack="client-individual", receipt="r")
    inbox.receipt()
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        ch = amqp.channel()
        ch.queue_declare(qname, passive=True)  # the STOMP subscription declared it durable
        got: list[bytes] = []
        ch.basic_consume(qname, lambda c, m, p, b: (got.append(b), c.basic_ack(m.delivery_tag)))
        for i in range(10):
            conn.send(f"/queue/{qname}", f"m{i}")
        stomp_got = []
        while len(got) + len(stomp_got) < 10:
            amqp.process_data_events(time_limit=0.05)
            while not inbox.messages.empty():
                m = inbox.message()
                stomp_got.append(m.body.encode())
                conn.ack(m.headers["ack"])
    assert got and stomp_got  # both kinds of consumer took part
    assert sorted(got + stomp_got) == sorted(f"m{i}".encode() for i in range(10))


def test_send_declares_the_queue_again_after_amqp_deleted_it(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    """A connection remembers the queues its SENDs declared, but not past a delete."""
    conn, inbox = connect()
    conn.send(f"/queue/{qname}", "first", receipt="r1")
    inbox.receipt()
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        ch = amqp.channel()
        ch.queue_delete(qname)
        conn.send(f"/queue/{qname}", "second", receipt="r2")
        inbox.receipt()
        method, _props, body = ch.basic_get(qname, auto_ack=True)
    assert method is not None and body == b"second"
