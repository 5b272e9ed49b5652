"""The RabbitMQ stream protocol, Roost against RabbitMQ 3.10 (rabbitmq_stream plugin) in
the same run, with the same client (rstream): publish with confirms (a producer that
never waits: batches of 500 sent back to back, confirms counted as they come), then
consume the stream from its first offset. Per broker and message size: medians of the
runs, the broker's CPU seconds per 100k messages, and its resident memory.

    python bench/stream_protocol_bench.py --messages 50000 --sizes 100,1024 --runs 3

Each run uses a new stream. Messages are AMQP 1.0 (rstream's ``AMQPMessage``, encoded
once and sent as bytes so the client's encoder is not what is measured).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _brokers
from _measure import broker_pid, cpu_seconds, rss_mb
from rstream import (
    AMQPMessage,
    Consumer,
    ConsumerOffsetSpecification,
    OffsetType,
    Producer,
    RawMessage,
)

BATCH = 500


@contextlib.contextmanager
def broker(name: str) -> Iterator[tuple[int, int]]:
    """Start one broker with its stream listener on a free port; yield that port and
    the broker's pid."""
    port = _brokers.free_port()
    if name == "roost":
        with _brokers.roost(
            "--stream-port", str(port), "--stream-advertised-host", "127.0.0.1"
        ) as url:
            wait_for(port)  # the AMQP port is up; the stream one opens a moment later
            yield port, broker_pid(url)
        return
    conf = (
        f"stream.listeners.tcp.1 = 127.0.0.1:{port}\n"
        "stream.advertised_host = 127.0.0.1\n"
        f"stream.advertised_port = {port}\n"
    )
    with _brokers.rabbitmq(plugins=("rabbitmq_stream",), extra_conf=conf) as url:
        wait_for(port)  # the plugin's listener starts after the node
        yield port, broker_pid(url)


def wait_for(port: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


async def publish(port: int, stream: str, count: int, payload: bytes) -> float:
    confirmed = 0
    done = asyncio.Event()

    def on_confirm(status: object) -> None:
        nonlocal confirmed
        confirmed += 1
        if confirmed >= count:
            done.set()

    async with Producer("127.0.0.1", port, username="guest", password="guest") as producer:
        await producer.create_stream(stream, exists_ok=True)
        start = time.perf_counter()
        sent = 0
        while sent < count:
            n = min(BATCH, count - sent)
            await producer.send_batch(
                stream, [RawMessage(payload) for _ in range(n)], on_publish_confirm=on_confirm
            )
            sent += n
        await asyncio.wait_for(done.wait(), 300)
        return count / (time.perf_counter() - start)


async def consume(port: int, stream: str, count: int) -> float:
    received = 0
    done = asyncio.Event()

    def on_message(message: bytes, ctx: object) -> None:
        nonlocal received
        received += 1
        if received >= count:
            done.set()

    async with Consumer("127.0.0.1", port, username="guest", password="guest") as consumer:
        start = time.perf_counter()
        await consumer.subscribe(
            stream, on_message, offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST)
        )
        await asyncio.wait_for(done.wait(), 300)
        return count / (time.perf_counter() - start)


def run(name: str, sizes: list[int], count: int, runs: int) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    with broker(name) as (port, pid):
        for size in sizes:
            payload = bytes(AMQPMessage(body=b"x" * size))
            pubs, cons, pub_cpu, con_cpu = [], [], [], []
            for i in range(runs):
                stream = f"bench-{size}-{i}"
                before = cpu_seconds(pid)
                pubs.append(asyncio.run(publish(port, stream, count, payload)))
                middle = cpu_seconds(pid)
                cons.append(asyncio.run(consume(port, stream, count)))
                after = cpu_seconds(pid)
                pub_cpu.append((middle - before) / count * 100_000)
                con_cpu.append((after - middle) / count * 100_000)
            out[size] = {
                "publish": statistics.median(pubs),
                "consume": statistics.median(cons),
                "publish_cpu": statistics.median(pub_cpu),
                "consume_cpu": statistics.median(con_cpu),
                "rss": rss_mb(pid),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    names = args.brokers.split(",")
    if "rabbitmq" in names and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: Roost only")
        names = [n for n in names if n != "rabbitmq"]
    results = {name: run(name, sizes, args.messages, args.runs) for name in names}
    print(f"\nstream protocol, rstream client, {args.messages} messages, median of {args.runs}")
    header = f"{'size':>6} {'figure':<26}" + "".join(f"{_brokers.TITLES[n]:>12}" for n in names)
    if len(names) == 2:
        header += f"{'ratio':>8}"
    print(header)
    rows = [
        ("publish", "publish+confirm msg/s"),
        ("consume", "consume msg/s"),
        ("publish_cpu", "CPU s /100k published"),
        ("consume_cpu", "CPU s /100k consumed"),
        ("rss", "RSS after, MB"),
    ]
    for size in sizes:
        for key, label in rows:
            values = [results[n][size][key] for n in names]
            digits = 3 if key.endswith("_cpu") else 1  # CPU: clock ticks of 10 ms
            line = f"{size:>6} {label:<26}" + "".join(f"{v:>12.{digits}f}" for v in values)
            if len(values) == 2 and values[1]:
                line += f"{values[0] / values[1]:>7.2f}x"
            print(line)


if __name__ == "__main__":
    main()
