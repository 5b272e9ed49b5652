"""Broker CPU of reading a stream over AMQP 0-9-1 (pika, ``x-stream-offset: first``),
Roost builds side by side (A/B, alternating runs) and RabbitMQ 3.10 in the same run.

Each broker gets three streams of ``--rows`` messages of ``--size`` bytes: ``one``
(rstream, an application property "k" on each message), ``bare`` (rstream, bare
bodies) and ``amqp`` (published over AMQP 0-9-1 by pika with a content type, a message
id and two headers). Then each stream is read ``--runs`` times by one pika consumer
(prefetch 2000, acks every 500), the brokers taking turns run by run, and the broker's
CPU seconds per 100k rows read are printed (every thread, /proc/PID/task/*/schedstat).

``--roost LABEL=SRC``: a Roost whose ``roost`` package is imported from SRC (a source
tree put first on PYTHONPATH; one without compiled modules runs as pure Python); given
once per build. ``--roost LABEL=venv:DIR``: the ``roost`` of the virtualenv DIR as it is
installed (a compiled build, say).

    .venv/bin/python bench/amqp_stream_read.py --roost base=/tmp/base/src \\
        --roost new=$PWD/src [--rabbitmq] [--rows 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers
import pika
from _measure import broker_pid
from rstream import AMQPMessage, Producer
from stream_protocol_bench import cpu_ns, wait_for

BATCH = 500
STREAMS = ("one", "bare", "amqp")


async def fill_rstream(port: int, rows: int, size: int) -> None:
    body = b"x" * size
    auth = {"host": "127.0.0.1", "port": port, "username": "guest", "password": "guest"}
    async with Producer(**auth) as producer:
        for stream, headers in (("one", True), ("bare", False)):
            await producer.create_stream(stream, exists_ok=True)
            for start in range(0, rows, BATCH):
                await producer.send_batch(
                    stream,
                    [
                        AMQPMessage(body=body, application_properties={"k": i} if headers else None)
                        for i in range(start, min(start + BATCH, rows))
                    ],
                )
    await asyncio.sleep(1)  # the last confirms: rstream's send does not wait for them


def fill_amqp(url: str, rows: int, size: int) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.queue_declare("amqp", durable=True, arguments={"x-queue-type": "stream"})
    body = b"x" * size
    for i in range(rows):
        props = pika.BasicProperties(
            content_type="text/plain",
            message_id=str(i),
            delivery_mode=2,
            headers={"tenant": "acme", "n": i},
        )
        channel.basic_publish("", "amqp", body, props)
    connection.close()  # flushes what was published


def amqp_read(url: str, stream: str, rows: int) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=2000)
    got = 0

    def on_message(ch: Any, method: Any, _props: Any, _body: bytes) -> None:
        nonlocal got
        got += 1
        if got % 500 == 0 or got >= rows:
            ch.basic_ack(method.delivery_tag, multiple=True)
        if got >= rows:
            ch.stop_consuming()

    channel.basic_consume(stream, on_message, arguments={"x-stream-offset": "first"})
    channel.start_consuming()
    connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roost", action="append", default=[], metavar="LABEL=SRC")
    parser.add_argument("--rabbitmq", action="store_true")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cpu: dict[tuple[str, str], list[float]] = {}
    rates: dict[tuple[str, str], list[float]] = {}
    with contextlib.ExitStack() as stack:
        brokers: list[tuple[str, str, int]] = []  # label, url, pid
        for spec in args.roost:
            label, src = spec.split("=", 1)
            venv = src.removeprefix("venv:") if src.startswith("venv:") else None
            env = {} if venv else {"PYTHONPATH": src}
            port = _brokers.free_port()
            url = stack.enter_context(
                _brokers.roost(
                    "--stream-port",
                    str(port),
                    "--stream-advertised-host",
                    "127.0.0.1",
                    env=env,
                    command=[f"{venv}/bin/roost"] if venv else None,
                )
            )
            wait_for(port)
            brokers.append((label, url, port))
        if args.rabbitmq:
            port = _brokers.free_port()
            url = stack.enter_context(
                _brokers.rabbitmq(
                    plugins=("rabbitmq_stream",),
                    extra_conf=(
                        f"stream.listeners.tcp.1 = 127.0.0.1:{port}\n"
                        f"stream.advertised_host = 127.0.0.1\nstream.advertised_port = {port}\n"
                    ),
                )
            )
            wait_for(port)
            brokers.append(("rabbitmq", url, port))
        pids = {}
        for label, url, port in brokers:
            asyncio.run(fill_rstream(port, args.rows, args.size))
            fill_amqp(url, args.rows, args.size)
            pids[label] = broker_pid(url)
        for _ in range(args.runs):
            for stream in STREAMS:
                for label, url, _port in brokers:  # taking turns: load drifts hit all alike
                    before, began = cpu_ns(pids[label]), time.perf_counter()
                    amqp_read(url, stream, args.rows)
                    rates.setdefault((stream, label), []).append(
                        args.rows / (time.perf_counter() - began)
                    )
                    cpu.setdefault((stream, label), []).append(
                        (cpu_ns(pids[label]) - before) / 1e9 / args.rows * 100_000
                    )
                    print(f"  {stream} {label}: {cpu[stream, label][-1]:.3f} s/100k", flush=True)
    print(
        f"{args.rows:,} rows of {args.size} B read over AMQP 0-9-1 (pika), "
        f"medians of {args.runs}; load {os.getloadavg()[0]:.2f}"
    )
    for (stream, label), values in cpu.items():
        print(
            f"{stream:5} {label:10} broker CPU {statistics.median(values):.3f} s per 100k rows "
            f"({', '.join(f'{v:.3f}' for v in values)}); "
            f"{statistics.median(rates[stream, label]):,.0f} rows/s"
        )


if __name__ == "__main__":
    main()
