"""The RabbitMQ stream protocol, Roost against RabbitMQ 3.10 (rabbitmq_stream plugin) in
the same run, with the same client (rstream): publish with confirms (a producer that
never waits: batches of 500 sent back to back, confirms counted as they come), then
consume what was published from the first offset. Two shapes: one stream, and 4
partition streams (one producer sending its batches to the partitions in turn, one
consumer subscribed to all four). RabbitMQ 3.10 has no super-stream commands (they came
in 3.11), so the partitions are made as plain streams on both brokers and the client
routes. The shape ``super`` is a real super stream on Roost through rstream's
SuperStreamProducer and SuperStreamConsumer (CreateSuperStream, Partitions, hash
routing; that producer has only a per-message ``send``), and on RabbitMQ 3.10 the same
SuperStreamProducer over 4 plain streams whose names the bench gives it (3.10 cannot
answer Partitions), and one consumer of all four.
The super rows' consume is timed from the first message to the last on both brokers
(``super_consume``: the super-stream consumer's own setup is not the broker's speed), and
their publish from after Roost's Partitions answer (``super_publish``).

Both brokers run for the whole bench and the runs alternate (Roost then RabbitMQ, then
RabbitMQ then Roost, ...), so a load swing on a shared machine hits both: each run is a
pair, and the ratio reported is the median of the pairs' ratios, with their min-max.
Broker CPU is read from /proc/PID/task/*/schedstat (nanoseconds, every thread) and
given per 100k messages, summed over the runs; the client's CPU (this process) next to
it shows whether the pure-Python client, not the broker, is what limits msg/s.

    python bench/stream_protocol_bench.py --messages 50000 --sizes 100,1024 --runs 5

Messages are AMQP 1.0 (rstream's ``AMQPMessage``, encoded once and sent as bytes so the
client's encoder is not what is measured).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import socket
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _brokers
from _measure import broker_pid, rss_mb
from rstream import (
    AMQPMessage,
    Consumer,
    ConsumerOffsetSpecification,
    OffsetType,
    Producer,
    RawMessage,
    RouteType,
    SuperStreamConsumer,
    SuperStreamCreationOption,
    SuperStreamProducer,
)
from rstream.superstream import Metadata

BATCH = 500
PARTITIONS = 4


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


def cpu_ns(pid: int) -> int:
    """CPU nanoseconds of every live thread of a process (/proc/PID/task/*/schedstat):
    finer than /proc/PID/stat's 10 ms ticks, which a 50k-message consume barely spans."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


def auth(port: int) -> dict[str, object]:
    return {"host": "127.0.0.1", "port": port, "username": "guest", "password": "guest"}


class Counter:
    def __init__(self, count: int) -> None:
        self.n, self.count, self.done = 0, count, asyncio.Event()
        self.first = self.last = 0.0  # when the first and the last message came

    def __call__(self, *_: object) -> None:
        self.n += 1
        if self.n == 1:
            self.first = time.perf_counter()
        if self.n >= self.count:
            self.last = time.perf_counter()
            self.done.set()


async def publish(port: int, streams: list[str], count: int, payload: bytes) -> float:
    """``count`` messages in batches of ``BATCH`` sent to ``streams`` in turn, never
    waiting; msg/s until the last confirm."""
    confirmed = Counter(count)
    async with Producer(**auth(port)) as producer:  # type: ignore[arg-type]
        for stream in streams:
            await producer.create_stream(stream, exists_ok=True)
        start = time.perf_counter()
        sent = i = 0
        while sent < count:
            n = min(BATCH, count - sent)
            await producer.send_batch(
                streams[i % len(streams)], [RawMessage(payload) for _ in range(n)],
                on_publish_confirm=confirmed,
            )
            sent, i = sent + n, i + 1
        await asyncio.wait_for(confirmed.done.wait(), 300)
        return count / (time.perf_counter() - start)


async def consume(port: int, streams: list[str], count: int) -> float:
    received = Counter(count)
    async with Consumer(**auth(port)) as consumer:  # type: ignore[arg-type]
        start = time.perf_counter()
        for stream in streams:
            await consumer.subscribe(stream, received, offset_specification=(
                ConsumerOffsetSpecification(OffsetType.FIRST)))
        await asyncio.wait_for(received.done.wait(), 300)
        return count / (time.perf_counter() - start)


async def super_publish(port: int, name: str, count: int, body: bytes) -> float:
    """Through rstream's SuperStreamProducer (hash routing on a per-message key)."""
    confirmed = Counter(count)

    async def key(message: AMQPMessage) -> str:
        return str(message.application_properties["k"])

    async with SuperStreamProducer(
        **auth(port), super_stream=name, routing=RouteType.Hash,  # type: ignore[arg-type]
        routing_extractor=key,
        super_stream_creation_option=SuperStreamCreationOption(n_partitions=PARTITIONS),
    ) as producer:
        # asked before the clock starts: rstream asks Partitions on the first send, then
        # closes its locator connection, and Client.close sleeps 0.2 s. That fixed cost
        # of the client was inside Roost's timed run only (RabbitMQ 3.10's side is given
        # its partitions), and was most of the gap of a 20,000-message run.
        await producer.super_stream_metadata.partitions()
        start = time.perf_counter()
        for i in range(count):  # it has no send_batch; send() batches in the background
            await producer.send(AMQPMessage(body=body, application_properties={"k": i}),
                                on_publish_confirm=confirmed)
        await asyncio.wait_for(confirmed.done.wait(), 300)
        return count / (time.perf_counter() - start)


class _GivenPartitions(Metadata):
    """RabbitMQ 3.10 has no Partitions command (3.11 added it): on its side of the super
    rows the bench names the partition streams itself, so both brokers run the very same
    SuperStreamProducer path per message (key extractor, murmur hash, producer lookup)."""

    def __init__(self, streams: list[str]) -> None:
        self._streams = streams

    async def partitions(self) -> list[str]:
        return self._streams

    async def routes(self, routing_key: str) -> list[str]:
        return self._streams


async def super_publish_given(port: int, streams: list[str], count: int, body: bytes) -> float:
    """RabbitMQ 3.10's side of ``super_publish``: the partition streams are created with a
    plain Producer, then the same SuperStreamProducer sends to them."""
    async with Producer(**auth(port)) as creator:  # type: ignore[arg-type]
        for stream in streams:
            await creator.create_stream(stream, exists_ok=True)
    confirmed = Counter(count)

    async def key(message: AMQPMessage) -> str:
        return str(message.application_properties["k"])

    async with SuperStreamProducer(
        **auth(port), super_stream=streams[0].rsplit("-", 1)[0],  # type: ignore[arg-type]
        routing=RouteType.Hash, routing_extractor=key, super_stream_creation_option=None,
    ) as producer:
        producer.super_stream_metadata = _GivenPartitions(streams)
        start = time.perf_counter()
        for i in range(count):
            await producer.send(AMQPMessage(body=body, application_properties={"k": i}),
                                on_publish_confirm=confirmed)
        await asyncio.wait_for(confirmed.done.wait(), 300)
        return count / (time.perf_counter() - start)


async def super_consume(port: int, name: str, count: int) -> float:
    """msg/s from the first message to the last: rstream's SuperStreamConsumer spends
    0.2-0.5 s in ``subscribe`` (a locator connection, Partitions, a consumer connection
    of its own, a leader lookup per partition) before the first message, which the
    RabbitMQ side's plain Consumer does not; timed from subscribe, that setup was most
    of a 10,000-message read and made Roost's super consume look 0.2x RabbitMQ's."""
    received = Counter(count)
    async with SuperStreamConsumer(**auth(port), super_stream=name) as consumer:  # type: ignore[arg-type]
        await consumer.subscribe(received, offset_specification=(
            ConsumerOffsetSpecification(OffsetType.FIRST)))
        await asyncio.wait_for(received.done.wait(), 300)
        return (count - 1) / (received.last - received.first)


async def consume_steady(port: int, streams: list[str], count: int) -> float:
    """``consume`` timed as ``super_consume`` is: the RabbitMQ side of the super rows."""
    received = Counter(count)
    async with Consumer(**auth(port)) as consumer:  # type: ignore[arg-type]
        for stream in streams:
            await consumer.subscribe(stream, received, offset_specification=(
                ConsumerOffsetSpecification(OffsetType.FIRST)))
        await asyncio.wait_for(received.done.wait(), 300)
        return (count - 1) / (received.last - received.first)


def client_ns() -> int:
    """This process's CPU so far (the rstream client), nanoseconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return int((usage.ru_utime + usage.ru_stime) * 1e9)


def one_run(
    port: int, pid: int, shape: str, name: str, count: int, size: int, roost: bool
) -> list[float]:
    """[publish msg/s, consume msg/s, broker CPU ns publishing, consuming, the client's
    CPU ns publishing, consuming]"""
    body = b"x" * size
    streams = [name] if shape == "stream" else [f"{name}-{i}" for i in range(PARTITIONS)]
    real_super = shape == "super" and roost
    before, client_before = cpu_ns(pid), client_ns()
    if real_super:
        pub = asyncio.run(super_publish(port, name, count, body))
    elif shape == "super":
        pub = asyncio.run(super_publish_given(port, streams, count, body))
    else:
        pub = asyncio.run(publish(port, streams, count, bytes(AMQPMessage(body=body))))
    middle, client_middle = cpu_ns(pid), client_ns()
    if real_super:
        con = asyncio.run(super_consume(port, name, count))
    elif shape == "super":
        con = asyncio.run(consume_steady(port, streams, count))
    else:
        con = asyncio.run(consume(port, streams, count))
    after, client_after = cpu_ns(pid), client_ns()
    return [pub, con, middle - before, after - middle, client_middle - client_before,
            client_after - client_middle]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):>10,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--super-messages", type=int, default=10_000,
                        help="messages per run of the shape super (per-message sends: slow)")
    parser.add_argument("--shapes", default="stream,partitions,super",
                        help="stream, partitions (4 streams), super (see above)")
    parser.add_argument("--brokers", default="roost,rabbitmq")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    names = args.brokers.split(",")
    if "rabbitmq" in names and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: Roost only")
        names = [n for n in names if n != "rabbitmq"]
    # results[(size, shape)][broker] = runs of [publish, consume, publish ns, consume ns]
    results: dict[tuple[int, str], dict[str, list[list[float]]]] = {}
    rss: dict[str, float] = {}
    counts: dict[tuple[int, str], int] = {}
    with contextlib.ExitStack() as stack:
        ports = {n: stack.enter_context(broker(n)) for n in names}
        for size in sizes:
            for shape in shapes:
                row = results.setdefault((size, shape), {})
                count = args.super_messages if shape == "super" else args.messages
                counts[size, shape] = count
                for i in range(args.runs):
                    order = names if i % 2 == 0 else names[::-1]
                    for n in order:
                        port, pid = ports[n]
                        row.setdefault(n, []).append(
                            one_run(port, pid, shape, f"bench-{shape}-{size}-{i}",
                                    count, size, n == "roost"))
                print(f"  {size} B {shape}: " + "; ".join(
                    f"{n} " + ", ".join(f"{r[0]:,.0f}/{r[1]:,.0f}" for r in runs)
                    for n, runs in row.items()), flush=True)
        rss = {n: rss_mb(pid) for n, (_port, pid) in ports.items()}
    print(f"\nstream protocol, rstream client, {args.messages:,} messages per run "
          f"({args.super_messages:,} for super), "
          f"{args.runs} alternating runs: median (min-max) msg/s; ratio = median of the "
          "runs' Roost/RabbitMQ ratios (min-max); CPU = broker CPU s per 100k messages "
          "(client CPU: the rstream client's, this process)")
    for (size, shape), row in results.items():
        for k, label in ((0, "publish+confirm"), (1, "consume")):
            line = f"{size:>5} B {shape:<10} {label:<16}" + "".join(
                f" {n:>8} {spread([r[k] for r in runs])}" for n, runs in row.items())
            if "roost" in row and "rabbitmq" in row:
                ratios = [a[k] / b[k] for a, b in zip(row["roost"], row["rabbitmq"], strict=True)]
                line += (f"  ratio {statistics.median(ratios):.2f}x "
                         f"({min(ratios):.2f}-{max(ratios):.2f})")
            for what, at in (("CPU", 2), ("client CPU", 4)):
                cpu = {n: sum(r[k + at] for r in runs) / 1e9 / (len(runs) * counts[size, shape])
                       * 100_000 for n, runs in row.items()}
                line += f"  {what} " + " ".join(f"{n} {v:.3f}" for n, v in cpu.items())
            print(line)
    print("RSS at the end, MB: " + ", ".join(f"{n} {v:.0f}" for n, v in rss.items()))


if __name__ == "__main__":
    main()
