"""Publisher confirms across the hop are per message: a confirm waits for every queue its
message reached, and for nothing else. A queue on another node that is congested defers
the answers to the publishes it holds; a message on the same channel to another queue is
still confirmed (with ``multiple=false``, its tag ahead of the held ones), while a
message routed to both queues waits for the congested one, as in RabbitMQ, which
confirms a message once all its queues have it.

2 nodes: ``slow`` and ``fast`` live on n1; ``slow`` is kept congested there by a local
flood and a consumer that acks one message every 50 ms; the publisher (aio-pika, one
channel with confirms) is on n2.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import aio_pika

from roost.cluster.etcd_server import EtcdServer
from roost.core.flow import HIGH_MESSAGES
from tests.cluster.conftest import node
from tests.cluster.flood import FLOOD_SCRIPT, slow_consumer
from tests.cluster.nodes import channel
from tests.support import eventually

HELD = 50  # publishes to the congested queue: far below the hop's window (2,000)


async def publish_across(url: str, end_congestion: Callable[[], None]) -> None:
    """On one channel with confirms: HELD messages to ``slow``, one to both queues, one to
    ``fast``; only the last is confirmed while ``slow`` is congested, then all are."""
    conn = await aio_pika.connect(url)
    try:
        ch = await conn.channel(publisher_confirms=True)
        both = await ch.get_exchange("both")
        held = [
            asyncio.ensure_future(ch.default_exchange.publish(aio_pika.Message(b"s"), "slow"))
            for _ in range(HELD)
        ]
        to_both = asyncio.ensure_future(both.publish(aio_pika.Message(b"b"), ""))
        # published after all of those on the same channel: confirmed while they wait
        await asyncio.wait_for(
            ch.default_exchange.publish(aio_pika.Message(b"f"), "fast"), timeout=10
        )
        await asyncio.sleep(0.5)  # time enough for a held confirm to come, were it free
        assert not any(t.done() for t in held), "the congested queue answered"
        assert not to_both.done(), "confirmed before its congested queue had it"
        end_congestion()
        await asyncio.wait_for(asyncio.gather(*held, to_both), timeout=30)
    finally:
        await conn.close()


def test_a_confirm_waits_for_its_own_queues_only(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1 = node(shared_etcd, tmp_path / "n1", "n1", prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", prefix=etcd_prefix).start()
    stop = threading.Event()
    flooder: subprocess.Popen[bytes] | None = None
    consumer = threading.Thread(target=slow_consumer, args=(n1, stop), daemon=True)
    try:
        c1, ch1 = channel(n1)
        ch1.queue_declare("slow")
        ch1.queue_declare("fast")
        ch1.exchange_declare("both", "fanout")
        ch1.queue_bind("slow", "both")
        ch1.queue_bind("fast", "both")
        consumer.start()
        flood = [sys.executable, "-c", FLOOD_SCRIPT, n1.url, "slow", str(4 * HIGH_MESSAGES)]
        flooder = subprocess.Popen(flood)

        def ready() -> int:
            return int(ch1.queue_declare("slow", passive=True).method.message_count)

        def held() -> bool:  # congested: the flood stopped near the high mark
            before = ready()
            if before < HIGH_MESSAGES - 500:  # (the consumer drains 20 a second)
                return False
            time.sleep(0.2)
            return ready() <= before

        eventually(held, timeout=30, what=ready)

        def end_congestion() -> None:
            assert flooder is not None
            flooder.kill()
            stop.set()  # the consumer goes: a queue nobody consumes holds nobody

        asyncio.run(publish_across(n2.url, end_congestion))
        assert int(ch1.queue_declare("fast", passive=True).method.message_count) == 2
        c1.close()
    finally:
        if flooder is not None:
            flooder.kill()
            flooder.wait()
        stop.set()
        consumer.join(5)
        n1.kill()
        n2.kill()
    for n in (n1, n2):
        assert "Traceback" not in n.log, n.log
