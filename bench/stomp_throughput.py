"""STOMP throughput of Roost next to RabbitMQ's STOMP plugin (issue 4's first benchmark).

    .venv/bin/python bench/stomp_throughput.py [--brokers roost,rabbitmq] [--count 20000]

One producer and one consumer over TCP, 1 KiB bodies, client-individual ACKs, prefetch
100. The client is a small asyncio STOMP client on Roost's sans-IO codec, so the client
library is not what is measured. Prints delivered-and-acked messages per second.
"""

from __future__ import annotations

import argparse
import asyncio
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


async def run_once(port: int, count: int) -> float:
    queue = f"bench-{time.monotonic_ns()}"
    consumer = asyncio.create_task(consume(port, queue, count))
    await asyncio.sleep(0.3)  # the subscription declares the queue first
    await produce(port, queue, count, b"x" * 1024)
    return await consumer


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--fanout", action="store_true",
                    help="topic fan-out instead: 1 publisher, --subscribers, 117 B, TCP and WS")
    ap.add_argument("--subscribers", type=int, default=20)
    args = ap.parse_args()
    if args.fanout:
        return fanout(args)
    for name in args.brokers.split(","):
        port = _brokers.free_port()
        if name == "roost":
            launcher = _brokers.roost("--stomp-port", str(port), "--ws-port", "0",
                                      "--http-port", "0")
        elif name == "rabbitmq":
            if not _brokers.rabbitmq_installed():
                print("rabbitmq: not installed, skipped")
                continue
            launcher = _brokers.rabbitmq(
                plugins=("rabbitmq_stomp",),
                extra_conf=f"stomp.listeners.tcp.1 = 127.0.0.1:{port}\n",
            )
        else:
            raise SystemExit(f"unknown broker {name}")
        with launcher:
            deadline = time.monotonic() + 30
            while True:
                try:
                    rate = asyncio.run(run_once(port, args.count))
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        print(f"{name}: {rate:,.0f} msg/s (1 KiB, client-individual, prefetch 100, "
              f"{args.count} messages)")
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
