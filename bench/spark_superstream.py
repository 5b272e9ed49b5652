"""Spark reading a 4-partition super stream in parallel (option ``superStream``: one
Spark partition per stream partition) against the same rows in one stream, on
``local[2]``; and, for a comparison with RabbitMQ, the 4 partition streams read at once
by a stream-protocol client (4 rstream consumers on one event loop) from Roost and from
RabbitMQ 3.10 (rabbitmq_stream), in the same run. RabbitMQ 3.10 has no super-stream
commands (CreateSuperStream and Partitions came in 3.11 and 3.13), so there its 4
streams are made and filled one by one; and no Spark data source reads RabbitMQ's
streams here, so RabbitMQ appears only in the client-read rows. Both brokers also get
the stream ``bench-one`` (a header each) and ``bench-bare`` (bare bodies), read over
AMQP 0-9-1 by one pika consumer: what an AMQP or STOMP reader of rstream's messages gets.

Rows: ``--rows`` messages of ``--size`` bytes, published with rstream (a super stream
made by CreateSuperStream, routed by hash over its partitions). Each Spark read sums the
body lengths (every column is decoded and every body reaches Spark); medians of
``--runs``. Beside each rows/s, the broker's CPU seconds per 100k rows read (every
thread, /proc/PID/task/*/schedstat): rstream's super-stream producer puts application
properties on every message, kept in the stream as the client sent them and mapped to
AMQP 0-9-1 properties by the broker as the Spark source reads them, so the same rows
as bare bodies in one stream (``one-bare``) show what that mapping costs.

    .venv/bin/python bench/spark_superstream.py [--rows 400000] [--size 100] [--runs 3]
        [--brokers roost,rabbitmq]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers
import pika
from _measure import broker_pid
from rstream import (
    AMQPMessage,
    Consumer,
    ConsumerOffsetSpecification,
    OffsetType,
    Producer,
    RawMessage,
    RouteType,
    SuperStreamCreationOption,
    SuperStreamProducer,
)
from stream_bench import spark_session
from stream_protocol_bench import cpu_ns, wait_for

PARTITIONS = 4
BATCH = 500


@contextlib.contextmanager
def broker(name: str) -> Iterator[tuple[str, int]]:
    """One broker with its stream listener on a free port: its AMQP URL and that port."""
    port = _brokers.free_port()
    if name == "roost":
        launcher = _brokers.roost("--stream-port", str(port),
                                  "--stream-advertised-host", "127.0.0.1")
    else:
        launcher = _brokers.rabbitmq(plugins=("rabbitmq_stream",), extra_conf=(
            f"stream.listeners.tcp.1 = 127.0.0.1:{port}\nstream.advertised_host = 127.0.0.1\n"
            f"stream.advertised_port = {port}\n"))
    with launcher as url:
        wait_for(port)
        yield url, port


def auth(port: int) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": port, "username": "guest", "password": "guest"}


STREAMS = [f"bench-ss-{i}" for i in range(PARTITIONS)]


async def fill(port: int, rows: int, size: int, super_stream: bool) -> None:
    """The super stream ``bench-ss`` (4 partitions, by hash), or without ``super_stream``
    (RabbitMQ 3.10) 4 plain streams named as the partitions, ``rows / 4`` each; and the
    streams ``bench-one`` (a header "k" on each message) and ``bench-bare``, ``rows``
    messages each."""
    body = b"x" * size
    if not super_stream:
        async with Producer(**auth(port)) as plain:
            for stream in STREAMS:
                await plain.create_stream(stream, exists_ok=True)
                share = rows // PARTITIONS
                for start in range(0, share, BATCH):
                    await plain.send_batch(stream, [RawMessage(body)] * min(BATCH, share - start))
    else:
        async def key(message: AMQPMessage) -> str:
            return str(message.application_properties["k"])

        async with SuperStreamProducer(
            **auth(port), super_stream="bench-ss", routing=RouteType.Hash,
            routing_extractor=key,
            super_stream_creation_option=SuperStreamCreationOption(n_partitions=PARTITIONS),
        ) as producer:
            for i in range(rows):
                await producer.send(AMQPMessage(body=body, application_properties={"k": i}))
    async with Producer(**auth(port)) as plain:
        await plain.create_stream("bench-one", exists_ok=True)
        for start in range(0, rows, BATCH):  # the same messages: a header "k" each
            await plain.send_batch("bench-one", [
                AMQPMessage(body=body, application_properties={"k": i})
                for i in range(start, min(start + BATCH, rows))])
        await plain.create_stream("bench-bare", exists_ok=True)
        for start in range(0, rows, BATCH):  # bare bodies: nothing to map on reading
            await plain.send_batch("bench-bare", [
                AMQPMessage(body=body) for _ in range(min(BATCH, rows - start))])
    await asyncio.sleep(1)  # the last confirms: rstream's send does not wait for them


async def client_read(port: int, rows: int) -> float:
    """The 4 partition streams read from their first offset by 4 rstream consumers."""
    got = 0
    done = asyncio.Event()

    def on_message(message: bytes, ctx: object) -> None:
        nonlocal got
        got += 1
        if got >= rows:
            done.set()

    consumers = [Consumer(**auth(port)) for _ in STREAMS]
    for consumer in consumers:
        await consumer.start()
    began = time.perf_counter()
    for consumer, stream in zip(consumers, STREAMS, strict=True):
        await consumer.subscribe(stream, on_message, offset_specification=(
            ConsumerOffsetSpecification(OffsetType.FIRST)))
    await asyncio.wait_for(done.wait(), 600)
    rate = rows / (time.perf_counter() - began)
    for consumer in consumers:
        await consumer.close()
    return rate


def amqp_read(url: str, stream: str, rows: int) -> float:
    """``rows`` messages of ``stream`` from its first offset by one AMQP 0-9-1 consumer
    (pika, prefetch 2000, acks every 500): rows/s."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=2000)
    got = 0
    began = time.perf_counter()

    def on_message(ch: Any, method: Any, _props: Any, _body: bytes) -> None:
        nonlocal got
        got += 1
        if got % 500 == 0 or got >= rows:
            ch.basic_ack(method.delivery_tag, multiple=True)
        if got >= rows:
            ch.stop_consuming()

    channel.basic_consume(stream, on_message, arguments={"x-stream-offset": "first"})
    channel.start_consuming()
    rate = rows / (time.perf_counter() - began)
    connection.close()
    return rate


def spark_read(spark: Any, url: str, port: int, rows: int, **source: str) -> tuple[float, int]:
    reader = spark.read.format("roost").option("url", url).option("streamPort", port)
    for key, value in source.items():
        reader = reader.option(key, value)
    began = time.perf_counter()
    df = reader.load()
    parts = df.rdd.getNumPartitions()
    total = df.selectExpr("count(*) AS n", "sum(length(body)) AS bytes").collect()[0]
    assert total.n == rows, (total.n, rows)
    return rows / (time.perf_counter() - began), parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # broker CPU s per 100k rows read
    parts: dict[str, int] = {}
    spark = None
    for name in args.brokers.split(","):
        with broker(name) as (url, port):
            pid = broker_pid(url)
            asyncio.run(fill(port, args.rows, args.size, super_stream=name == "roost"))
            rows = args.rows if name == "roost" else args.rows // PARTITIONS * PARTITIONS
            if name == "roost":
                spark = spark or spark_session()
                spark_read(spark, url, port, args.rows, superStream="bench-ss")  # warm-up
                for _ in range(args.runs):
                    for label, source in (("super", {"superStream": "bench-ss"}),
                                          ("one-2", {"stream": "bench-one"}),
                                          ("one-4", {"stream": "bench-one",
                                                     "numPartitions": "4"}),
                                          ("one-bare", {"stream": "bench-bare"})):
                        before = cpu_ns(pid)
                        rate, parts[label] = spark_read(spark, url, port, args.rows, **source)
                        results.setdefault(f"spark {label}", []).append(rate)
                        cpu.setdefault(f"spark {label}", []).append(
                            (cpu_ns(pid) - before) / 1e9 / args.rows * 100_000)
            for _ in range(args.runs):
                for stream, label in (("bench-one", "one"), ("bench-bare", "bare")):
                    before = cpu_ns(pid)
                    results.setdefault(f"amqp {label} {name}", []).append(
                        amqp_read(url, stream, args.rows))
                    cpu.setdefault(f"amqp {label} {name}", []).append(
                        (cpu_ns(pid) - before) / 1e9 / args.rows * 100_000)
            for _ in range(args.runs):
                before = cpu_ns(pid)
                results.setdefault(f"rstream {name}", []).append(
                    asyncio.run(client_read(port, rows)))
                cpu.setdefault(f"rstream {name}", []).append(
                    (cpu_ns(pid) - before) / 1e9 / rows * 100_000)
            for key, values in results.items():  # as they come: a later failure loses none
                print(f"  {key}: {', '.join(f'{v:,.0f}' for v in values)} rows/s", flush=True)
    print(f"{args.rows:,} rows of {args.size} B, medians of {args.runs}, Spark local[2]")
    names = {"spark super": f"Spark, super stream ({parts.get('super', 0)} Spark partitions)",
             "spark one-2": f"Spark, one stream ({parts.get('one-2', 0)} Spark partitions)",
             "spark one-4": f"Spark, one stream ({parts.get('one-4', 0)} Spark partitions)",
             "spark one-bare": f"Spark, bare bodies ({parts.get('one-bare', 0)} Spark partitions)",
             "amqp one roost": "AMQP 0-9-1 consume, a header each, Roost",
             "amqp one rabbitmq": "AMQP 0-9-1 consume, a header each, RabbitMQ 3.10",
             "amqp bare roost": "AMQP 0-9-1 consume, bare bodies, Roost",
             "amqp bare rabbitmq": "AMQP 0-9-1 consume, bare bodies, RabbitMQ 3.10",
             "rstream roost": "rstream, 4 partition streams at once, Roost",
             "rstream rabbitmq": "rstream, 4 streams at once, RabbitMQ 3.10"}
    for key, label in names.items():
        if key in results:
            print(f"{label:48} {statistics.median(results[key]):12,.0f} rows/s"
                  f"  broker CPU {statistics.median(cpu[key]):.3f} s per 100k rows")
    for what in ("amqp one", "amqp bare"):
        if f"{what} roost" in results and f"{what} rabbitmq" in results:
            ratio = statistics.median(results[f"{what} roost"]) / statistics.median(
                results[f"{what} rabbitmq"])
            print(f"{what + ' ratio Roost/RabbitMQ':48} {ratio:12.2f}x")
    if "rstream roost" in results and "rstream rabbitmq" in results:
        ratio = statistics.median(results["rstream roost"]) / statistics.median(
            results["rstream rabbitmq"])
        print(f"{'rstream ratio Roost/RabbitMQ':48} {ratio:12.2f}x")
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
