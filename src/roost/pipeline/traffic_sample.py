"""Sample traffic for the traffic report: a small shop's message flows, for a while.

``roost pipeline generate --traffic --seconds 60`` runs, against a broker started with
``--events-stream``, a topic exchange ``shop`` with five queues and their consumers:

- ``shop.orders`` (``order.*``): two consumers, a few ms of work per message;
- ``shop.payments`` (``payment.*``): slower work, and 3 % of payments rejected, which
  dead-letters them through ``shop.dlx`` into ``shop.dead``;
- ``shop.emails`` (``user.*``): one slow consumer, prefetch 1, and a 5 s message TTL,
  so a burst makes some messages expire (dead-lettered too);
- ``shop.audit`` (``#``: everything): acks in batches of 50;
- ``shop.dead``: not consumed, it just fills.

Publishers follow a one-minute wave (peaks of 1.6 x ``--rate``) with skewed routing keys
and sizes; every 2 s a short-lived connection publishes a few messages, and every
10 s one declares an exclusive queue, so connections and queues come and go too. At the
end the sample's exchanges and queues are deleted. Uses ``roost.client`` (asyncio, one
connection per role), not Spark.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from roost.amqp import codec_methods as m
from roost.client import Channel, ChannelClosed, Connection, Message, connect
from roost.client.aio import new_event_loop

EXCHANGE = "shop"
DLX = "shop.dlx"
KEYS = (  # routing key, weight, typical body size in bytes
    ("order.created", 30, 900),
    ("order.paid", 18, 600),
    ("order.shipped", 10, 700),
    ("payment.card", 16, 1200),
    ("payment.refund", 3, 1100),
    ("user.signup", 6, 400),
    ("user.login", 12, 250),
    ("user.password_reset", 2, 300),
)


@dataclass(frozen=True)
class Flow:
    queue: str
    binding: str
    consumers: int
    work_ms: float  # mean processing time (exponential)
    prefetch: int = 20
    reject: float = 0.0  # share rejected without requeue (dead-lettered)
    ack_every: int = 1
    arguments: tuple[tuple[str, Any], ...] = ()


FLOWS = (
    Flow("shop.orders", "order.*", consumers=2, work_ms=4),
    Flow("shop.payments", "payment.*", consumers=1, work_ms=12, reject=0.03,
         arguments=(("x-dead-letter-exchange", DLX),)),
    Flow("shop.emails", "user.*", consumers=1, work_ms=25, prefetch=1,
         arguments=(("x-dead-letter-exchange", DLX), ("x-message-ttl", 5000))),
    Flow("shop.audit", "#", consumers=1, work_ms=0.5, prefetch=200, ack_every=50),
)
DEAD = "shop.dead"
PRODUCT = "roost-traffic-sample"  # the client name the broker (and its events) show


class Worker:
    """A consumer: each delivery is 'processed' for a random time, then acked (or
    rejected); deliveries are handled concurrently up to the prefetch."""

    def __init__(self, flow: Flow, rng: random.Random, counts: dict[str, int],
                 conn: Connection, ch: Channel) -> None:
        self.flow = flow
        self.rng = rng
        self.counts = counts
        self.conn, self.ch = conn, ch
        self._last = 0
        self._pending: set[asyncio.Task[None]] = set()
        self._unacked = 0

    @classmethod
    async def start(cls, url: str, flow: Flow, rng: random.Random,
                    counts: dict[str, int]) -> Worker:
        conn = await connect(url, product=PRODUCT)
        ch = await conn.channel()
        worker = cls(flow, rng, counts, conn, ch)
        await ch.qos(flow.prefetch)
        await ch.consume(flow.queue, worker._start)
        return worker

    def _start(self, msg: Message) -> None:
        task = asyncio.get_running_loop().create_task(self._process(msg.delivery_tag))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _process(self, tag: int) -> None:
        flow = self.flow
        await asyncio.sleep(self.rng.expovariate(1000.0 / flow.work_ms))
        if self.ch.error is not None:
            return
        if flow.reject and self.rng.random() < flow.reject:
            self.ch.reject(tag, requeue=False)
            self.counts["rejected"] += 1
            return
        self.counts["processed"] += 1
        self._unacked += 1
        self._last = tag
        if self._unacked >= flow.ack_every:
            self.flush_acks()

    def flush_acks(self) -> None:
        """Ack what was processed (a batching consumer's remainder, at the end)."""
        if self._unacked:
            self.ch.ack(self._last, multiple=self.flow.ack_every > 1)
            self._unacked = 0


async def _declare(ch: Channel) -> None:
    await ch.exchange_declare(EXCHANGE, "topic")
    await ch.exchange_declare(DLX, "fanout")
    await ch.queue_declare(DEAD)
    await ch.queue_bind(DEAD, DLX)
    for flow in FLOWS:
        await ch.queue_declare(flow.queue, arguments=dict(flow.arguments))
        await ch.queue_bind(flow.queue, EXCHANGE, flow.binding)


async def _clean_up(ch: Channel) -> None:
    for queue in (*(f.queue for f in FLOWS), DEAD):
        await ch.queue_delete(queue)
    for exchange in (EXCHANGE, DLX):
        await ch.exchange_delete(exchange)


def _publish_one(ch: Channel, rng: random.Random, seq: int) -> None:
    key, _weight, size = rng.choices(KEYS, weights=[k[1] for k in KEYS])[0]
    body_size = max(32, int(rng.lognormvariate(math.log(size), 0.5)))
    props = m.BasicProperties(
        content_type="application/json",
        message_id=f"msg-{seq}",
        timestamp=int(time.time()),
        delivery_mode=2 if key.startswith("payment") else 1,
    )
    ch.publish(EXCHANGE, key, b"x" * body_size, props)


def rate_at(rate: float, elapsed: float) -> float:
    """A one-minute wave around ``rate`` (0.4x to 1.6x)."""
    return rate * (1.0 + 0.6 * math.sin(2 * math.pi * elapsed / 60.0))


async def _publish(ch: Channel, rate: float, seconds: float, rng: random.Random,
                   counts: dict[str, int]) -> None:
    start = time.monotonic()
    owed = 0.0
    tick = 0.05
    while (elapsed := time.monotonic() - start) < seconds:
        owed += rate_at(rate, elapsed) * tick
        n, owed = int(owed), owed - int(owed)
        for i in range(n):
            _publish_one(ch, rng, counts["published"] + i)
        counts["published"] += n
        await asyncio.sleep(tick)


async def _churn(url: str, seconds: float, rng: random.Random, counts: dict[str, int]) -> None:
    """Short-lived connections: a few publishes each, now and then a temporary queue."""
    start = time.monotonic()
    rounds = 0
    while time.monotonic() - start < seconds:
        await asyncio.sleep(2.0)
        conn = await connect(url, product=PRODUCT)
        ch = await conn.channel()
        if rounds % 5 == 0:
            await ch.queue_declare(exclusive=True)
        n = rng.randint(1, 5)
        for i in range(n):
            _publish_one(ch, rng, counts["published"] + i)
        counts["published"] += n
        await conn.close()
        rounds += 1


async def run_sample(url: str, seconds: float, rate: float, events_stream: str,
                     seed: int = 7) -> dict[str, int]:
    rng = random.Random(seed)
    counts = {"published": 0, "processed": 0, "rejected": 0}
    admin = await connect(url, product=PRODUCT)
    ch = await admin.channel()
    try:
        await ch.queue_declare(events_stream, passive=True)
    except ChannelClosed:
        print(f"generate: no stream '{events_stream}' here, so the broker records no events: "
              f"start it with --events-stream {events_stream}", file=sys.stderr)
        ch = await admin.channel()
    await _declare(ch)
    workers: list[Worker] = []
    for flow in FLOWS:
        for _ in range(flow.consumers):
            workers.append(await Worker.start(url, flow, random.Random(rng.random()), counts))
    publisher = await connect(url, product=PRODUCT)
    jobs = [
        asyncio.ensure_future(_publish(await publisher.channel(), rate, seconds, rng, counts)),
        asyncio.ensure_future(_churn(url, seconds, random.Random(seed + 1), counts)),
    ]
    started = time.monotonic()
    while not all(j.done() for j in jobs):
        await asyncio.wait(jobs, timeout=5.0)
        if all(j.done() for j in jobs):
            break
        print(f"generate: {time.monotonic() - started:4.0f}/{seconds:.0f} s, "
              f"{counts['published']:,} published, {counts['processed']:,} processed, "
              f"{counts['rejected']:,} rejected", file=sys.stderr, flush=True)
    for job in jobs:
        job.result()  # a failure in a job surfaces here
    await asyncio.sleep(1.0)  # let consumers finish what they hold
    for worker in workers:
        worker.flush_acks()
    for conn in (publisher, *(w.conn for w in workers)):
        await conn.close()
    await _clean_up(ch)
    await admin.close()
    return counts


def generate_traffic(url: str, seconds: float, rate: float, events_stream: str) -> dict[str, int]:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(run_sample(url, seconds, rate, events_stream))
