"""aio-pika, kombu (py-amqp) and the C client's command-line tools against Roost."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import aio_pika
import kombu
import pytest

from tests.support import RoostProcess


def test_aio_pika_publish_confirm_consume(roost: RoostProcess, qname: str) -> None:
    async def main() -> list[bytes]:
        connection = await aio_pika.connect_robust(roost.url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await channel.set_qos(prefetch_count=10)
            queue = await channel.declare_queue(qname, auto_delete=True)
            for i in range(20):
                await channel.default_exchange.publish(
                    aio_pika.Message(str(i).encode(), headers={"n": i}), routing_key=qname
                )
            got: list[bytes] = []
            async with queue.iterator() as it:
                async for message in it:
                    async with message.process():
                        assert message.headers["n"] == int(message.body)
                        got.append(message.body)
                    if len(got) == 20:
                        break
            return got

    got = asyncio.run(asyncio.wait_for(main(), 20))
    assert got == [str(i).encode() for i in range(20)]


def test_aio_pika_rpc_with_reply_queue(roost: RoostProcess, qname: str) -> None:
    async def main() -> bytes:
        connection = await aio_pika.connect(roost.url)
        async with connection:
            channel = await connection.channel()
            requests = await channel.declare_queue(qname, auto_delete=True)
            replies = await channel.declare_queue(exclusive=True)

            async def serve(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                async with message.process():
                    await channel.default_exchange.publish(
                        aio_pika.Message(
                            message.body.upper(), correlation_id=message.correlation_id
                        ),
                        routing_key=message.reply_to,
                    )

            await requests.consume(serve)
            await channel.default_exchange.publish(
                aio_pika.Message(b"ping", reply_to=replies.name, correlation_id="c1"),
                routing_key=qname,
            )
            async with replies.iterator() as it:
                async for message in it:
                    await message.ack()
                    assert message.correlation_id == "c1"
                    return message.body
        raise AssertionError("no reply")

    assert asyncio.run(asyncio.wait_for(main(), 20)) == b"PING"


def test_kombu_producer_consumer(roost: RoostProcess, qname: str) -> None:
    exchange = kombu.Exchange(f"{qname}.x", type="direct", durable=False)
    queue = kombu.Queue(qname, exchange, routing_key="k", durable=False, auto_delete=True)
    received: list[dict] = []
    with kombu.Connection(f"pyamqp://guest:guest@127.0.0.1:{roost.amqp_port}//") as conn:
        producer = conn.Producer(serializer="json")
        with conn.Consumer(queue, callbacks=[lambda body, msg: (received.append(body), msg.ack())]):
            for i in range(5):
                producer.publish({"n": i}, exchange=exchange, routing_key="k", declare=[queue])
            while len(received) < 5:
                conn.drain_events(timeout=5)
    assert received == [{"n": i} for i in range(5)]


def test_kombu_simple_queue(roost: RoostProcess, qname: str) -> None:
    with kombu.Connection(f"amqp://guest:guest@127.0.0.1:{roost.amqp_port}//") as conn:
        q = conn.SimpleQueue(qname)
        q.put({"hello": "world"})
        message = q.get(timeout=5)
        assert message.payload == {"hello": "world"}
        message.ack()
        q.close()


@pytest.mark.skipif(shutil.which("amqp-publish") is None, reason="amqp-tools not installed")
def test_c_client_tools(roost: RoostProcess, qname: str) -> None:
    url = f"amqp://guest:guest@127.0.0.1:{roost.amqp_port}"
    subprocess.run(["amqp-declare-queue", "--url", url, "-q", qname], check=True, timeout=10)
    subprocess.run(
        ["amqp-publish", "--url", url, "-r", qname, "-b", "from librabbitmq", "-p"],
        check=True,
        timeout=10,
    )
    out = subprocess.run(
        ["amqp-get", "--url", url, "-q", qname], check=True, timeout=10, capture_output=True
    )
    assert out.stdout == b"from librabbitmq"
    subprocess.run(
        ["amqp-publish", "--url", url, "-r", qname, "-b", "second"], check=True, timeout=10
    )
    out = subprocess.run(
        ["amqp-consume", "--url", url, "-q", qname, "-c", "1", "cat"],
        timeout=10,
        capture_output=True,
        check=True,
    )
    assert out.stdout == b"second"
