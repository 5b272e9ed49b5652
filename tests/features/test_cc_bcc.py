"""Sender-selected distribution: the CC and BCC headers, checked against RabbitMQ 3.10.8
with the same pika calls."""

from __future__ import annotations

import asyncio

import aio_pika
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker

from tests.features.conftest import Returns, drain, settle
from tests.support import RoostProcess


def _queues(ch: BlockingChannel, exchange: str, *names: str) -> None:
    for q in names:
        ch.queue_declare(q)
        ch.queue_bind(q, exchange, q)


def test_cc_and_bcc_add_routing_keys_and_bcc_is_stripped(ch: BlockingChannel, name: str) -> None:
    ch.exchange_declare(name, "direct")
    a, b, c = f"{name}.a", f"{name}.b", f"{name}.c"
    _queues(ch, name, a, b, c)
    props = pika.BasicProperties(headers={"CC": [b], "BCC": [c], "other": 1})
    ch.basic_publish(name, a, b"hello", props)
    for q in (a, b, c):
        method, got, body = ch.basic_get(q, auto_ack=True)
        assert body == b"hello", q
        assert method.routing_key == a  # the publisher's key, whatever key matched
        assert got.headers == {"CC": [b], "other": 1}, q  # BCC gone from every copy


def test_bcc_alone_leaves_an_empty_table(ch: BlockingChannel, name: str) -> None:
    ch.exchange_declare(name, "direct")
    _queues(ch, name, f"{name}.hidden")
    ch.basic_publish(
        name, "nowhere", b"x", pika.BasicProperties(headers={"BCC": [f"{name}.hidden"]})
    )
    _method, props, body = ch.basic_get(f"{name}.hidden", auto_ack=True)
    assert body == b"x" and props.headers == {}


def test_a_queue_matched_by_several_keys_gets_one_copy(ch: BlockingChannel, name: str) -> None:
    ch.exchange_declare(name, "topic")
    ch.queue_declare(f"{name}.q")
    ch.queue_bind(f"{name}.q", name, "a.*")
    ch.basic_publish(name, "a.x", b"once", pika.BasicProperties(headers={"CC": ["a.y", "a.z"]}))
    assert drain(ch, f"{name}.q") == [b"once"]


def test_non_string_elements_are_ignored_and_mandatory_counts_cc_routes(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    ch.exchange_declare(name, "direct")
    _queues(ch, name, f"{name}.b")
    returns = Returns(ch)
    props = pika.BasicProperties(headers={"CC": [f"{name}.b", 5, True]})
    ch.basic_publish(name, "nowhere", b"by cc", props, mandatory=True)
    ch.basic_publish(
        name,
        "nowhere",
        b"lower-case cc is no header of ours",
        pika.BasicProperties(headers={"cc": [f"{name}.b"]}),
        mandatory=True,
    )
    settle(conn)
    assert drain(ch, f"{name}.b") == [b"by cc"]
    assert [r[3] for r in returns.items] == [b"lower-case cc is no header of ours"]


def test_cc_keys_apply_at_every_exchange_and_on_the_default_exchange(
    ch: BlockingChannel, name: str
) -> None:
    ch.exchange_declare(name, "direct")
    ch.exchange_declare(f"{name}.front", "direct")
    ch.exchange_bind(name, f"{name}.front", "hop")
    _queues(ch, name, f"{name}.b")
    ch.basic_publish(
        f"{name}.front", "hop", b"e2e", pika.BasicProperties(headers={"CC": [f"{name}.b"]})
    )
    assert drain(ch, f"{name}.b") == [b"e2e"]
    ch.queue_declare(f"{name}.d1")
    ch.queue_declare(f"{name}.d2")
    ch.basic_publish(
        "", f"{name}.d1", b"dflt", pika.BasicProperties(headers={"CC": [f"{name}.d2"]})
    )
    assert drain(ch, f"{name}.d1") == [b"dflt"] and drain(ch, f"{name}.d2") == [b"dflt"]


@pytest.mark.parametrize(
    ("header", "value", "kind"), [("CC", "one", "longstr"), ("BCC", 7, "signedint")]
)
def test_a_header_that_is_no_array_fails_the_publish(
    conn: pika.BlockingConnection, name: str, header: str, value: object, kind: str
) -> None:
    ch = conn.channel()
    ch.exchange_declare(name, "direct")
    ch.basic_publish(name, "k", b"x", pika.BasicProperties(headers={header: value}))
    with pytest.raises(ChannelClosedByBroker) as err:
        ch.exchange_declare(name, "direct")  # the next synchronous call sees the close
    assert err.value.args == (
        406,
        f'PRECONDITION_FAILED - invalid message: {{unacceptable_type_in_header,"{header}",{kind}}}',
    )


def test_bcc_with_aio_pika(roost: RoostProcess, name: str) -> None:
    async def main() -> list[tuple[bytes, bool]]:
        connection = await aio_pika.connect(roost.url)
        async with connection:
            channel = await connection.channel()
            exchange = await channel.declare_exchange(name, aio_pika.ExchangeType.FANOUT)
            direct = await channel.declare_exchange(f"{name}.d", aio_pika.ExchangeType.DIRECT)
            await direct.bind(exchange)  # fanout -> direct: the BCC key matters on the hop
            main = await channel.declare_queue(f"{name}.main")
            await main.bind(exchange)
            audit = await channel.declare_queue(f"{name}.audit")
            await audit.bind(direct, f"{name}.audit")
            await exchange.publish(
                aio_pika.Message(b"order", headers={"BCC": [f"{name}.audit"]}), routing_key="x"
            )
            got = []
            for queue in (main, audit):
                message = await queue.get(timeout=5)
                await message.ack()
                got.append((message.body, "BCC" in message.headers))
            return got

    assert asyncio.run(asyncio.wait_for(main(), 20)) == [(b"order", False), (b"order", False)]
