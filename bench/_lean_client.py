"""A load generator that leaves the cores to the brokers: one producer and one consumer
of one queue, each a real AMQP 0-9-1 connection, costing the client about a microsecond
of CPU per message instead of ``roost perf``'s ~10.

Why hand-written (and not pika or ``roost perf``): on a 2-core box the load generators
of ``bench/cluster_scaling.py`` needed about one core to drive ~100,000 msg/s, so the
brokers shared the other one whether there was one node or two, and 2-node scaling could
not show. This client does the user-side work a broker sees from any client, and no
more:

- the handshake, channel, ``queue.declare``, ``basic.qos`` and ``basic.consume`` go
  through pamqp (the codec aiormq/aio-pika use), frame by frame, as any client does;
- the producer never waits: it writes ``--batch`` pre-encoded ``basic.publish`` messages
  (method + header + body frames) per write, paced only by TCP back-pressure and
  ``connection.blocked`` (a shape users produce: fire-and-forget publishers, many frames
  per write);
- the consumer walks the incoming bytes by frame header only (type, channel, size, end
  octet), counts ``basic.deliver`` method frames and acks with ``multiple`` every
  ``prefetch / 2`` deliveries (a consumer's usual batching), or uses ``no_ack``.
  Anything else on the hot path (channel.close, connection.close, basic.cancel) ends the
  run with an error.

It prints one JSON line shaped like ``roost perf --json`` (``consume_rate``,
``consumed``, ``published``, ...) plus its own CPU seconds, so the bench can show the
client's CPU per message beside the brokers'.

    python bench/_lean_client.py --url amqp://guest:guest@127.0.0.1:5672/%2F \
        --queue q1 --duration 10 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import time
from typing import Any
from urllib.parse import unquote, urlparse

from pamqp import body as pbody
from pamqp import commands, frame, header
from pamqp import exceptions as pexc

CHANNEL = 1
FRAME_END = 0xCE
HEAD = struct.Struct(">BHI")  # type, channel, payload size
METHOD_IDS = struct.Struct(">HH")
DELIVER = (60, 60)
ACK = struct.Struct(">BHIHHQBB")  # a basic.ack method frame, end octet included
CONNECTION_BLOCKED, CONNECTION_UNBLOCKED = (10, 60), (10, 61)


class ProtocolError(Exception):
    pass


class Link:
    """One AMQP connection: the handshake and control methods through pamqp."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buf = b""
        self.frame_max = 131072  # until tune

    def send(self, value: Any, channel: int = CHANNEL) -> None:
        self.writer.write(frame.marshal(value, channel))

    async def expect(self, kind: type) -> Any:
        while True:
            try:
                used, _channel, value = frame.unmarshal(self.buf)
            except pexc.UnmarshalingException:
                used = 0
            if not used:  # not a whole frame yet
                data = await self.reader.read(65536)
                if not data:
                    raise ProtocolError(f"connection closed waiting for {kind.__name__}")
                self.buf += data
                continue
            self.buf = self.buf[used:]
            if isinstance(value, commands.Connection.Close | commands.Channel.Close):
                raise ProtocolError(f"{value.reply_code} {value.reply_text}")
            if isinstance(value, kind):
                return value

    @classmethod
    async def open(cls, url: str, queue: str) -> Link:
        u = urlparse(url)
        reader, writer = await asyncio.open_connection(u.hostname, u.port or 5672)
        link = cls(reader, writer)
        writer.write(frame.marshal(header.ProtocolHeader(), 0))
        await link.expect(commands.Connection.Start)
        user, password = unquote(u.username or "guest"), unquote(u.password or "guest")
        link.send(commands.Connection.StartOk(
            client_properties={"product": "lean-bench-client",
                               "capabilities": {"connection.blocked": True}},
            mechanism="PLAIN", response=f"\0{user}\0{password}", locale="en_US"), 0)  # fmt: skip
        tune = await link.expect(commands.Connection.Tune)
        link.send(commands.Connection.TuneOk(tune.channel_max, tune.frame_max, 0), 0)
        link.frame_max = tune.frame_max
        vhost = unquote(u.path[1:]) if len(u.path) > 1 else "/"
        link.send(commands.Connection.Open(virtual_host=vhost), 0)
        await link.expect(commands.Connection.OpenOk)
        link.send(commands.Channel.Open())
        await link.expect(commands.Channel.OpenOk)
        link.send(commands.Queue.Declare(queue=queue))
        await link.expect(commands.Queue.DeclareOk)
        return link

    def close(self) -> None:
        self.writer.close()


def publish_batch(queue: str, size: int, batch: int, frame_max: int) -> bytes:
    """``batch`` transient messages of ``size`` bytes to ``queue``, encoded once."""
    one = frame.marshal(commands.Basic.Publish(exchange="", routing_key=queue), CHANNEL)
    one += frame.marshal(header.ContentHeader(
        0, size, commands.Basic.Properties(delivery_mode=1)), CHANNEL)  # fmt: skip
    payload, step = bytes(size), max(frame_max - 8, 1)
    for at in range(0, size, step):
        one += frame.marshal(pbody.ContentBody(payload[at : at + step]), CHANNEL)
    return one * batch


async def produce(link: Link, queue: str, args: argparse.Namespace, stop: float) -> int:
    """Write batches until ``stop``; returns the messages written. Watches for
    connection.blocked and anything closing the connection (bytes read: only those)."""
    chunk = publish_batch(queue, args.size, args.batch, link.frame_max)
    blocked = asyncio.Event()
    blocked.set()  # set: may publish
    failed: list[str] = []

    async def watch() -> None:
        buf = link.buf
        while True:
            data = await link.reader.read(65536)
            if not data:
                failed.append("connection closed by the broker")
                blocked.set()
                return
            buf += data
            while len(buf) >= 7:
                kind, _ch, n = HEAD.unpack_from(buf)
                if len(buf) < n + 8:
                    break
                if kind == 1:
                    ids = METHOD_IDS.unpack_from(buf, 7)
                    if ids == CONNECTION_BLOCKED:
                        blocked.clear()
                    elif ids == CONNECTION_UNBLOCKED:
                        blocked.set()
                    elif ids in ((10, 50), (20, 40)):  # connection.close, channel.close
                        failed.append(f"closed by the broker: {buf[7 : n + 7]!r}")
                        blocked.set()
                        return
                buf = buf[n + 8 :]

    watcher = asyncio.ensure_future(watch())
    sent = 0
    write, drain = link.writer.write, link.writer.drain
    try:
        while (time.monotonic() < stop or not sent) and not failed:  # one batch at least
            if not blocked.is_set():
                await blocked.wait()
                continue
            write(chunk)
            sent += args.batch
            await drain()
    finally:
        watcher.cancel()
    if failed:
        raise ProtocolError(failed[0])
    return sent


class Counter:
    def __init__(self) -> None:
        self.total = 0
        self.in_window = 0
        self.acked = 0  # the last delivery tag acked (multiple), or every delivery (no_ack)


async def consume(link: Link, queue: str, args: argparse.Namespace, start: float,
                  stop: float, counter: Counter) -> None:  # fmt: skip
    link.send(commands.Basic.Qos(prefetch_count=args.prefetch))
    await link.expect(commands.Basic.QosOk)
    link.send(commands.Basic.Consume(queue=queue, consumer_tag="lean", no_ack=args.auto_ack))
    await link.expect(commands.Basic.ConsumeOk)
    # deliveries on one channel carry tags 1, 2, 3...: the count is the last tag
    ack_every = 0 if args.auto_ack else max(args.prefetch // 2, 1)
    acked, delivered, buf = 0, 0, link.buf
    read, write = link.reader.read, link.writer.write
    unpack_head, unpack_ids = HEAD.unpack_from, METHOD_IDS.unpack_from
    while True:
        data = await read(262144)
        if not data:
            raise ProtocolError("connection closed by the broker")
        buf = buf + data if buf else data
        at, end = 0, len(buf)
        before = delivered
        while end - at >= 7:
            kind, _ch, n = unpack_head(buf, at)
            nxt = at + n + 8
            if nxt > end:
                break
            if buf[nxt - 1] != FRAME_END:
                raise ProtocolError("frame end octet missing")
            if kind == 1:
                ids = unpack_ids(buf, at + 7)
                if ids == DELIVER:
                    delivered += 1
                else:
                    raise ProtocolError(f"unexpected method {ids} while consuming")
            at = nxt
        buf = buf[at:]
        now = time.monotonic()
        got = delivered - before
        counter.total += got
        if start <= now < stop:
            counter.in_window += got
        if ack_every and delivered - acked >= ack_every:
            write(ACK.pack(1, CHANNEL, 13, 60, 80, delivered, 1, FRAME_END))
            acked = counter.acked = delivered
        elif not ack_every:
            counter.acked = delivered
        if now >= stop:
            return


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    cpu0, wall0 = time.process_time(), time.monotonic()
    consumer = await Link.open(args.url, args.queue)
    producer = await Link.open(args.publish_url or args.url, args.queue)
    start = time.monotonic() + args.warmup
    stop = start + args.duration
    counter = Counter()
    consuming = asyncio.ensure_future(consume(consumer, args.queue, args, start, stop, counter))
    published = await produce(producer, args.queue, args, stop)
    # a consumer that has drained the queue waits for bytes that will not come: its
    # counts are kept as they stand
    done, _ = await asyncio.wait([consuming], timeout=2 + max(0.0, stop - time.monotonic()))
    if consuming in done:
        consuming.result()  # its error, if any
    else:
        consuming.cancel()
    producer.close()
    consumer.close()
    cpu = time.process_time() - cpu0
    return {
        "mode": "throughput",
        "client": "lean",
        "duration_s": args.duration,
        "size": args.size,
        "published": published,
        "consumed": counter.total,
        "consumed_in_window": counter.in_window,
        "acked": counter.acked,
        "publish_rate": round(published / (stop - wall0), 1),
        "consume_rate": round(counter.in_window / args.duration, 1),
        "client_cpu_s": round(cpu, 3),
        "client_cpu_us_per_msg": round(cpu / counter.total * 1e6, 2) if counter.total else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    parser.add_argument("--publish-url", help="the producer's broker (default: --url)")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds not counted")
    parser.add_argument("--batch", type=int, default=32, help="messages per write")
    parser.add_argument("--auto-ack", action="store_true", help="no_ack consumer")
    parser.add_argument("--json", action="store_true", help="(always JSON; for perf's flags)")
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(main_async(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
