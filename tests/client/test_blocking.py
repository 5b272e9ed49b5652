"""``roost.client``'s blocking face (what Spark executors use) against a real Roost and
a real RabbitMQ 3.10."""

from __future__ import annotations

import uuid

import pytest

from roost.amqp import codec_methods as m
from roost.client import (
    BlockingConnection,
    ChannelClosed,
    ClientError,
    ConnectError,
    ConnectionClosed,
)
from tests.client.conftest import Broker
from tests.support import free_port


def test_declare_publish_with_confirms_get_and_delete(broker: Broker) -> None:
    queue = f"blocking-{uuid.uuid4().hex[:8]}"
    with BlockingConnection(broker.url(), name="blocking") as conn:
        assert conn.server.split()[0] in ("Roost", "RabbitMQ")
        conn.call(m.QueueDeclare(queue=queue, durable=True))
        conn.confirm_select()
        for i in range(300):
            conn.publish("", queue, m.BasicProperties(delivery_mode=2), b"%d" % i)
            if i % 100 == 99:
                conn.flush_confirmed(window=50)
        conn.flush_confirmed()
        assert (conn.confirms.acked, conn.confirms.nacked) == (300, 0)
        got = conn.get(queue)
        assert got is not None and (got.body, got.message_count) == (b"0", 299)
        assert got.properties.delivery_mode == 2
        conn.ack(got.delivery_tag)
        reply = conn.call(m.QueueDelete(queue=queue))
        assert reply.message_count == 299


def test_refusals_are_typed_and_the_channel_can_be_reopened(broker: Broker) -> None:
    with BlockingConnection(broker.url()) as conn:
        with pytest.raises(ChannelClosed) as err:
            conn.call(m.QueueDeclare(queue="no-such-queue", passive=True))
        assert err.value.reply_code == 404
        conn.reopen()
        conn.confirm_select()
        conn.publish("", "no-such-queue", m.BasicProperties(), b"x", mandatory=True)
        with pytest.raises(ClientError, match=r"1 published message\(s\) reached no queue "
                                              r"\(312 NO_ROUTE"):
            conn.flush_confirmed()
        assert conn.call(m.QueueDeclare(queue="", exclusive=True)).queue  # still usable


def test_connect_errors(broker: Broker) -> None:
    with pytest.raises(ConnectError) as err:
        BlockingConnection(broker.url(user="guest:wrong"))
    assert isinstance(err.value.last, ConnectionClosed) and err.value.last.reply_code == 403
    closed = f"amqp://127.0.0.1:{free_port()}"
    with BlockingConnection([closed, broker.url()]) as conn:  # the second answers
        assert conn.endpoint.port == broker.port


def test_amqps(broker: Broker) -> None:
    with BlockingConnection(broker.amqps_url(f"cacertfile={broker.pki.ca_file}")) as conn:
        assert conn.endpoint.tls
        ok = conn.call(m.QueueDeclare(queue="", exclusive=True))
        assert ok.queue
