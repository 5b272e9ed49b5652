"""Two load shapes users produce, Roost next to RabbitMQ in the same run, with the broker's
RSS and a loss/starvation check beside the rates.

    .venv/bin/python bench/shapes_bench.py [--scenarios idle-hot,slow] [--brokers roost,rabbitmq]
        [--idle 2000] [--heartbeat 2] [--rate 5000] [--duration 10] [--repeat 1]
        [--slow-prefetch 10,0]

* ``idle-hot``: a hot pair (``roost perf``: 1 producer, 1 consumer, 1 KiB, prefetch 100,
  manual acks, ``--rate`` msg/s; 0 = a producer that never waits) runs alone, then again
  while ``--idle`` AMQP connections (one channel each) sit idle in another process with
  ``--heartbeat`` s heartbeats (each side sends one every half of it: 2,000 connections
  at 2 s are 2,000 heartbeat frames a second each way). Shown: the pair's delivered msg/s
  and p50/p99 latency both ways, the broker's RSS with the idle connections open, and how
  many idle connections the broker dropped (a broker too busy to read heartbeats in time
  closes them: must be 0).
* ``slow``: per ``--slow-prefetch`` value (0: unlimited), a producer that never waits
  feeds queue A, whose one consumer takes 10 ms per message (``--consumer-latency``,
  i.e. at most 100 msg/s) and acks it, while a fast pair (prefetch 100, manual acks, its
  producer never waits either) runs on queue B. Queue A grows for the whole run. Shown:
  the fast pair's msg/s next to its rate alone (same broker, same run), the slow
  consumer's msg/s, the broker's peak and final RSS, and A's messages unaccounted for
  (published - acked - left in the queue; must be 0 or below: below 0 are deliveries
  taken but not acked at close, requeued).

Each broker is started once per scenario; runs alternate brokers. The hot pair and the
slow/fast pairs are ``roost perf`` (the project's PerfTest), one process each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers  # sibling modules, not a package
from _measure import broker_pid, rss_mb

SPAWN = multiprocessing.get_context("spawn")
SCENARIOS = ("idle-hot", "slow")


def perf(url: str, queue: str, duration: float, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "roost", "perf", "--url", url, "--duration", str(duration),
           "--queue", queue, "--size", "1024", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def report(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"roost perf exited with {proc.returncode} and no report")
    got: dict[str, Any] = json.loads(lines[-1])
    return got


class RssSampler:
    """The broker's VmRSS every 0.1 s in a thread: peak and last."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.last = pid, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.last = rss_mb(self.pid)
            self.peak = max(self.peak, self.last)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.last = rss_mb(self.pid)
        self.peak = max(self.peak, self.last)


# -- idle connections with heartbeats ------------------------------------------------------


def idle_holder(url: str, n: int, heartbeat: int, conn: Any) -> None:
    """Open ``n`` connections (one channel each), tell the parent, hold them until it says
    stop, then report how many the broker ended."""
    asyncio.run(_hold(url, n, heartbeat, conn))


async def _hold(url: str, n: int, heartbeat: int, pipe: Any) -> None:
    from roost.client.aio import connect

    async def one(i: int) -> Any:
        c = await connect(url, name=f"idle-{i}", heartbeat=heartbeat)
        await c.channel()
        return c

    conns: list[Any] = []
    for start in range(0, n, 100):
        conns += await asyncio.gather(*(one(i) for i in range(start, min(n, start + 100))))
    pipe.send(len(conns))
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, pipe.recv)
    lost = sum(1 for c in conns if c.closed.done())
    pipe.send(lost)
    for c in conns:
        if c.transport is not None:
            c.transport.abort()


def idle_hot_once(url: str, pid: int, args: argparse.Namespace) -> dict[str, float]:
    hot = ("--producers", "1", "--consumers", "1", "--prefetch", "100", "--rate", str(args.rate))
    q = f"hot-{time.monotonic_ns()}"
    alone = report(perf(url, q, args.duration, *hot), args.duration + 120)
    parent, child = SPAWN.Pipe()
    holder = SPAWN.Process(target=idle_holder, args=(url, args.idle, args.heartbeat, child))
    holder.start()
    try:
        if not parent.poll(300):
            raise RuntimeError("the idle connections did not open")
        opened = parent.recv()
        with RssSampler(pid) as rss:
            busy = report(perf(url, q + "-idle", args.duration, *hot), args.duration + 120)
        parent.send("stop")
        lost = parent.recv() if parent.poll(60) else -1
    finally:
        holder.join(30)
        if holder.is_alive():
            holder.kill()
            holder.join()
    return {
        "alone": alone["consume_rate"], "alone_p50": alone["latency_us"]["p50"],
        "alone_p99": alone["latency_us"]["p99"], "busy": busy["consume_rate"],
        "busy_p50": busy["latency_us"]["p50"], "busy_p99": busy["latency_us"]["p99"],
        "rss": rss.peak, "opened": opened, "lost": lost,
    }


# -- a slow consumer beside a fast pair ----------------------------------------------------


async def _depth(url: str, queue: str) -> int:
    from roost.client.aio import connect

    c = await connect(url)
    try:
        ch = await c.channel()
        ok = await ch.queue_declare(queue, passive=True)
        await ch.queue_delete(queue)
        return int(ok.message_count)
    finally:
        await c.close()


def slow_consumer(url: str, queue: str, prefetch: int, acked: Any, ready: Any,
                  stop: Any) -> None:
    asyncio.run(_slow_consume(url, queue, prefetch, acked, ready, stop))


async def _slow_consume(url: str, queue: str, prefetch: int, acked: Any, ready: Any,
                        stop: Any) -> None:
    """Take 10 ms per message, then ack it; with prefetch 0 the broker sends all it has."""
    from roost.client.aio import connect

    c = await connect(url)
    ch = await c.channel()
    if prefetch:
        await ch.qos(prefetch)
    tags: asyncio.Queue[int] = asyncio.Queue()
    await ch.consume(queue, lambda msg: tags.put_nowait(msg.delivery_tag))
    ready.set()
    while not stop.is_set():
        try:
            tag = await asyncio.wait_for(tags.get(), 0.5)
        except TimeoutError:
            continue
        await asyncio.sleep(0.01)
        ch.ack(tag)
        acked.value += 1
    await c.close(timeout=30)  # the acks written go first; the rest is requeued


def slow_once(url: str, pid: int, prefetch: int, args: argparse.Namespace) -> dict[str, float]:
    tag = time.monotonic_ns()
    slow_q = f"slow-{tag}"
    fast = ("--producers", "1", "--consumers", "1", "--prefetch", "100")
    alone = report(perf(url, f"fast-alone-{tag}", args.duration, *fast), args.duration + 120)
    asyncio.run(_declare(url, slow_q))  # ours: perf would delete it at the end
    acked, ready, stop = SPAWN.Value("q", 0, lock=False), SPAWN.Event(), SPAWN.Event()
    consumer = SPAWN.Process(target=slow_consumer, args=(url, slow_q, prefetch, acked, ready,
                                                          stop))
    consumer.start()
    if not ready.wait(60):
        consumer.kill()
        raise RuntimeError("the slow consumer did not start")
    with RssSampler(pid) as rss:
        slow_p = perf(url, slow_q, args.duration, "--producers", "1", "--consumers", "0",
                      "--predeclared")
        fast_p = perf(url, f"fast-{tag}", args.duration, *fast)
        t0 = time.monotonic()
        a0 = acked.value
        busy = report(fast_p, args.duration + 120)
        slow = report(slow_p, args.duration + 120)
        slow_rate = (acked.value - a0) / (time.monotonic() - t0)
        stop.set()
        consumer.join(60)
    if consumer.is_alive():
        consumer.kill()
        consumer.join()
    left = asyncio.run(_depth(url, slow_q))
    return {
        "alone": alone["consume_rate"], "busy": busy["consume_rate"],
        "slow": slow_rate, "slow_published": slow["published"],
        "missing": slow["published"] - acked.value - left, "left": left,
        "rss": rss.peak, "rss_end": rss.last,
    }


async def _declare(url: str, queue: str) -> None:
    from roost.client.aio import connect

    c = await connect(url)
    try:
        ch = await c.channel()
        await ch.queue_declare(queue)
    finally:
        await c.close()


async def _delete(url: str, queue: str) -> None:
    from roost.client.aio import connect

    c = await connect(url)
    try:
        ch = await c.channel()
        await ch.queue_delete(queue)
    finally:
        await c.close()


# -- the run -------------------------------------------------------------------------------


def _med(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--heartbeat", type=int, default=2)
    ap.add_argument("--rate", type=int, default=5000, help="the hot producer's msg/s (0: no limit)")
    ap.add_argument("--slow-prefetch", default="10,0")
    args = ap.parse_args()
    names = [b for b in args.brokers.split(",") if b]
    if "rabbitmq" in names and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: skipped", file=sys.stderr)
        names.remove("rabbitmq")
    idle: dict[str, list[dict[str, float]]] = {}
    slow: dict[tuple[str, int], list[dict[str, float]]] = {}
    prefetches = [int(p) for p in args.slow_prefetch.split(",") if p]
    with contextlib.ExitStack() as stack:
        urls = {n: stack.enter_context(_brokers.LAUNCHERS[n]()) for n in names}
        pids = {n: broker_pid(u) for n, u in urls.items()}
        for rep in range(args.repeat):
            for name in names if rep % 2 == 0 else names[::-1]:
                if "idle-hot" in args.scenarios:
                    got = idle_hot_once(urls[name], pids[name], args)
                    print(f"idle-hot {name}: {got}", file=sys.stderr, flush=True)
                    idle.setdefault(name, []).append(got)
                if "slow" in args.scenarios:
                    for p in prefetches:
                        got = slow_once(urls[name], pids[name], p, args)
                        print(f"slow prefetch {p} {name}: {got}", file=sys.stderr, flush=True)
                        slow.setdefault((name, p), []).append(got)
    two = len(names) == 2
    if idle:
        print(f"\nidle-hot: {args.idle} idle connections, heartbeat {args.heartbeat} s; hot pair "
              f"1 KiB prefetch 100 manual ack, rate {args.rate or 'unlimited'}; "
              f"{args.repeat} x {args.duration:g} s, medians")
        print("| broker | hot msg/s alone | p50 / p99 µs alone | hot msg/s with idle | "
              "p50 / p99 µs with idle | RSS MB with idle | idle conns dropped |")
        print("|---|---|---|---|---|---|---|")
        for name in names:
            r = idle[name]
            print(f"| {_brokers.TITLES[name]} | {_med(r, 'alone'):,.0f} | "
                  f"{_med(r, 'alone_p50'):,.0f} / {_med(r, 'alone_p99'):,.0f} | "
                  f"{_med(r, 'busy'):,.0f} | {_med(r, 'busy_p50'):,.0f} / "
                  f"{_med(r, 'busy_p99'):,.0f} | {_med(r, 'rss'):,.0f} | "
                  f"{max(x['lost'] for x in r)} of {min(x['opened'] for x in r)} |")
        if two:
            a, b = (_med(idle[n], "busy") for n in names)
            print(f"\nhot msg/s with idle, {names[0]}/{names[1]}: {a / b:.2f}")
    if slow:
        print(f"\nslow: queue A 1 consumer at 10 ms/message, queue B a fast pair (prefetch 100); "
              f"both producers never wait; {args.repeat} x {args.duration:g} s, medians")
        print("| broker | A prefetch | B msg/s alone | B msg/s beside A | A consumer msg/s | "
              "A published | peak / end RSS MB | A unaccounted |")
        print("|---|---|---|---|---|---|---|---|")
        for (name, p), r in slow.items():
            print(f"| {_brokers.TITLES[name]} | {p or 'unlimited'} | {_med(r, 'alone'):,.0f} | "
                  f"{_med(r, 'busy'):,.0f} | {_med(r, 'slow'):,.1f} | "
                  f"{_med(r, 'slow_published'):,.0f} | {_med(r, 'rss'):,.0f} / "
                  f"{_med(r, 'rss_end'):,.0f} | {max(x['missing'] for x in r):,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
