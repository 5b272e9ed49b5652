"""STOMP throughput of Roost next to RabbitMQ's STOMP plugin (issue 4's benchmarks).

    .venv/bin/python bench/stomp_throughput.py [--brokers roost,rabbitmq] [--count 50000]
    .venv/bin/python bench/stomp_throughput.py --transport ws --repeat 3
    .venv/bin/python bench/stomp_throughput.py --fanout [--subscribers 20] [--count 5000]

One producer and one consumer, 1 KiB bodies, client-individual ACKs, prefetch 100, over
TCP (``--transport tcp``, the default) or Web-STOMP (``ws``: one STOMP frame per WebSocket
message, as browser clients send them). The client is a small asyncio STOMP client on
Roost's sans-IO codec, so the client library is not what is measured; the producer runs
in a process of its own. Each broker is started once; runs alternate between them and
the table shows medians and the ratio. Prints delivered-and-acked messages per second.

``--fanout``: one publisher on a ``/topic/``, ``--subscribers`` subscriptions (117-byte
bodies, auto ack) over TCP and over WebSocket; deliveries per second to all of them.
Subscribers are spread over ``--client-processes`` processes and the publisher has its
own, so one Python client process is not the limit. Its broker CPU per delivery counts
from the publisher's start to the last delivery; the "with set-up" column adds the
subscribers' connects, subscribes and closes, which weigh at a small ``--count``.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers  # a sibling module, not a package
from _measure import cpu_seconds, listener_pid

from roost.stomp.frame_encoding import serialize
from roost.stomp.frames import NEED_DATA, Frame, FrameParser

CONNECT = serialize(
    "CONNECT", {"accept-version": "1.2", "login": "guest", "passcode": "guest", "host": "/"}
)
SPAWN = multiprocessing.get_context("spawn")


class Conn:
    """One STOMP connection over TCP or WebSocket (``ws://…/ws``, both brokers' path)."""

    def __init__(self) -> None:
        self.parser = FrameParser()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._session: Any = None
        self._ws: Any = None
        self._unflushed = 0

    @classmethod
    async def open(cls, transport: str, port: int) -> Conn:
        conn = cls()
        if transport == "tcp":
            conn._reader, conn._writer = await asyncio.open_connection("127.0.0.1", port)
        else:
            import aiohttp

            conn._session = aiohttp.ClientSession()
            conn._ws = await conn._session.ws_connect(
                f"ws://127.0.0.1:{port}/ws", protocols=("v12.stomp",), max_msg_size=0
            )
        await conn.send(CONNECT)
        frame = await conn.next_frame()
        assert frame.command == "CONNECTED", frame
        return conn

    async def send(self, data: bytes) -> None:
        if self._ws is not None:
            await self._ws.send_bytes(data)
            return
        assert self._writer is not None
        self._writer.write(data)
        self._unflushed += len(data)
        if self._unflushed > 65536:
            self._unflushed = 0
            await self._writer.drain()

    async def recv(self) -> bytes:
        """The next chunk of bytes from the broker."""
        if self._ws is not None:
            msg = await self._ws.receive()
            if msg.data is None or isinstance(msg.data, Exception):
                raise ConnectionError(f"WebSocket closed: {msg.type}")
            return msg.data.encode() if isinstance(msg.data, str) else bytes(msg.data)
        assert self._reader is not None
        data = await self._reader.read(262144)
        if not data:
            raise ConnectionError("closed")
        return data

    async def next_frame(self) -> Frame:
        while True:
            frame = self.parser.next_frame()
            if frame is not NEED_DATA:
                assert isinstance(frame, Frame)
                return frame
            self.parser.feed(await self.recv())

    async def disconnect(self) -> None:
        """DISCONNECT and wait for its RECEIPT: every frame before it was processed.
        (Leaving on drain() alone could drop the tail still in the transport's buffer,
        and the consumer would wait for ever.)"""
        await self.send(serialize("DISCONNECT", {"receipt": "bye"}))
        # RabbitMQ's Web-STOMP closes without the RECEIPT: the close means the same
        with contextlib.suppress(ConnectionError):
            while (await self.next_frame()).command != "RECEIPT":
                pass
        await self.close()

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            await self._session.close()
        elif self._writer is not None:
            self._writer.close()


async def produce(
    transport: str,
    port: int,
    destination: str,
    count: int,
    body: bytes,
    started: Any = None,
    rate: int = 0,
) -> None:
    """SEND ``count`` frames without receipts: as fast as TCP takes them, or with ``rate``
    at that many a second (a tick's worth every millisecond, as a busy client sends)."""
    conn = await Conn.open(transport, port)
    frame = serialize("SEND", {"destination": destination}, body)
    if started is not None:
        started.put(time.monotonic())
    if not rate:
        for _ in range(count):
            await conn.send(frame)
    else:
        per_tick = max(1, rate // 1000)
        begun = time.monotonic()
        sent = 0
        while sent < count:
            for _ in range(min(per_tick, count - sent)):
                await conn.send(frame)
            sent = min(count, sent + per_tick)
            ahead = begun + sent / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
    await conn.disconnect()


def _produce_process(
    transport: str,
    port: int,
    destination: str,
    count: int,
    size: int,
    started: Any = None,
    rate: int = 0,
) -> None:
    asyncio.run(produce(transport, port, destination, count, b"x" * size, started, rate))


async def consume(transport: str, port: int, queue: str, count: int) -> float:
    conn = await Conn.open(transport, port)
    await conn.send(serialize("SUBSCRIBE", {
        "id": "b", "destination": f"/queue/{queue}", "ack": "client-individual",
        "prefetch-count": "100",
    }))
    got = 0
    start = 0.0
    while got < count:
        frame = await conn.next_frame()
        if frame.command != "MESSAGE":
            raise RuntimeError(f"unexpected {frame}")
        if got == 0:
            start = time.perf_counter()
        got += 1
        await conn.send(serialize("ACK", {"id": frame.headers["ack"]}))
    elapsed = time.perf_counter() - start
    await conn.close()
    return (count - 1) / elapsed


async def run_once(port: int, count: int, transport: str = "tcp", rate: int = 0) -> float:
    queue = f"bench-{time.monotonic_ns()}"
    consumer = asyncio.create_task(consume(transport, port, queue, count))
    await asyncio.sleep(0.3)  # the subscription declares the queue first
    producer = SPAWN.Process(
        target=_produce_process,
        args=(transport, port, f"/queue/{queue}", count, 1024, None, rate),
    )
    producer.start()
    try:
        return await consumer
    finally:
        await asyncio.to_thread(producer.join)


# -- topic fan-out ------------------------------------------------------------------------


async def fanout_group(
    transport: str, port: int, topic: str, subs: int, count: int, ready: Any, done: Any
) -> None:
    """``subs`` subscriptions in this process; each counts ``count`` MESSAGE frames.
    Frames are counted by their NUL terminators (117 bytes of 'x' hold none), which costs
    the client far less than parsing them."""
    conns = []
    for i in range(subs):
        conn = await Conn.open(transport, port)
        await conn.send(serialize(
            "SUBSCRIBE", {"id": f"f{i}", "destination": f"/topic/{topic}", "receipt": "r"}
        ))
        assert (await conn.next_frame()).command == "RECEIPT"
        conns.append(conn)
    ready.put(subs)

    async def count_messages(conn: Conn) -> None:
        got = 0
        while got < count:
            got += (await conn.recv()).count(b"\x00")

    await asyncio.gather(*(count_messages(c) for c in conns))
    done.put(time.monotonic())
    for conn in conns:
        await conn.close()


def _fanout_process(
    transport: str, port: int, topic: str, subs: int, count: int, ready: Any, done: Any
) -> None:
    asyncio.run(fanout_group(transport, port, topic, subs, count, ready, done))


def run_fanout(
    ports: dict[str, int], transport: str, subscribers: int, count: int, processes: int,
    pid: int,
) -> tuple[float, float]:
    """(deliveries per second, the broker's CPU seconds from the publisher's start to the
    last delivery: the subscribers' connects and subscribes before, their closes after,
    are left out)."""
    topic = f"fan.{time.monotonic_ns()}"
    ready, done = SPAWN.Queue(), SPAWN.Queue()
    sizes = [subscribers // processes + (i < subscribers % processes) for i in range(processes)]
    groups = [
        SPAWN.Process(
            target=_fanout_process,
            args=(transport, ports[transport], topic, n, count, ready, done),
        )
        for n in sizes
        if n
    ]
    for group in groups:
        group.start()
    subscribed = 0
    while subscribed < subscribers:
        subscribed += ready.get(timeout=60)
    started = SPAWN.Queue()
    cpu0 = cpu_seconds(pid)
    publisher = SPAWN.Process(
        target=_produce_process,
        args=(transport, ports[transport], f"/topic/{topic}", count, 117, started),
    )
    publisher.start()
    start = started.get(timeout=60)  # connected, about to send the first message
    end = max(done.get(timeout=600) for _ in groups)
    cpu = cpu_seconds(pid) - cpu0
    publisher.join()
    for group in groups:
        group.join()
    return subscribers * count / (end - start), cpu


# -- brokers and main ---------------------------------------------------------------------


def _launcher(
    name: str, port: int, ws_port: int
) -> contextlib.AbstractContextManager[object] | None:
    if name in ("roost", "roost-pure"):  # roost-pure: ROOST_PURE_PYTHON=1 (docs/compiled.md)
        return _brokers.roost(
            "--stomp-port", str(port), "--ws-port", str(ws_port), "--http-port", "0",
            "--mqtt-port", "0", "--mqtt-ws-port", "0",
            "--stream-port", "0",
            env={"ROOST_PURE_PYTHON": "1"} if name == "roost-pure" else None,
        )
    if name == "rabbitmq":
        if not _brokers.rabbitmq_installed():
            print("rabbitmq: not installed, skipped")
            return None
        return _brokers.rabbitmq(
            plugins=("rabbitmq_stomp", "rabbitmq_web_stomp"),
            extra_conf=(
                f"stomp.listeners.tcp.1 = 127.0.0.1:{port}\n"
                f"web_stomp.tcp.port = {ws_port}\nweb_stomp.tcp.ip = 127.0.0.1\n"
            ),
        )
    raise SystemExit(f"unknown broker {name}")


def _retry(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, again while the listener is not up yet (a refused connection is an
    OSError; ``listener_pid`` finding nobody on the port yet is a RuntimeError)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return fn(*args)
        except (OSError, RuntimeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--count", type=int, help="messages a run (default 50000; fan-out 5000)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--transport", choices=("tcp", "ws"), default="tcp")
    ap.add_argument("--fanout", action="store_true",
                    help="topic fan-out instead: 1 publisher, --subscribers, 117 B, TCP and WS")
    ap.add_argument("--subscribers", type=int, default=20)
    ap.add_argument("--fanout-transports", default="tcp,ws",
                    help="the transports the fan-out runs over (tcp, ws or both)")
    ap.add_argument("--client-processes", type=int, default=4,
                    help="processes the fan-out subscribers are spread over")
    args = ap.parse_args()
    count = args.count or (5000 if args.fanout else 50000)
    rates: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}  # the broker's CPU µs per message delivered
    with contextlib.ExitStack() as stack:
        brokers: dict[str, dict[str, int]] = {}
        for name in args.brokers.split(","):
            ports = {"tcp": _brokers.free_port(), "ws": _brokers.free_port()}
            launcher = _launcher(name, ports["tcp"], ports["ws"])
            if launcher is not None:
                stack.enter_context(launcher)
                brokers[name] = ports
        if args.fanout:
            return fanout(args, brokers, count)
        for name in brokers:
            rates[name], cpus[name] = [], []
        for _ in range(args.repeat):
            for name, ports in brokers.items():
                port = ports[args.transport]
                pid = _retry(listener_pid, ports["tcp"])
                cpu0 = cpu_seconds(pid)
                rate = _retry(lambda p: asyncio.run(run_once(p, count, args.transport)), port)
                rates[name].append(rate)
                cpus[name].append((cpu_seconds(pid) - cpu0) / count * 1e6)
    print(f"1 producer / 1 consumer over {args.transport}, 1 KiB, client-individual, "
          f"prefetch 100, {count} messages, {args.repeat} runs")
    print(f"{'broker':10} {'median msg/s':>13} {'CPU µs/msg':>11}  runs")
    for name, got in rates.items():
        runs = ", ".join(f"{r:,.0f}" for r in got)
        print(f"{name:10} {statistics.median(got):>13,.0f} "
              f"{statistics.median(cpus[name]):>11.1f}  {runs}")
    if "roost" in rates and "rabbitmq" in rates:
        ratio = statistics.median(rates["roost"]) / statistics.median(rates["rabbitmq"])
        print(f"ratio roost / rabbitmq: {ratio:.2f}")
    return 0


def fanout(args: argparse.Namespace, brokers: dict[str, dict[str, int]], count: int) -> int:
    print(f"topic fan-out: 1 publisher, {args.subscribers} subscribers in "
          f"{args.client_processes} processes, 117 B, {count} messages, {args.repeat} runs")
    # CPU µs/delivery: from the publisher's start to the last delivery; "with set-up" also
    # counts the subscribers' connects, subscribes and closes (weighty at small --count)
    print(f"{'broker':10} {'transport':9} {'median deliveries/s':>20} "
          f"{'CPU µs/delivery':>16} {'with set-up':>12}  runs")
    for transport in args.fanout_transports.split(","):
        for name, ports in brokers.items():
            pid = _retry(listener_pid, ports["tcp"])
            got, cpu, whole = [], [], []
            deliveries = count * args.subscribers
            for _ in range(args.repeat):
                cpu0 = cpu_seconds(pid)
                rate, window = _retry(run_fanout, ports, transport, args.subscribers, count,
                                      args.client_processes, pid)
                got.append(rate)
                cpu.append(window / deliveries * 1e6)
                whole.append((cpu_seconds(pid) - cpu0) / deliveries * 1e6)
            runs = ", ".join(f"{r:,.0f}" for r in got)
            print(f"{name:10} {transport:9} {statistics.median(got):>20,.0f} "
                  f"{statistics.median(cpu):>16.2f} {statistics.median(whole):>12.2f}  {runs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
