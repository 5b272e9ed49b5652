"""Shovel throughput: a dynamic shovel moving 1 KiB persistent messages with
``ack-mode: on-confirm`` (the default), Roost's (roost.shovel) against RabbitMQ 3.10's
shovel plugin, in the same run.

    .venv/bin/python bench/shovel_bench.py [--count 20000] [--size 1024] [--repeat 3]

Each broker runs its shovel within itself (``amqp://`` to ``amqp://``, one node: the
shovel, the source and the destination share the box's two cores on both sides): the
source queue is filled first (durable, persistent messages, counted before the shovel
starts), then a shovel with ``src-delete-after: queue-length`` is set through the
management API, and the time from that request until the destination queue holds
``--count`` messages is measured. Reported: messages per second, medians of
``--repeat`` runs, and Roost's over RabbitMQ's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx
import pika
import pika.exceptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # a sibling module, not a package


def depth(ch: pika.adapters.blocking_connection.BlockingChannel, queue: str) -> int:
    try:
        return int(ch.queue_declare(queue, passive=True).method.message_count)
    except pika.exceptions.ChannelClosedByBroker:
        raise


def one_run(url: str, api: str, count: int, size: int) -> float:
    src, dest = f"src-{uuid.uuid4().hex[:6]}", f"dest-{uuid.uuid4().hex[:6]}"
    body = b"x" * size
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.queue_declare(src, durable=True)
        ch.queue_declare(dest, durable=True)
        props = pika.BasicProperties(delivery_mode=2)
        for _ in range(count):
            ch.basic_publish("", src, body, props)
        while depth(ch, src) < count:
            time.sleep(0.05)
        value = {"src-uri": "amqp://", "src-queue": src, "dest-uri": "amqp://",
                 "dest-queue": dest, "src-delete-after": "queue-length"}
        with httpx.Client(base_url=api, auth=("guest", "guest"), timeout=30) as http:
            start = time.perf_counter()
            http.put(f"/api/parameters/shovel/%2F/{src}", json={"value": value}).raise_for_status()
            while depth(ch, dest) < count:
                time.sleep(0.01)
            elapsed = time.perf_counter() - start
        ch.queue_delete(src)
        ch.queue_delete(dest)
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, float] = {}
    http_port = _brokers.free_port()
    roost = _brokers.roost("--http-port", str(http_port))
    rabbit_http = _brokers.free_port()
    rabbit = _brokers.rabbitmq(
        plugins=("rabbitmq_management", "rabbitmq_shovel"),
        extra_conf=f"management.tcp.port = {rabbit_http}\nmanagement.tcp.ip = 127.0.0.1\n",
    )
    for name, launcher, port in (("roost", roost, http_port), ("rabbitmq", rabbit, rabbit_http)):
        with launcher as url:
            api = f"http://127.0.0.1:{port}"
            rates = [one_run(url, api, args.count, args.size) for _ in range(args.repeat)]
            results[name] = statistics.median(rates)
            print(f"{name}: {', '.join(f'{r:,.0f}' for r in rates)} msg/s", file=sys.stderr)
    ratio = results["roost"] / results["rabbitmq"]
    print(f"\nshovel, {args.count:,} x {args.size} B persistent, on-confirm, "
          f"medians of {args.repeat}")
    print("| broker | msg/s |")
    print("|---|---:|")
    print(f"| Roost (roost.shovel) | {results['roost']:,.0f} |")
    print(f"| RabbitMQ 3.10 (shovel plugin) | {results['rabbitmq']:,.0f} |")
    print(f"| Roost / RabbitMQ | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
