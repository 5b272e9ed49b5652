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
end the sample's exchanges and queues are deleted. Uses the perf client (asyncio, one
connection per role), not Spark.
"""

from __future__ import annotations

import asyncio
import functools
import math
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.perf import client
from roost.perf.options import parse_url

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


class Worker(client.Connection):
    """A consumer: each delivery is 'processed' for a random time, then acked (or
    rejected); deliveries are handled concurrently up to the prefetch."""

    def __init__(self, flow: Flow, rng: random.Random, counts: dict[str, int]) -> None:
        super().__init__()
        self.flow = flow
        self.rng = rng
        self.counts = counts
        self._tag = 0
        self._remaining = 0
        self._last = 0
        self._pending: set[asyncio.Task[None]] = set()
        self._unacked = 0

    def frames_received(self, frames: list[Any]) -> None:
        for frame in frames:
            kind = type(frame)
            if kind is codec.MethodFrame and type(frame.method) is m.BasicDeliver:
                self._tag = frame.method.delivery_tag
            elif kind is codec.HeaderFrame or kind is codec.BodyFrame:
                if kind is codec.HeaderFrame:
                    self._remaining = frame.body_size
                else:
                    self._remaining -= len(frame.payload)
                if self._remaining <= 0:
                    self._start(self._tag)
            else:
                self.control(frame)

    def _start(self, tag: int) -> None:
        task = asyncio.get_running_loop().create_task(self._process(tag))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _process(self, tag: int) -> None:
        flow = self.flow
        await asyncio.sleep(self.rng.expovariate(1000.0 / flow.work_ms))
        if flow.reject and self.rng.random() < flow.reject:
            self.write(codec.encode_method_frame(
                client.CHANNEL, m.BasicReject(delivery_tag=tag, requeue=False)))
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
            self.write(codec.encode_method_frame(
                client.CHANNEL, m.BasicAck(delivery_tag=self._last,
                                           multiple=self.flow.ack_every > 1)))
            self._unacked = 0


async def _declare(conn: client.Connection) -> None:
    await conn.call(m.ExchangeDeclare(exchange=EXCHANGE, type="topic"), m.ExchangeDeclareOk)
    await conn.call(m.ExchangeDeclare(exchange=DLX, type="fanout"), m.ExchangeDeclareOk)
    await conn.call(m.QueueDeclare(queue=DEAD), m.QueueDeclareOk)
    await conn.call(m.QueueBind(queue=DEAD, exchange=DLX, routing_key=""), m.QueueBindOk)
    for flow in FLOWS:
        await conn.call(m.QueueDeclare(queue=flow.queue, arguments=dict(flow.arguments)),
                        m.QueueDeclareOk)
        await conn.call(m.QueueBind(queue=flow.queue, exchange=EXCHANGE,
                                    routing_key=flow.binding), m.QueueBindOk)


async def _clean_up(conn: client.Connection) -> None:
    for queue in (*(f.queue for f in FLOWS), DEAD):
        await conn.call(m.QueueDelete(queue=queue), m.QueueDeleteOk)
    for exchange in (EXCHANGE, DLX):
        await conn.call(m.ExchangeDelete(exchange=exchange), m.ExchangeDeleteOk)


def _publish_frames(rng: random.Random, seq: int, frame_max: int) -> bytes:
    key, _weight, size = rng.choices(KEYS, weights=[k[1] for k in KEYS])[0]
    body_size = max(32, int(rng.lognormvariate(math.log(size), 0.5)))
    props = m.BasicProperties(
        content_type="application/json",
        message_id=f"msg-{seq}",
        timestamp=int(time.time()),
        delivery_mode=2 if key.startswith("payment") else 1,
    )
    return codec.encode_basic_publish(
        client.CHANNEL, EXCHANGE, key, False, False, codec.encode_properties(props),
        b"x" * body_size, frame_max,
    )


def rate_at(rate: float, elapsed: float) -> float:
    """A one-minute wave around ``rate`` (0.4x to 1.6x)."""
    return rate * (1.0 + 0.6 * math.sin(2 * math.pi * elapsed / 60.0))


async def _publish(conn: client.Connection, rate: float, seconds: float, rng: random.Random,
                   counts: dict[str, int]) -> None:
    start = time.monotonic()
    owed = 0.0
    tick = 0.05
    while (elapsed := time.monotonic() - start) < seconds:
        owed += rate_at(rate, elapsed) * tick
        n, owed = int(owed), owed - int(owed)
        if n:
            conn.write(b"".join(
                _publish_frames(rng, counts["published"] + i, conn.frame_max) for i in range(n)))
            counts["published"] += n
        await asyncio.sleep(tick)


async def _churn(ep: Any, seconds: float, rng: random.Random, counts: dict[str, int]) -> None:
    """Short-lived connections: a few publishes each, now and then a temporary queue."""
    start = time.monotonic()
    rounds = 0
    while time.monotonic() - start < seconds:
        await asyncio.sleep(2.0)
        conn = await client.connect(ep)
        if rounds % 5 == 0:
            await conn.call(m.QueueDeclare(queue="", exclusive=True), m.QueueDeclareOk)
        n = rng.randint(1, 5)
        conn.write(b"".join(
            _publish_frames(rng, counts["published"] + i, conn.frame_max) for i in range(n)))
        counts["published"] += n
        await conn.close()
        rounds += 1


async def run_sample(url: str, seconds: float, rate: float, events_stream: str,
                     seed: int = 7) -> dict[str, int]:
    ep = parse_url(url)
    rng = random.Random(seed)
    counts = {"published": 0, "processed": 0, "rejected": 0}
    admin = await client.connect(ep)
    try:
        await admin.call(m.QueueDeclare(queue=events_stream, passive=True), m.QueueDeclareOk)
    except client.ClosedByBroker:
        print(f"generate: no stream '{events_stream}' here, so the broker records no events: "
              f"start it with --events-stream {events_stream}", file=sys.stderr)
        await admin.open_channel()
    await _declare(admin)
    workers: list[Worker] = []
    for flow in FLOWS:
        for _ in range(flow.consumers):
            factory = functools.partial(Worker, flow, random.Random(rng.random()), counts)
            worker = await client.connect(ep, factory)
            assert isinstance(worker, Worker)
            await worker.call(m.BasicQos(prefetch_count=flow.prefetch), m.BasicQosOk)
            await worker.call(m.BasicConsume(queue=flow.queue), m.BasicConsumeOk)
            workers.append(worker)
    publisher = await client.connect(ep)
    jobs = [
        asyncio.ensure_future(_publish(publisher, rate, seconds, rng, counts)),
        asyncio.ensure_future(_churn(ep, seconds, random.Random(seed + 1), counts)),
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
    for conn in (publisher, *workers):
        await conn.close()
    await _clean_up(admin)
    await admin.close()
    return counts


def generate_traffic(url: str, seconds: float, rate: float, events_stream: str) -> dict[str, int]:
    with asyncio.Runner(loop_factory=client.new_event_loop) as runner:
        return runner.run(run_sample(url, seconds, rate, events_stream))
