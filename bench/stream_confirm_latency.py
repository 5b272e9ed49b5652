"""Publish-confirm latency over the stream protocol, Roost against RabbitMQ 3.10 in the
same run, with stream_protocol_bench.py's client shapes (rstream): ``stream`` (send_batch
of 500 to one stream, never waiting), ``partitions`` (the same to 4 streams in turn) and
``super`` (SuperStreamProducer.send per message, which rstream buffers and sends every
0.5 s). For each message: from the moment its Publish frame was handed to the socket
to the PublishConfirm that names it. Reported per broker: p50, p99 and max of that,
PublishConfirm frames and messages per frame, and the tail (the last send returned to
the last confirm), which is what a short run pays on top of its throughput.

    python bench/stream_confirm_latency.py --messages 100000 --sizes 100,1024 --runs 3

Roost's fsync passes (its /metrics) are given too: every confirm waits for one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _brokers
import stream_protocol_bench as spb
from _measure import broker_pid
from rstream import AMQPMessage, Producer, RawMessage, RouteType, SuperStreamProducer
from rstream.client import Client

BATCH = spb.BATCH


class Probe:
    """Times every Publish frame the client writes and every PublishConfirm it reads
    (rstream's Client.send_publish_frame and Producer._on_publish_confirm, wrapped)."""

    def __init__(self) -> None:
        self.sent: dict[tuple[int, int], float] = {}
        self.latencies: list[float] = []
        self.frames: list[int] = []  # messages per PublishConfirm
        self.last_confirm = 0.0

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        send, confirm = Client.send_publish_frame, Producer._on_publish_confirm
        probe = self

        async def send_publish_frame(client: Client, frame: Any, version: int = 1) -> None:
            now = time.perf_counter()
            for m in frame.messages:
                probe.sent[frame.publisher_id, m.publishing_id] = now
            await send(client, frame, version)

        async def on_confirm(producer: Producer, frame: Any, publisher: Any) -> None:
            if frame.publisher_id == publisher.id:
                now = time.perf_counter()
                sent, pid = probe.sent, frame.publisher_id
                probe.latencies.extend(now - sent.pop((pid, i), now) for i in frame.publishing_ids)
                probe.frames.append(len(frame.publishing_ids))
                probe.last_confirm = now
            await confirm(producer, frame, publisher)

        Client.send_publish_frame = send_publish_frame  # type: ignore[method-assign]
        Producer._on_publish_confirm = on_confirm  # type: ignore[method-assign]
        try:
            yield
        finally:
            Client.send_publish_frame = send  # type: ignore[method-assign]
            Producer._on_publish_confirm = confirm  # type: ignore[method-assign]


async def publish(
    port: int, shape: str, name: str, count: int, size: int, roost: bool
) -> tuple[float, float]:
    """(msg/s, tail s) of one run, as stream_protocol_bench.py publishes."""
    confirmed = spb.Counter(count)
    body = b"x" * size
    if shape == "super":
        streams = [f"{name}-{i}" for i in range(spb.PARTITIONS)]

        async def key(message: AMQPMessage) -> str:
            return str(message.application_properties["k"])

        if not roost:
            async with Producer(**spb.auth(port)) as creator:  # type: ignore[arg-type]
                for stream in streams:
                    await creator.create_stream(stream, exists_ok=True)
        option = spb.SuperStreamCreationOption(n_partitions=spb.PARTITIONS) if roost else None
        async with SuperStreamProducer(
            **spb.auth(port),
            super_stream=name,
            routing=RouteType.Hash,  # type: ignore[arg-type]
            routing_extractor=key,
            super_stream_creation_option=option,
        ) as producer:
            if not roost:
                producer.super_stream_metadata = spb._GivenPartitions(streams)
            await producer.super_stream_metadata.partitions()  # as stream_protocol_bench
            start = time.perf_counter()
            for i in range(count):
                await producer.send(
                    AMQPMessage(body=body, application_properties={"k": i}),
                    on_publish_confirm=confirmed,
                )
            last_send = time.perf_counter()
            await asyncio.wait_for(confirmed.done.wait(), 300)
            end = time.perf_counter()
        return count / (end - start), end - last_send
    streams = [name] if shape == "stream" else [f"{name}-{i}" for i in range(spb.PARTITIONS)]
    payload = bytes(AMQPMessage(body=body))
    async with Producer(**spb.auth(port)) as producer:  # type: ignore[arg-type]
        for stream in streams:
            await producer.create_stream(stream, exists_ok=True)
        start = time.perf_counter()
        sent = i = 0
        while sent < count:
            n = min(BATCH, count - sent)
            await producer.send_batch(
                streams[i % len(streams)],
                [RawMessage(payload) for _ in range(n)],
                on_publish_confirm=confirmed,
            )
            sent, i = sent + n, i + 1
        last_send = time.perf_counter()
        await asyncio.wait_for(confirmed.done.wait(), 300)
        end = time.perf_counter()
    return count / (end - start), end - last_send


def fsyncs(metrics_port: int) -> tuple[float, float]:
    """(fsync passes, seconds in them) of a Roost, from its /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read()
    found = {"rabbitmq_io_sync_ops_total": 0.0, "rabbitmq_io_sync_time_seconds_total": 0.0}
    for line in text.decode().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in found:
            found[parts[0]] = float(parts[1])
    return found["rabbitmq_io_sync_ops_total"], found["rabbitmq_io_sync_time_seconds_total"]


@contextlib.contextmanager
def broker(name: str) -> Iterator[tuple[int, int, int]]:
    """(stream port, pid, Roost's Prometheus port or 0)."""
    port = _brokers.free_port()
    if name == "rabbitmq":
        with spb.broker(name) as (port, pid):
            yield port, pid, 0
        return
    metrics = _brokers.free_port()
    with _brokers.roost(
        "--stream-port",
        str(port),
        "--stream-advertised-host",
        "127.0.0.1",
        "--prometheus-port",
        str(metrics),
    ) as url:
        spb.wait_for(port)
        yield port, broker_pid(url), metrics


def ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--super-messages", type=int, default=20_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--shapes", default="stream,partitions,super")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    args = parser.parse_args()
    names = args.brokers.split(",")
    with contextlib.ExitStack() as stack:
        brokers = {n: stack.enter_context(broker(n)) for n in names}
        for size in (int(s) for s in args.sizes.split(",")):
            for shape in args.shapes.split(","):
                count = args.super_messages if shape == "super" else args.messages
                for r in range(args.runs):
                    for n in names if r % 2 == 0 else names[::-1]:
                        port, _pid, metrics = brokers[n]
                        before = fsyncs(metrics) if metrics else (0.0, 0.0)
                        probe = Probe()
                        with probe.installed():
                            rate, tail = asyncio.run(
                                publish(
                                    port,
                                    shape,
                                    f"lat-{shape}-{size}-{r}",
                                    count,
                                    size,
                                    n == "roost",
                                )
                            )
                        after = fsyncs(metrics) if metrics else (0.0, 0.0)
                        passes = after[0] - before[0]
                        sync = (
                            f"  fsync passes {passes:.0f}, mean "
                            f"{1000 * (after[1] - before[1]) / max(passes, 1):.1f} ms"
                            if metrics
                            else ""
                        )
                        frames = probe.frames
                        print(
                            f"{size:>5} B {shape:<10} {n:<8} {rate:>8,.0f} msg/s  latency ms "
                            f"p50 {ms(probe.latencies, 0.5):6.1f} p99 "
                            f"{ms(probe.latencies, 0.99):6.1f} max "
                            f"{ms(probe.latencies, 1.0):6.1f}  confirms {len(frames):>4} "
                            f"({statistics.mean(frames) if frames else 0:,.0f} msg each)  "
                            f"tail {1000 * tail:6.1f} ms{sync}",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
