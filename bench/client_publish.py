"""What publishing costs the client: aio-pika next to ``roost.client`` (its
``Channel.publish``, and the pre-encoded frames ``roost perf`` writes), against Roost and
RabbitMQ in the same run. The figure behind ``roost.client``'s reason to exist.

    .venv/bin/python bench/client_publish.py [--brokers roost,rabbitmq] [--count 200000]
        [--size 16] [--repeat 3]

Each run publishes ``--count`` messages (no confirms) to an empty queue from one
process, then asks with passive queue.declares until the queue holds ``--count`` (a
declare-ok can come before RabbitMQ's queue process has counted the last publishes).
Reported: messages per second from the first publish until then, and the client
process's CPU time per message (``time.process_time``, the polling included: a few
round trips), medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers  # a sibling module, not a package

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client import connect
from roost.client.aio import new_event_loop

Run = Callable[[str, str, int, bytes], Awaitable[int]]


async def aio_pika_publish(url: str, queue: str, count: int, body: bytes) -> int:
    import aio_pika

    conn = await aio_pika.connect(url)
    try:
        ch = await conn.channel(publisher_confirms=False)
        await ch.declare_queue(queue)
        for _ in range(count):
            await ch.default_exchange.publish(aio_pika.Message(body), routing_key=queue)
        ok = await ch.declare_queue(queue, passive=True)
        return int(ok.declaration_result.message_count)
    finally:
        await conn.close()


async def client_publish(url: str, queue: str, count: int, body: bytes) -> int:
    conn = await connect(url)
    try:
        ch = await conn.channel()
        await ch.queue_declare(queue)
        for i in range(count):
            ch.publish("", queue, body)
            if i % 1000 == 999:
                await ch.drain()
        return (await ch.queue_declare(queue, passive=True)).message_count
    finally:
        await conn.close()


async def client_pre_encoded(url: str, queue: str, count: int, body: bytes) -> int:
    conn = await connect(url)
    try:
        ch = await conn.channel()
        await ch.queue_declare(queue)
        props = codec.encode_properties(m.BasicProperties())
        one = codec.encode_basic_publish(ch.number, "", queue, False, False, props, body,
                                         conn.frame_max)
        for sent in range(0, count, 1000):
            conn.write(one * min(1000, count - sent))
            await ch.drain()
        return (await ch.queue_declare(queue, passive=True)).message_count
    finally:
        await conn.close()


CLIENTS: dict[str, Run] = {
    "aio-pika 10.2 (await publish)": aio_pika_publish,
    "roost.client Channel.publish": client_publish,
    "roost.client pre-encoded (roost perf)": client_pre_encoded,
}


def measure(run: Run, url: str, count: int, size: int, tag: str) -> tuple[float, float]:
    """(messages/s, client CPU µs per message) of one run on a fresh queue."""
    queue = f"client-publish-{tag}-{time.monotonic_ns()}"

    async def go() -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        got = await run(url, queue, count, bytes(size))
        conn = await connect(url)
        ch = await conn.channel()
        deadline = time.monotonic() + 30
        while got < count and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            got = (await ch.queue_declare(queue, passive=True)).message_count
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert got == count, f"{got} of {count} messages in the queue"
        await ch.queue_delete(queue)
        await conn.close()
        return count / wall, cpu / count * 1e6

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(go())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    brokers = [b for b in args.brokers.split(",") if b]
    if "rabbitmq" in brokers and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: skipping it", file=sys.stderr)
        brokers.remove("rabbitmq")
    rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with contextlib.ExitStack() as stack:
        urls = {b: stack.enter_context(_brokers.LAUNCHERS[b]()) for b in brokers}
        for rep in range(args.repeat):
            for name, run in CLIENTS.items():
                for b in brokers if rep % 2 == 0 else brokers[::-1]:
                    rate, cpu = measure(run, urls[b], args.count, args.size, b)
                    print(f"{_brokers.TITLES[b]:8} {name:40} {rate:>10,.0f} msg/s "
                          f"{cpu:6.2f} µs CPU/msg", file=sys.stderr, flush=True)
                    rows.setdefault((name, b), []).append((rate, cpu))
    head = ["client", *(f"{_brokers.TITLES[b]} msg/s, client µs CPU/msg" for b in brokers)]
    print(f"{args.count:,} publishes of {args.size} B, no confirms, one process; medians of "
          f"{args.repeat}\n")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for name in CLIENTS:
        cells = [name]
        for b in brokers:
            runs = rows[(name, b)]
            rate = statistics.median(r for r, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            cells.append(f"{rate:,.0f}, {cpu:.2f}")
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
