"""Shovel throughput between two brokers: a Roost->Roost shovel (roost.shovel) against a
RabbitMQ->RabbitMQ shovel (RabbitMQ 3.10's shovel plugin), four broker processes on
loopback in the same run, 1 KiB persistent messages, ``ack-mode: on-confirm``.

    .venv/bin/python bench/shovel_two_brokers.py [--count 20000] [--size 1024] [--repeat 3]

For each system: the source broker's queue is filled first (durable, persistent, counted
before the shovel starts); a shovel defined on the source broker (``src-uri: amqp://``,
``dest-uri``: the other broker, ``src-delete-after: queue-length``) is set through the
source's management API, and the time from that request until the destination queue
holds ``--count`` messages is measured. Runs alternate between the systems. Reported:
messages per second (medians of ``--repeat``), Roost's over RabbitMQ's, and the peak
resident memory (VmHWM) of each broker process at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx
import pika

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # sibling modules, not a package
import _measure


def depth(url: str, queue: str) -> int:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        return int(conn.channel().queue_declare(queue, durable=True).method.message_count)


def one_run(src: str, src_api: str, dest: str, count: int, size: int) -> float:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    with pika.BlockingConnection(pika.URLParameters(src)) as conn:
        ch = conn.channel()
        ch.queue_declare(queue, durable=True)
        props, body = pika.BasicProperties(delivery_mode=2), b"x" * size
        for _ in range(count):
            ch.basic_publish("", queue, body, props)
    while depth(src, queue) < count:
        time.sleep(0.05)
    depth(dest, queue)  # declared there before the clock starts
    value = {"src-uri": "amqp://", "src-queue": queue, "dest-uri": dest,
             "dest-queue": queue, "ack-mode": "on-confirm", "src-delete-after": "queue-length"}
    with httpx.Client(base_url=src_api, auth=("guest", "guest"), timeout=30) as http, \
            pika.BlockingConnection(pika.URLParameters(dest)) as conn:
        ch = conn.channel()
        start = time.perf_counter()
        http.put(f"/api/parameters/shovel/%2F/{queue}", json={"value": value}).raise_for_status()
        while ch.queue_declare(queue, passive=True).method.message_count < count:
            time.sleep(0.01)
        elapsed = time.perf_counter() - start
        ch.queue_delete(queue)
    with pika.BlockingConnection(pika.URLParameters(src)) as conn:
        conn.channel().queue_delete(queue)
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    roost_http, rabbit_http = _brokers.free_port(), _brokers.free_port()
    rates: dict[str, list[float]] = {"roost": [], "rabbitmq": []}
    memory: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        roost_src = stack.enter_context(_brokers.roost("--http-port", str(roost_http)))
        roost_dest = stack.enter_context(_brokers.roost())
        rabbit_src = stack.enter_context(_brokers.rabbitmq(
            plugins=("rabbitmq_management", "rabbitmq_shovel"), name="shovel-src",
            extra_conf=f"management.tcp.port = {rabbit_http}\nmanagement.tcp.ip = 127.0.0.1\n",
        ))
        rabbit_dest = stack.enter_context(_brokers.rabbitmq(name="shovel-dest"))
        systems = {
            "roost": (roost_src, f"http://127.0.0.1:{roost_http}", roost_dest),
            "rabbitmq": (rabbit_src, f"http://127.0.0.1:{rabbit_http}", rabbit_dest),
        }
        for _ in range(args.repeat):
            for name, (src, api, dest) in systems.items():
                rate = one_run(src, api, dest, args.count, args.size)
                rates[name].append(rate)
                print(f"{name}: {rate:,.0f} msg/s", file=sys.stderr)
        for name, (src, _, dest) in systems.items():
            memory[name] = [_measure.rss_mb(_measure.broker_pid(u), "VmHWM") for u in (src, dest)]
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\nshovel between two brokers, {args.count:,} x {args.size} B persistent, "
          f"on-confirm, medians of {args.repeat}")
    print("| system | runs (msg/s) | median msg/s | peak RSS source / destination |")
    print("|---|---|---:|---:|")
    for name, label in (("roost", "Roost -> Roost (roost.shovel)"),
                        ("rabbitmq", "RabbitMQ 3.10 -> RabbitMQ 3.10 (shovel plugin)")):
        runs = ", ".join(f"{r:,.0f}" for r in rates[name])
        src_mb, dest_mb = memory[name]
        print(f"| {label} | {runs} | {med[name]:,.0f} | {src_mb:.0f} MB / {dest_mb:.0f} MB |")
    print(f"| Roost / RabbitMQ | | {med['roost'] / med['rabbitmq']:.2f}x | |")


if __name__ == "__main__":
    main()
