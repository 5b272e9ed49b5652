"""The AMQP adapter on a fake transport (tests/amqp_harness.py): what it writes, when it
stops reading and what a closed connection leaves behind, without a socket."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from roost.amqp import codec_methods as m
from roost.amqp.codec import encode_method_frame
from roost.core.message import Properties
from tests.amqp_harness import AMQPHarness

PERSISTENT = Properties(delivery_mode=2)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_the_handshake_and_a_channel() -> None:
    async def scenario() -> None:
        amqp = AMQPHarness()
        amqp.open()
        amqp.send(1, m.ChannelOpen())
        amqp.expect(m.ChannelOpenOk)
        assert amqp.broker.management.activity.list_channels()[0].number == 1

    run(scenario)


def test_frames_of_one_read_are_answered_in_one_write() -> None:
    async def scenario() -> None:
        amqp = AMQPHarness()
        amqp.open()
        amqp.send(1, m.ChannelOpen())
        amqp.send(1, m.ConfirmSelect())
        amqp.send(1, m.QueueDeclare(queue="q"))
        amqp.received()
        writes = amqp.transport.writes
        batch = b"".join(amqp.publish_frames(1, b"m%d" % i, routing_key="q") for i in range(50))
        amqp.feed(batch)
        assert amqp.transport.writes == writes + 1  # fifty confirms, one write
        acks = [x for x in amqp.methods() if isinstance(x, m.BasicAck)]
        assert acks and acks[-1].delivery_tag == 50
        assert amqp.broker.management.queries.queue_info("/", "q").messages.ready == 50

    run(scenario)


def test_deliveries_respect_the_prefetch_and_acks_free_it() -> None:
    async def scenario() -> None:
        amqp = AMQPHarness()
        amqp.open()
        amqp.send(1, m.ChannelOpen())
        amqp.send(1, m.QueueDeclare(queue="q"))
        amqp.feed(b"".join(amqp.publish_frames(1, b"%d" % i, routing_key="q") for i in range(5)))
        amqp.send(1, m.BasicQos(prefetch_count=2))
        amqp.send(1, m.BasicConsume(queue="q", consumer_tag="c"))
        await amqp.settle()
        got = amqp.deliveries()
        assert [body for _m, _p, body in got] == [b"0", b"1"]
        amqp.send(1, m.BasicAck(delivery_tag=2, multiple=True))
        await amqp.settle()
        assert [body for _m, _p, body in amqp.deliveries()] == [b"2", b"3"]

    run(scenario)


def test_a_resource_alarm_blocks_a_publisher_and_stops_reading() -> None:
    async def scenario() -> None:
        amqp = AMQPHarness()
        amqp.open()
        amqp.send(1, m.ChannelOpen())
        amqp.broker.alarms.set_store_full(True)  # the disk alarm
        assert amqp.transport.reading  # no publish yet: "blocking", still reading
        amqp.feed(amqp.publish_frames(1, b"x", routing_key="nowhere"))
        assert not amqp.transport.reading
        assert any(isinstance(x, m.ConnectionBlocked) for x in amqp.methods())
        amqp.broker.alarms.set_store_full(False)
        await amqp.settle()  # written with the next loop iteration's batch
        assert amqp.transport.reading
        assert any(isinstance(x, m.ConnectionUnblocked) for x in amqp.methods())

    run(scenario)


def test_a_lost_connection_releases_what_it_held() -> None:
    async def scenario() -> None:
        amqp = AMQPHarness()
        amqp.open()
        amqp.send(1, m.ChannelOpen())
        amqp.send(1, m.QueueDeclare(queue="work"))
        amqp.send(1, m.QueueDeclare(queue="mine", exclusive=True))
        amqp.feed(amqp.publish_frames(1, b"job", routing_key="work"))
        amqp.send(1, m.BasicConsume(queue="work", consumer_tag="c"))
        await amqp.settle()
        assert len(amqp.deliveries()) == 1  # unacked
        amqp.protocol.connection_lost(None)
        queries, activity = amqp.broker.management.queries, amqp.broker.management.activity
        assert [q.name for q in queries.list_queues("/")] == ["work"]  # exclusive gone
        assert queries.queue_info("/", "work").messages.ready == 1  # requeued
        assert activity.list_connections() == []
        closed = activity.list_connections(closed=True)
        assert [c.closed_reason for c in closed] == ["client closed the socket"]

    run(scenario)


def test_a_malformed_frame_closes_the_connection_with_501() -> None:
    async def scenario() -> None:
        amqp = AMQPHarness()
        amqp.open()
        close_ok = m.ConnectionClose(reply_code=200, class_id=0, method_id=0)
        frame = bytearray(encode_method_frame(0, close_ok))
        frame[-1] = 0x00  # the frame-end octet must be 0xCE
        amqp.feed(bytes(frame))
        close = amqp.expect(m.ConnectionClose)
        assert close.reply_code == 501

    run(scenario)
