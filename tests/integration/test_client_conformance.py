"""Where real clients' own test suites told Roost from RabbitMQ 3.10 (issue 28), each
case with the client that met it; RabbitMQ 3.10.8 answered as asserted here."""

from __future__ import annotations

import asyncio

import aio_pika
import aiormq
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from tests.support import RoostProcess

LOCKED = (
    "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{}' in vhost '/'. "
    "It could be originally declared on another connection or the exclusive property "
    "value does not match that of the original declaration."
)


def test_aio_pika_unbinds_e2e_after_the_auto_delete_pair_is_gone(
    roost: RoostProcess, qname: str
) -> None:
    """aio-pika's exchange-to-exchange teardown: unbinding the queue auto-deletes the
    destination exchange and with it the source; unbinding the e2e binding then is a
    no-op unbind-ok, not 404 (RabbitMQ 3.10.8 does the same for a missing source or
    destination, and still refuses the default exchange with 403)."""

    async def main() -> list[str]:
        conn = await aio_pika.connect(roost.url)
        async with conn:
            ch = await conn.channel()
            src = await ch.declare_exchange(qname + ".src", auto_delete=True)
            dst = await ch.declare_exchange(qname + ".dst", auto_delete=True)
            await dst.bind(src, routing_key="rk")
            queue = await ch.declare_queue(exclusive=True)
            await queue.bind(dst, routing_key="rk")
            await queue.unbind(dst, routing_key="rk")
            gone = []
            for name in (src.name, dst.name):
                probe = await conn.channel()
                try:
                    await probe.get_exchange(name, ensure=True)
                except aio_pika.exceptions.ChannelNotFoundEntity:
                    gone.append(name)
            await dst.unbind(src, routing_key="rk")  # both gone: unbind-ok
            assert not ch.is_closed
            return gone

    gone = asyncio.run(asyncio.wait_for(main(), 20))
    assert gone == [qname + ".src", qname + ".dst"]
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ch.exchange_declare(qname + ".only", "direct")
        ch.exchange_unbind(qname + ".nowhere", qname + ".only", "k")  # destination missing
        ch.exchange_unbind(qname + ".only", qname + ".nowhere", "k")  # source missing
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.exchange_unbind(qname + ".only", "", "k")
        assert err.value.args == (
            403, "ACCESS_REFUSED - operation not permitted on the default exchange"
        )


def test_aiormq_redeclares_an_exclusive_queue_from_another_channel(
    roost: RoostProcess, qname: str
) -> None:
    """aiormq: the owner's other channel redeclaring its exclusive queue with
    exclusive=false gets 405 RESOURCE_LOCKED before any equivalence check (not 406
    "inequivalent arg 'exclusive'"); so does a plain queue redeclared exclusive. Another
    connection gets 405 whatever it asks; an exclusive declare is never durable."""

    async def main() -> list[str]:
        conn = await aiormq.connect(roost.url)
        other = await aiormq.connect(roost.url)
        refusals = []
        try:
            owner = await conn.channel()
            await owner.queue_declare(qname, exclusive=True)
            again = await conn.channel()
            ok = await again.queue_declare(qname, exclusive=True, durable=True)
            assert ok.queue == qname  # durable is dropped for an exclusive queue
            for channel_of, kwargs in (
                (conn, {"exclusive": False}),
                (conn, {"exclusive": False, "durable": True}),
                (other, {"exclusive": True}),
                (other, {"passive": True}),
            ):
                ch = await channel_of.channel()
                # aiormq raises ChannelLockedResource for reply code 405 only
                with pytest.raises(aiormq.exceptions.ChannelLockedResource) as err:
                    await ch.queue_declare(qname, **kwargs)
                refusals.append(err.value.args[0])
            plain = await conn.channel()
            await plain.queue_declare(qname + ".plain")
            ch = await conn.channel()
            with pytest.raises(aiormq.exceptions.ChannelLockedResource):
                await ch.queue_declare(qname + ".plain", exclusive=True)
            await (await conn.channel()).queue_delete(qname + ".plain")
        finally:
            await other.close()
            await conn.close()
        return refusals

    # (reply texts are short strings: cut at 255 bytes)
    assert asyncio.run(asyncio.wait_for(main(), 20)) == [LOCKED.format(qname)[:255]] * 4


def test_aiormq_opens_channel_65535(roost: RoostProcess) -> None:
    """aiormq may number a channel 65535 on a connection whose channel_max is 2047:
    RabbitMQ 3.10.8 counts open channels against channel_max and accepts any number."""

    async def main() -> int:
        conn = await aiormq.connect(roost.url)
        try:
            assert conn.connection_tune.channel_max == 2047
            high = await conn.channel(channel_number=65535)
            ok = await high.queue_declare("", exclusive=True)
            await high.basic_publish(b"to the last channel", routing_key=ok.queue)
            got = await high.basic_get(ok.queue, no_ack=True)
            assert got.body == b"to the last channel"
            return high.number
        finally:
            await conn.close()

    assert asyncio.run(asyncio.wait_for(main(), 20)) == 65535
