"""Durable queue declarations a second on one AMQP connection, for A/B-ing how a channel
keeps its order while a declare-ok waits for the disk.

    .venv/bin/python bench/durable_declares.py [--channels 1,20] [--queues 40] [--repeat 3]
    .venv/bin/python bench/durable_declares.py --against /tmp/base/src   # A/B two trees
    .venv/bin/python bench/durable_declares.py --rabbitmq                 # RabbitMQ beside

An aio-pika client opens one connection and ``--channels`` channels; each channel
declares ``--queues`` durable queues one after the other (each waits for its
declare-ok, which waits for the group commit that made the queue durable), then deletes
them. With many channels the declarations of different channels can share a group
commit, unless the broker stops reading the connection while one of them waits. The
figure is declarations + deletions a second, median of ``--repeat`` runs; servers
alternate runs so each sees the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path

import aio_pika

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # a sibling module, not a package
from amqp_cpu import server


async def one_run(url: str, channels: int, queues: int, run: int) -> float:
    """Operations (declare + delete) a second for one run."""
    conn = await aio_pika.connect(url)
    try:
        opened = [await conn.channel() for _ in range(channels)]

        async def work(i: int, channel: aio_pika.abc.AbstractChannel) -> None:
            names = [f"bench-durable-{run}-{i}-{j}" for j in range(queues)]
            for name in names:
                await channel.declare_queue(name, durable=True)
            for name in names:
                await channel.queue_delete(name)

        start = time.perf_counter()
        await asyncio.gather(*(work(i, ch) for i, ch in enumerate(opened)))
        elapsed = time.perf_counter() - start
    finally:
        await conn.close()
    return channels * queues * 2 / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", default="1,20", help="comma-separated channel counts")
    ap.add_argument("--queues", type=int, default=40, help="durable queues per channel")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", metavar="SRC", help="also a server from this src directory")
    ap.add_argument("--rabbitmq", action="store_true", help="also a RabbitMQ node")
    args = ap.parse_args()
    shapes = [int(c) for c in args.channels.split(",")]
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        for name, src in {"this checkout": None, args.against: args.against}.items():
            if name is None:
                continue
            _pid, port = stack.enter_context(server(src, None))
            urls[name] = f"amqp://guest:guest@127.0.0.1:{port}/%2F"
        if args.rabbitmq:
            urls["RabbitMQ"] = stack.enter_context(_brokers.rabbitmq())
        results: dict[tuple[str, int], list[float]] = {(n, c): [] for n in urls for c in shapes}
        for run in range(args.repeat):
            order = list(urls.items()) if run % 2 == 0 else list(urls.items())[::-1]
            for channels in shapes:
                for name, url in order:
                    got = asyncio.run(one_run(url, channels, args.queues, run))
                    results[name, channels].append(got)
    print(f"durable queue declare + delete a second, one connection, {args.queues} queues "
          f"a channel, median of {args.repeat}:")
    for channels in shapes:
        base = None
        for name in urls:
            got = results[name, channels]
            median = statistics.median(got)
            base = base or median
            runs = ", ".join(f"{x:.0f}" for x in got)
            print(f"  {channels:3d} channel(s)  {name}: {median:8.0f} op/s "
                  f"({median / base:.2f}x; runs {runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
