"""STOMP prefix subscriptions: 1,000 subscribers on 1,000 distinct prefixes, one publisher
whose every topic matches exactly one of them; deliveries/s and broker CPU per message.

    .venv/bin/python bench/prefix_bench.py [--subscribers 1000] [--duration 10]
        [--repeat 3] [--brokers roost,rabbitmq] [--modes prefix,words]

Each subscriber is a connection of its own with one subscription: ``prefix`` mode
subscribes ``/topic/sensorNNNN*`` (Roost's prefix subscription), ``words`` mode
``/topic/sensorNNNN.#`` (a topic pattern, the nearest thing RabbitMQ's STOMP plugin has:
it treats ``sensorNNNN*`` as one literal word, so RabbitMQ runs ``words`` only). The
publisher sends 1 KiB SENDs to ``/topic/sensorNNNN.temp``, NNNN cycling over the
subscribers, in windows of 100 frames whose last asks for a RECEIPT (a publisher that
does not outrun the broker, so that the figure is routing and delivery cost rather than
a queue's growth). Figures: messages published/s, deliveries/s (MESSAGE frames the
subscribers received, over the time until the last arrived), broker CPU (user + system)
per published message from the publisher's first frame to the last delivery, and broker
RSS with the subscribers connected. A table of medians over ``--repeat`` runs, brokers
alternating.
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
import _brokers  # sibling modules, not a package
from _measure import cpu_seconds, listener_pid, rss_mb

SPAWN = multiprocessing.get_context("spawn")
CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nhost:/\n\n\x00"
WINDOW = 100


def _destination(mode: str, i: int) -> str:
    return f"/topic/sensor{i:04d}*" if mode == "prefix" else f"/topic/sensor{i:04d}.#"


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(CONNECT)
    data = b""
    while b"\x00" not in data:
        data += await reader.read(4096)
    assert data.startswith(b"CONNECTED"), data
    return reader, writer


async def _subscribers(port: int, n: int, mode: str, conn: Any) -> None:
    """Open ``n`` subscribed connections, say so, then count the frames they receive
    (a frame ends with NUL; bodies here have none) until told to stop."""
    pairs = []
    for i in range(n):
        reader, writer = await _open(port)
        dest = _destination(mode, i)
        writer.write(f"SUBSCRIBE\nid:s{i}\ndestination:{dest}\nreceipt:r\n\n\x00".encode())
        data = b""
        while b"\x00" not in data:
            data += await reader.read(4096)
        assert data.startswith(b"RECEIPT"), data
        pairs.append((reader, writer))
    received = [0]

    async def count(reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(262144):
                received[0] += data.count(b"\x00")

    tasks = [asyncio.create_task(count(r)) for r, _ in pairs]
    conn.send("ready")
    stop = asyncio.get_running_loop().run_in_executor(None, conn.recv)
    while not stop.done():
        conn.send(received[0])
        await asyncio.wait([stop], timeout=0.05)
    for task in tasks:
        task.cancel()
    for _, writer in pairs:
        writer.close()


def _subscriber_process(port: int, n: int, mode: str, conn: Any) -> None:
    asyncio.run(_subscribers(port, n, mode, conn))


async def _publish(port: int, n: int, duration: float, conn: Any) -> None:
    reader, writer = await _open(port)
    body = b"x" * 1024
    frames = [
        f"SEND\ndestination:/topic/sensor{i:04d}.temp\ncontent-length:1024\n\n".encode()
        + body + b"\x00"
        for i in range(n)
    ]
    published = 0
    started = time.monotonic()
    while time.monotonic() - started < duration:
        batch = [frames[(published + k) % n] for k in range(WINDOW - 1)]
        last = frames[(published + WINDOW - 1) % n]
        batch.append(last.replace(b"SEND\n", b"SEND\nreceipt:w\n", 1))
        writer.write(b"".join(batch))
        published += WINDOW
        data = b""
        while b"RECEIPT" not in data:
            chunk = await reader.read(4096)
            if not chunk:
                raise ConnectionError("publisher closed")
            data += chunk
    conn.send((published, time.monotonic() - started))
    writer.close()


def _publisher_process(port: int, n: int, duration: float, conn: Any) -> None:
    asyncio.run(_publish(port, n, duration, conn))


def run_once(port: int, n: int, mode: str, duration: float) -> dict[str, float]:
    pid = listener_pid(port)
    sub_end, sub_conn = SPAWN.Pipe()
    subs = SPAWN.Process(target=_subscriber_process, args=(port, n, mode, sub_conn))
    subs.start()
    assert sub_end.recv() == "ready"
    rss = rss_mb(pid)
    pub_end, pub_conn = SPAWN.Pipe()
    cpu0 = cpu_seconds(pid)
    started = time.monotonic()
    pub = SPAWN.Process(target=_publisher_process, args=(port, n, duration, pub_conn))
    pub.start()
    published, _ = pub_end.recv()
    pub.join()
    received = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        while sub_end.poll():
            received = sub_end.recv()
        if received >= published:
            break
        time.sleep(0.01)
    ended = time.monotonic()
    cpu = cpu_seconds(pid) - cpu0
    sub_end.send("stop")
    subs.join(30)
    if received != published:
        raise RuntimeError(f"{mode}: {received} deliveries for {published} messages")
    return {
        "published/s": published / (ended - started),
        "deliveries/s": received / (ended - started),
        "cpu_us": cpu / published * 1e6,
        "rss": rss,
    }


def _launcher(name: str, port: int) -> contextlib.AbstractContextManager[object]:
    if name == "roost":
        return _brokers.roost("--stomp-port", str(port), "--http-port", "0")
    return _brokers.rabbitmq(
        plugins=("rabbitmq_stomp",), extra_conf=f"stomp.listeners.tcp.1 = 127.0.0.1:{port}\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--modes", default="prefix,words")
    args = ap.parse_args()
    cases = [
        (broker, mode)
        for broker in args.brokers.split(",")
        for mode in args.modes.split(",")
        if not (broker == "rabbitmq" and mode == "prefix")  # no prefix subscriptions there
    ]
    if "rabbitmq" in args.brokers and not _brokers.rabbitmq_installed():
        print("rabbitmq: not installed, skipped", file=sys.stderr)
        cases = [c for c in cases if c[0] != "rabbitmq"]
    results: dict[tuple[str, str], list[dict[str, float]]] = {c: [] for c in cases}
    for run in range(args.repeat):
        for broker, mode in cases:
            port = _brokers.free_port()
            with _launcher(broker, port):
                _wait(port)
                figures = run_once(port, args.subscribers, mode, args.duration)
            print(f"run {run + 1} {broker} {mode}: {figures}", file=sys.stderr, flush=True)
            results[broker, mode].append(figures)
    print(f"\n{args.subscribers:,} STOMP subscribers on distinct topics, one publisher "
          f"(1 KiB, receipt per {WINDOW}), {args.duration:g} s, medians of {args.repeat}\n")
    print("| broker | subscription | published/s | deliveries/s | broker CPU per message "
          "| broker RSS, subscribed |")
    print("|---|---|---|---|---|---|")
    for (broker, mode), runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {_brokers.TITLES[broker]} | `{_destination(mode, 0).replace('0000', 'NNNN')}` "
              f"| {med['published/s']:,.0f} | {med['deliveries/s']:,.0f} "
              f"| {med['cpu_us']:,.1f} us | {med['rss']:,.0f} MB |")
    return 0


def _wait(port: int) -> None:
    """Until the STOMP listener takes connections (RabbitMQ's plugin starts after AMQP)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            listener_pid(port)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
