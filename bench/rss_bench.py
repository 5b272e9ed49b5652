"""Broker memory per idle connection, per declared queue (issue 8) and per STOMP topic
subscription (issue 19), Roost next to RabbitMQ: the resident set size of the broker
process idle, with N idle AMQP connections (each with one channel open), with Q declared
non-durable queues, and with S STOMP subscriptions to distinct topics (``/topic/rss.N``,
``ack:auto``, or ``--sub-ack client-individual`` / ``client``, ``--sub-destination
/exchange/amq.topic/`` for another form) spread over ``--sub-connections`` connections.

    .venv/bin/python bench/rss_bench.py [--brokers roost,rabbitmq] [--connections 1000,5000]
        [--queues 100000] [--subscriptions 100000] [--sub-connections 250] [--repeat 1]
        [--sub-ack auto] [--sub-destination /topic/]
    .venv/bin/python bench/rss_bench.py --churn [20000,5000,5000]
    .venv/bin/python bench/rss_bench.py --idle-cycles 2000,8

``--churn AMQP,STOMP,WS``: memory under connection churn instead (bench/_churn_rss.py):
short-lived connections of the three protocols, closed every way, RSS after every
1,000, and what the management API still lists at the end. ``--idle-cycles N,CYCLES``:
N idle AMQP connections opened, held a second and closed cleanly, CYCLES times on one
broker, RSS after each cycle (issue 19's first churn finding).

Every measurement starts a fresh broker (memory a broker freed is not always given back,
so a second measurement on the same process would be skewed). The load comes from a
client subprocess (``--client``) on Roost's small asyncio AMQP client (``roost.client``), which
opens the connections, or declares the queues pipelined with ``nowait`` on a few
connections and then waits for one synchronous declare per connection. RSS is read from
``/proc/PID/status`` (``VmRSS``) of the process listening on the broker's port
(``beam.smp`` for RabbitMQ) after the load is in place and a second to settle.
LavinMQ's published figures, for context: 8,000 connections in 400 MB, 100,000 queues in
100 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers  # sibling modules, not a package
import _churn_rss
from _measure import broker_pid, rss_mb

SETTLE_S = 1.0
DECLARE_CONNECTIONS = 4
DECLARE_WAIT_S = 900


# -- the load: a client subprocess -------------------------------------------------------


async def _client(url: str, connections: int, queues: int, close: bool = False) -> None:
    from roost.amqp import codec_methods as m
    from roost.amqp.codec import encode_method_frame
    from roost.client import Connection, connect

    async def with_channel() -> Connection:  # each connection with one channel open
        conn = await connect(url)
        await conn.channel()
        return conn

    opened: list[Connection] = []
    for i in range(0, connections, 100):  # in waves: a listen backlog is finite
        batch = [with_channel() for _ in range(min(100, connections - i))]
        opened += await asyncio.gather(*batch)
    if queues:
        conns = [await connect(url) for _ in range(DECLARE_CONNECTIONS)]
        channels = [await conn.channel() for conn in conns]
        for c, ch in enumerate(channels):
            names = range(c, queues, len(conns))
            frames = [encode_method_frame(ch.number, m.QueueDeclare(queue=f"rss-{n}",
                                                                    nowait=True))
                      for n in names]
            for i in range(0, len(frames), 1000):
                ch.conn.write(b"".join(frames[i : i + 1000]))
                await asyncio.sleep(0)
        for ch in channels:  # in order on each channel: this one answers after the rest
            # (a long timeout: RabbitMQ needs minutes for 100,000 queues)
            await asyncio.wait_for(ch.queue_declare("rss-sync"), DECLARE_WAIT_S)
        opened += conns
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    if close:  # connection.close and its close-ok, as a pool or a cron job ends
        await asyncio.gather(*(conn.close() for conn in opened))
        return
    for conn in opened:
        if conn.transport is not None:
            conn.transport.abort()


def idle_cycles(broker: str, connections: int, cycles: int) -> tuple[float, list[float]]:
    """``--idle-cycles``: on one broker, ``connections`` idle AMQP connections (one
    channel each) opened, held a second and closed cleanly, ``cycles`` times; the
    broker's RSS idle and after each cycle (once it had a second to let go)."""
    with _brokers.LAUNCHERS[broker]() as url:
        pid = broker_pid(url)
        time.sleep(SETTLE_S)
        idle, after = rss_mb(pid), []
        for cycle in range(cycles):
            load = _spawn([sys.executable, __file__, "--client", url, str(connections), "0",
                           "close"])
            time.sleep(1.0)  # held a second
            load.communicate("\n", timeout=120)
            time.sleep(SETTLE_S)
            after.append(rss_mb(pid))
            print(f"{broker}: cycle {cycle + 1}, RSS {after[-1]:.1f} MB", file=sys.stderr)
    return idle, after


async def _subscriber(
    port: int, connections: int, subscriptions: int, ack: str, prefix: str
) -> None:
    """STOMP connections, each subscribing to its share of distinct topics (pipelined,
    then one RECEIPT per connection says they are all in place)."""
    opened = []
    for c in range(connections):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nhost:/\n\n\0")
        opened.append((reader, writer))
        if c % 50 == 49:
            await asyncio.sleep(0.05)  # a listen backlog is finite
    for reader, _ in opened:
        data = b""
        while b"\0" not in data:
            data += await reader.read(4096)
        assert data.startswith(b"CONNECTED"), data
    for c, (_reader, writer) in enumerate(opened):
        ack_line = "" if ack == "auto" else f"ack:{ack}\n"
        frames = [f"SUBSCRIBE\nid:s{n}\ndestination:{prefix}rss.{n}\n{ack_line}\n\0".encode()
                  for n in range(c, subscriptions, connections)]
        frames.append(b"SUBSCRIBE\nid:last\ndestination:/topic/rss.last\nreceipt:r\n\n\0")
        for i in range(0, len(frames), 500):
            writer.write(b"".join(frames[i : i + 500]))
            await writer.drain()
    for reader, _ in opened:  # (RabbitMQ takes minutes for 100,000 of them)
        data = b""
        while b"RECEIPT" not in data:
            chunk = await asyncio.wait_for(reader.read(65536), DECLARE_WAIT_S)
            if not chunk:
                raise ConnectionError(f"closed: {data[-300:]!r}")
            data += chunk
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    for _, writer in opened:
        writer.transport.abort()


def _load(url: str, connections: int, queues: int) -> subprocess.Popen[str]:
    return _spawn([sys.executable, __file__, "--client", url, str(connections), str(queues)])


def _spawn(cmd: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"load client failed (exit {proc.wait()})")
    return proc


def _stomp_launcher(broker: str, port: int) -> contextlib.AbstractContextManager[str]:
    if broker == "roost":
        return _brokers.roost("--stomp-port", str(port))
    if broker == "roost-pure":  # (it fell through to RabbitMQ before)
        return _brokers.roost("--stomp-port", str(port), env={"ROOST_PURE_PYTHON": "1"})
    return _brokers.rabbitmq(
        plugins=("rabbitmq_stomp",), extra_conf=f"stomp.listeners.tcp.1 = 127.0.0.1:{port}\n"
    )


def measure(
    broker: str, connections: int, queues: int, subscriptions: int = 0, sub_connections: int = 0,
    sub_ack: str = "auto", sub_destination: str = "/topic/",
) -> tuple[float, float]:
    """(idle RSS MB, RSS MB with the load) on a fresh broker."""
    port = _brokers.free_port()
    launcher = (_stomp_launcher(broker, port) if subscriptions
                else _brokers.LAUNCHERS[broker]())
    with launcher as url:
        pid = broker_pid(url)
        time.sleep(SETTLE_S)
        if subscriptions:  # RabbitMQ's STOMP listener comes up after its AMQP one
            _wait_listening(port)
        idle = rss_mb(pid)
        if subscriptions:
            load = _spawn([sys.executable, __file__, "--subscriber", str(port),
                           str(sub_connections), str(subscriptions), sub_ack, sub_destination])
        else:
            load = _load(url, connections, queues)
        try:
            time.sleep(SETTLE_S)
            loaded = rss_mb(pid)
        finally:
            load.communicate("\n", timeout=60)  # the client lets go, exits; pipes closed
    return idle, loaded


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        url, n, q, *close = sys.argv[2:]
        asyncio.run(_client(url, int(n), int(q), close == ["close"]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--subscriber":
        _, _, port, n, s, ack, prefix = sys.argv
        asyncio.run(_subscriber(int(port), int(n), int(s), ack, prefix))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--churn-client":
        url, stomp, ws, *counts = sys.argv[2:]
        _churn_rss.client(url, int(stomp), int(ws), *map(int, counts))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--connections", default="1000,5000")
    ap.add_argument("--queues", type=int, default=100_000)
    ap.add_argument("--subscriptions", type=int, default=0,
                    help="STOMP topic subscriptions (e.g. 100000); 0: none")
    ap.add_argument("--sub-connections", type=int, default=250)
    ap.add_argument("--sub-ack", default="auto", choices=("auto", "client", "client-individual"),
                    help="the subscriptions' ack mode")
    ap.add_argument("--sub-destination", default="/topic/", metavar="PREFIX",
                    help="their destinations' prefix, e.g. /exchange/amq.topic/")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--churn", nargs="?", const="20000,5000,5000", metavar="AMQP,STOMP,WS",
                    help="connection churn instead (default 20000,5000,5000)")
    ap.add_argument("--idle-cycles", metavar="N,CYCLES",
                    help="N idle AMQP connections opened, held 1 s, closed; CYCLES times")
    args = ap.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # brokers inherit it
    brokers = [b for b in args.brokers.split(",") if b]
    if "rabbitmq" in brokers and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: skipped", file=sys.stderr)
        brokers.remove("rabbitmq")
    if args.churn:
        a, s, w = (int(n) for n in args.churn.split(","))
        results = {b: _churn_rss.measure(b, __file__, (a, s, w)) for b in brokers}
        _churn_rss.report(results, (a, s, w))
        return 0
    if args.idle_cycles:
        n, cycles = (int(v) for v in args.idle_cycles.split(","))
        got = {b: idle_cycles(b, n, cycles) for b in brokers}
        print(f"{n:,} idle AMQP connections opened, held 1 s and closed, {cycles} times: "
              "broker RSS MB")
        print("| broker | idle | " + " | ".join(f"cycle {c + 1}" for c in range(cycles))
              + " | last - first cycle |")
        print("|---|" + "---:|" * (cycles + 2))
        for b, (idle, after) in got.items():
            print(f"| {_brokers.TITLES[b]} | {idle:.1f} | "
                  + " | ".join(f"{v:.1f}" for v in after) + f" | {after[-1] - after[0]:+.1f} |")
        return 0
    loads = [(int(n), 0, 0) for n in args.connections.split(",") if n]
    if args.queues:
        loads.append((0, args.queues, 0))
    if args.subscriptions:
        loads.append((0, 0, args.subscriptions))
    rows: dict[tuple[int, int, int], dict[str, list[tuple[float, float]]]] = {}
    for rep in range(args.repeat):
        for load in loads:
            for broker in brokers if rep % 2 == 0 else brokers[::-1]:
                print(f"{broker}: {load[0]} connections, {load[1]} queues, {load[2]} "
                      "subscriptions", file=sys.stderr)
                got = measure(broker, load[0], load[1], load[2], args.sub_connections,
                              args.sub_ack, args.sub_destination)
                count = load[0] or load[1] or load[2]
                print(f"  idle {got[0]:.1f} MB, loaded {got[1]:.1f} MB, "
                      f"{(got[1] - got[0]) * 2**20 / count:,.0f} B per item", file=sys.stderr)
                rows.setdefault(load, {}).setdefault(broker, []).append(got)
    print("| load | " + " | ".join(
        f"{_brokers.TITLES[b]} idle / loaded MB | {_brokers.TITLES[b]} per item"
        for b in brokers) + (" | per-item ratio |" if len(brokers) == 2 else " |"))
    print("|---|" + "---|---|" * len(brokers) + ("---|" if len(brokers) == 2 else ""))
    for (n, q, subs), per in rows.items():
        count = n or q or subs
        label = (f"{n:,} idle connections" if n else f"{q:,} queues" if q else
                 f"{subs:,} STOMP topic subscriptions ({args.sub_connections} connections"
                 + (f", ack:{args.sub_ack}" if args.sub_ack != "auto" else "")
                 + (f", {args.sub_destination}" if args.sub_destination != "/topic/" else "")
                 + ")")
        cells, each = [], []
        for b in brokers:
            idle = statistics.median(i for i, _ in per[b])
            loaded = statistics.median(v for _, v in per[b])
            item = (loaded - idle) * 2**20 / count
            each.append(item)
            cells += [f"{idle:,.0f} / {loaded:,.0f}", f"{item / 1024:,.1f} KiB"]
        ratio = [f"{each[0] / each[1]:.2f}"] if len(each) == 2 and each[1] > 0 else []
        print("| " + " | ".join([label, *cells, *ratio]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
