"""STOMP throughput of Roost next to RabbitMQ's STOMP plugin (issue 4's first benchmark).

    .venv/bin/python bench/stomp_throughput.py [--brokers roost,rabbitmq] [--count 20000]

    .venv/bin/python bench/stomp_throughput.py --repeat 3 --count 50000

One producer and one consumer over TCP, 1 KiB bodies, client-individual ACKs, prefetch
100. The client is a small asyncio STOMP client on Roost's sans-IO codec, so the client
library is not what is measured; the producer runs in a process of its own, so the
consumer's process is not also the publisher's. Each broker is started once; runs
alternate between them and the table shows medians and the ratio. Prints
delivered-and-acked messages per second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers  # a sibling module, not a package

from roost.stomp.frames import NEED_DATA, Frame, FrameParser, serialize

CONNECT = serialize(
    "CONNECT", {"accept-version": "1.2", "login": "guest", "passcode": "guest", "host": "/"}
)


async def open_conn(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, FrameParser]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(CONNECT)
    parser = FrameParser()
    frame = await next_frame(reader, parser)
    assert frame.command == "CONNECTED", frame
    return reader, writer, parser


async def next_frame(reader: asyncio.StreamReader, parser: FrameParser) -> Frame:
    while True:
        frame = parser.next_frame()
        if frame is not NEED_DATA:
            assert isinstance(frame, Frame)
            return frame
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("closed")
        parser.feed(data)


async def produce(port: int, queue: str, count: int, body: bytes) -> None:
    _, writer, _ = await open_conn(port)
    frame = serialize("SEND", {"destination": f"/queue/{queue}"}, body)
    for i in range(count):
        writer.write(frame)
        if i % 100 == 99:
            await writer.drain()
    await writer.drain()


async def consume(port: int, queue: str, count: int) -> float:
    reader, writer, parser = await open_conn(port)
    writer.write(serialize("SUBSCRIBE", {
        "id": "b", "destination": f"/queue/{queue}", "ack": "client-individual",
        "prefetch-count": "100",
    }))
    got = 0
    start = 0.0
    while got < count:
        frame = await next_frame(reader, parser)
        if frame.command != "MESSAGE":
            raise RuntimeError(f"unexpected {frame}")
        if got == 0:
            start = time.perf_counter()
        got += 1
        writer.write(serialize("ACK", {"id": frame.headers["ack"]}))
        if got % 50 == 0:
            await writer.drain()
    elapsed = time.perf_counter() - start
    writer.close()
    return (count - 1) / elapsed


def _produce_process(port: int, queue: str, count: int) -> None:
    asyncio.run(produce(port, queue, count, b"x" * 1024))


async def run_once(port: int, count: int) -> float:
    queue = f"bench-{time.monotonic_ns()}"
    consumer = asyncio.create_task(consume(port, queue, count))
    await asyncio.sleep(0.3)  # the subscription declares the queue first
    producer = multiprocessing.get_context("spawn").Process(
        target=_produce_process, args=(port, queue, count)
    )
    producer.start()
    try:
        return await consumer
    finally:
        await asyncio.to_thread(producer.join)


async def fanout_subscriber(
    port: int, ws_port: int, transport: str, topic: str, count: int, ready: asyncio.Event
) -> None:
    """Counts MESSAGE frames on one subscription until ``count`` arrived."""
    sub = serialize("SUBSCRIBE", {"id": "f", "destination": f"/topic/{topic}", "receipt": "r"})
    parser = FrameParser()
    got = 0
    if transport == "tcp":
        reader, writer, parser = await open_conn(port)
        writer.write(sub)
        assert (await next_frame(reader, parser)).command == "RECEIPT"
        ready.set()
        while got < count:
            data = await reader.read(262144)
            if not data:
                raise ConnectionError("closed")
            parser.feed(data)
            while (frame := parser.next_frame()) is not NEED_DATA:
                got += 1
        writer.close()
        return
    import aiohttp

    async with aiohttp.ClientSession() as session, session.ws_connect(
        f"ws://127.0.0.1:{ws_port}/ws", protocols=("v12.stomp",)
    ) as ws:
        await ws.send_bytes(CONNECT + sub)
        seen_receipt = False
        async for msg in ws:
            data = msg.data.encode() if isinstance(msg.data, str) else msg.data
            parser.feed(data)
            while (frame := parser.next_frame()) is not NEED_DATA:
                assert isinstance(frame, Frame)
                if frame.command == "RECEIPT":
                    seen_receipt = True
                    ready.set()
                elif frame.command == "MESSAGE":
                    got += 1
            if seen_receipt and got >= count:
                break


async def run_fanout(port: int, ws_port: int, transport: str, subs: int, count: int) -> float:
    topic = f"fan.{time.monotonic_ns()}"
    events = [asyncio.Event() for _ in range(subs)]
    tasks = [
        asyncio.create_task(fanout_subscriber(port, ws_port, transport, topic, count, ev))
        for ev in events
    ]
    for ev in events:
        await asyncio.wait_for(ev.wait(), 30)
    start = time.perf_counter()
    _, writer, _ = await open_conn(port)
    frame = serialize("SEND", {"destination": f"/topic/{topic}"}, b"x" * 117)
    for i in range(count):
        writer.write(frame)
        if i % 100 == 99:
            await writer.drain()
    await writer.drain()
    await asyncio.gather(*tasks)
    return subs * count / (time.perf_counter() - start)


def _launcher(name: str, port: int) -> contextlib.AbstractContextManager[object] | None:
    if name == "roost":
        return _brokers.roost("--stomp-port", str(port), "--ws-port", "0", "--http-port", "0")
    if name == "rabbitmq":
        if not _brokers.rabbitmq_installed():
            print("rabbitmq: not installed, skipped")
            return None
        return _brokers.rabbitmq(
            plugins=("rabbitmq_stomp",),
            extra_conf=f"stomp.listeners.tcp.1 = 127.0.0.1:{port}\n",
        )
    raise SystemExit(f"unknown broker {name}")


def _run(port: int, count: int) -> float:
    deadline = time.monotonic() + 30
    while True:
        try:
            return asyncio.run(run_once(port, count))
        except OSError:  # the listener is not up yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--count", type=int, default=50000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fanout", action="store_true",
                    help="topic fan-out instead: 1 publisher, --subscribers, 117 B, TCP and WS")
    ap.add_argument("--subscribers", type=int, default=20)
    args = ap.parse_args()
    if args.fanout:
        return fanout(args)
    rates: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        ports: dict[str, int] = {}
        for name in args.brokers.split(","):
            port = _brokers.free_port()
            launcher = _launcher(name, port)
            if launcher is not None:
                stack.enter_context(launcher)
                ports[name] = port
                rates[name] = []
        for _ in range(args.repeat):
            for name, port in ports.items():
                rates[name].append(_run(port, args.count))
    print(f"1 producer / 1 consumer, 1 KiB, client-individual, prefetch 100, "
          f"{args.count} messages, {args.repeat} runs")
    print(f"{'broker':10} {'median msg/s':>13}  runs")
    for name, got in rates.items():
        runs = ", ".join(f"{r:,.0f}" for r in got)
        print(f"{name:10} {statistics.median(got):>13,.0f}  {runs}")
    if "roost" in rates and "rabbitmq" in rates:
        ratio = statistics.median(rates["roost"]) / statistics.median(rates["rabbitmq"])
        print(f"ratio roost / rabbitmq: {ratio:.2f}")
    return 0


def fanout(args: argparse.Namespace) -> int:
    """Deliveries per second to all subscribers (Roost only: RabbitMQ needs Web-STOMP)."""
    port, ws_port = _brokers.free_port(), _brokers.free_port()
    with _brokers.roost("--stomp-port", str(port), "--ws-port", str(ws_port), "--http-port", "0"):
        time.sleep(0.5)
        for transport in ("tcp", "ws"):
            rate = asyncio.run(run_fanout(port, ws_port, transport, args.subscribers, args.count))
            print(f"roost fan-out over {transport}: {rate:,.0f} deliveries/s "
                  f"({args.subscribers} subscribers, 117 B, {args.count} messages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
