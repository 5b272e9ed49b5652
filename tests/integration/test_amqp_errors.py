"""Soft errors close the channel, hard errors the connection, with RabbitMQ's codes."""

from __future__ import annotations

import amqp
import pika
import pytest
from pika.exceptions import (
    ChannelClosedByBroker,
    ConnectionClosedByBroker,
    ProbableAuthenticationError,
)

from tests.integration.conftest import pika_params
from tests.support import RoostProcess


def closed_with(code: int, fn, *args, **kw) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ChannelClosedByBroker) as info:
        fn(*args, **kw)
    assert info.value.reply_code == code, info.value.reply_text
    return str(info.value.reply_text)


def test_passive_declare_of_missing_queue_is_404(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    text = closed_with(404, ch.queue_declare, qname, passive=True)
    assert text == f"NOT_FOUND - no queue '{qname}' in vhost '/'"
    assert conn.is_open and conn.channel().is_open  # only the channel closed


def test_publish_to_missing_exchange_is_404(conn) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.confirm_delivery()
    text = closed_with(404, ch.basic_publish, "no-such-exchange", "k", b"x")
    assert "no exchange 'no-such-exchange' in vhost '/'" in text


def test_inequivalent_redeclare_is_406_naming_the_field(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    conn.channel().queue_declare(qname, durable=False)
    text = closed_with(406, conn.channel().queue_declare, qname, durable=True)
    assert "inequivalent arg 'durable'" in text
    conn.channel().exchange_declare(f"{qname}.x", "direct")
    text = closed_with(406, conn.channel().exchange_declare, f"{qname}.x", "fanout")
    assert "inequivalent arg 'type'" in text


def test_exclusive_queue_of_another_connection_is_405(  # type: ignore[no-untyped-def]
    roost: RoostProcess, conn, qname: str
) -> None:
    conn.channel().queue_declare(qname, exclusive=True)
    other = pika.BlockingConnection(pika_params(roost))
    try:
        closed_with(405, other.channel().basic_consume, qname, lambda *a: None)
        closed_with(405, other.channel().queue_declare, qname, passive=True)
    finally:
        other.close()
    conn.close()  # the owner leaves: the queue goes with it
    again = pika.BlockingConnection(pika_params(roost))
    try:
        closed_with(404, again.channel().queue_declare, qname, passive=True)
    finally:
        again.close()


def test_exclusive_consumer_refuses_others_403(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.queue_declare(qname)
    ch.basic_consume(qname, lambda *a: None, exclusive=True)
    text = closed_with(403, conn.channel().basic_consume, qname, lambda *a: None)
    assert "in exclusive use" in text


def test_reserved_names_are_403(conn) -> None:  # type: ignore[no-untyped-def]
    closed_with(403, conn.channel().queue_declare, "amq.mine")
    closed_with(403, conn.channel().exchange_declare, "amq.mine", "direct")
    closed_with(403, conn.channel().queue_bind, "whatever", "", "k")


def test_internal_exchange_refuses_publish(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.exchange_declare(f"{qname}.int", "fanout", internal=True)
    ch.confirm_delivery()
    closed_with(403, ch.basic_publish, f"{qname}.int", "", b"x")


def test_delete_if_unused_and_if_empty_are_406(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"x")
    closed_with(406, conn.channel().queue_delete, qname, if_empty=True)
    ch.basic_consume(qname, lambda *a: None)
    closed_with(406, conn.channel().queue_delete, qname, if_unused=True)
    ch.exchange_declare(f"{qname}.x", "direct")
    ch.queue_bind(qname, f"{qname}.x", "k")
    closed_with(406, conn.channel().exchange_delete, f"{qname}.x", if_unused=True)


def test_unknown_delivery_tag_is_406(conn) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.basic_ack(99)
    with pytest.raises(ChannelClosedByBroker) as info:
        ch.basic_get("amq.nothing.here")  # any round trip surfaces the close
    assert info.value.reply_code == 406
    assert "unknown delivery tag 99" in info.value.reply_text


def test_unknown_exchange_type_is_503_connection_error(conn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConnectionClosedByBroker) as info:
        conn.channel().exchange_declare("weird", "no-such-type")
    assert info.value.reply_code == 503


def test_reused_consumer_tag_is_530(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.queue_declare(qname)
    ch.basic_consume(qname, lambda *a: None, consumer_tag="dup")
    with pytest.raises((ConnectionClosedByBroker, pika.exceptions.DuplicateConsumerTag)):
        ch.basic_consume(qname, lambda *a: None, consumer_tag="dup")


def test_reused_consumer_tag_is_530_with_py_amqp(roost: RoostProcess, qname: str) -> None:
    # pika refuses the duplicate client-side, py-amqp sends it
    with amqp.Connection(f"127.0.0.1:{roost.amqp_port}") as c:
        ch = c.channel()
        ch.queue_declare(qname)
        ch.basic_consume(qname, consumer_tag="dup", callback=lambda m: None)
        with pytest.raises(amqp.exceptions.NotAllowed) as info:
            ch.basic_consume(qname, consumer_tag="dup", callback=lambda m: None)
        assert info.value.reply_code == 530


def test_immediate_publish_is_540(roost: RoostProcess, qname: str) -> None:
    with amqp.Connection(f"127.0.0.1:{roost.amqp_port}") as c:
        ch = c.channel()
        ch.queue_declare(qname)
        ch.basic_publish(amqp.Message(b"x"), "", qname, immediate=True)
        with pytest.raises(amqp.exceptions.AMQPNotImplementedError) as info:
            c.drain_events(timeout=2)
        assert info.value.reply_code == 540


def test_unknown_vhost_is_530(roost: RoostProcess) -> None:
    params = pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{roost.amqp_port}/nowhere")
    with pytest.raises(pika.exceptions.AMQPConnectionError) as info:
        pika.BlockingConnection(params)
    assert "530" in repr(info.value) or "NOT_ALLOWED" in repr(info.value)


def test_wrong_password_is_refused_with_403(roost: RoostProcess) -> None:
    params = pika.URLParameters(f"amqp://guest:wrong@127.0.0.1:{roost.amqp_port}/%2F")
    with pytest.raises(ProbableAuthenticationError) as info:
        pika.BlockingConnection(params)
    assert "ACCESS_REFUSED" in repr(info.value)
    with (
        pytest.raises(amqp.exceptions.AccessRefused) as info2,
        amqp.Connection(f"127.0.0.1:{roost.amqp_port}", password="wrong"),
    ):
        pass
    assert info2.value.reply_code == 403


def test_broker_keeps_serving_after_errors(roost: RoostProcess, qname: str) -> None:
    """A burst of failing clients leaves a well-behaved one untouched."""
    good = pika.BlockingConnection(pika_params(roost))
    gch = good.channel()
    gch.queue_declare(qname)
    for _ in range(5):
        bad = pika.BlockingConnection(pika_params(roost))
        with pytest.raises(ConnectionClosedByBroker):
            bad.channel().exchange_declare("e", "bogus")
    gch.basic_publish("", qname, b"still fine")
    assert gch.basic_get(qname, auto_ack=True)[2] == b"still fine"
    good.close()


def test_texts_match_rabbitmq_for_argument_and_system_exchange_errors(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    # texts recorded from RabbitMQ 3.10 with the same client calls
    conn.channel().queue_declare(qname)
    text = closed_with(406, conn.channel().queue_declare, qname, arguments={"x-max-length": 11})
    assert text == (
        f"PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue '{qname}' in vhost "
        "'/': received the value '11' of type 'signedint' but current is none"
    )
    text = closed_with(403, conn.channel().exchange_delete, "amq.direct")
    assert text == (
        "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed"
    )
    text = closed_with(403, conn.channel().exchange_declare, "", passive=True)
    assert text == "ACCESS_REFUSED - operation not permitted on the default exchange"
