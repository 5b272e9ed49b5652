"""The parent process: prepares the broker, runs the workers, prints PerfTest's lines and
aggregates one report."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import sys
import time
from collections.abc import Coroutine, Sequence
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait as wait_pipes
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar, cast

from roost.client import Channel, ClientError, Closed, connect
from roost.client.aio import new_event_loop
from roost.perf import report, worker
from roost.perf.options import Options, mqtt_routing_key
from roost.perf.stats import ConsumerResult, Histogram, ProducerResult, aggregate, declare_report

T = TypeVar("T")

SETUP_TIMEOUT_S = 30.0
START_DELAY_NS = 100_000_000  # let every worker see "go" before the window opens
PRECONDITION_FAILED = 406


class PerfError(Exception):
    """The run could not start or finish (the message says which worker and why)."""


def log(text: str) -> None:
    print(f"roost perf: {text}", file=sys.stderr, flush=True)


def _run_async(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


def run(opts: Options) -> dict[str, Any]:
    try:
        if opts.queue_declares:
            return _run_async(_declare_queues(opts))
        server, made_exchange = _run_async(_prepare(opts))
    except (OSError, TimeoutError, ClientError) as exc:
        raise PerfError(f"{opts.endpoint}: {exc or type(exc).__name__}") from exc
    try:
        return _run_workers(opts, server)
    finally:
        try:
            _run_async(_clean_up(opts, made_exchange))
        except (OSError, ClientError, TimeoutError) as exc:
            log(f"could not delete the run's queues: {exc or type(exc).__name__}")


# -- the broker side: declare, purge, bind, delete ------------------------------------------
def _mqtt_only(opts: Options) -> bool:
    """MQTT publishers and subscribers: the subscriptions' queues are the broker's, so
    there is nothing to set up over AMQP."""
    return opts.protocol == "mqtt" and opts.consumers_speak == "mqtt"


async def _prepare(opts: Options) -> tuple[str, bool]:
    """Declare and purge the queues (and bind them); returns the server and whether we
    created the exchange (then we delete it at the end)."""
    if _mqtt_only(opts):
        return "", False
    conn = await connect(list(opts.endpoints))
    made_exchange = False
    try:
        if opts.predeclared:
            return conn.server, False
        ch = await conn.channel()
        if len(opts.queues) > 1:
            log(f"declaring {len(opts.queues)} queues ({opts.queues[0]} … {opts.queues[-1]})")
        for queue in opts.queues:
            ch = await _declare(ch, queue, opts.durable_queue, dict(opts.queue_args))
            await ch.queue_purge(queue)
        if opts.protocol == "mqtt":  # MQTT publishes reach the queues through amq.topic
            for queue in opts.queues:
                await ch.queue_bind(queue, "amq.topic", mqtt_routing_key(queue))
        elif opts.exchange:
            ch, made_exchange = await _declare_exchange(ch, opts)
            for queue in opts.queues:
                await ch.queue_bind(queue, opts.exchange, opts.routing_key_for(queue))
        return conn.server, made_exchange
    finally:
        await conn.close()


async def _declare(ch: Channel, queue: str, durable: bool, arguments: dict[str, Any]) -> Channel:
    """The channel to go on with (a refusal closes the one we had)."""
    try:
        await ch.queue_declare(queue, durable=durable, arguments=arguments)
        return ch
    except Closed as exc:
        if exc.scope != "channel" or exc.reply_code != PRECONDITION_FAILED:
            raise
    # It exists with other properties (say, durable from an earlier run): it is ours to
    # reuse, so replace it.
    log(f"queue {queue!r} exists with other properties; re-creating it")
    ch = await ch.conn.channel()
    await ch.queue_delete(queue)
    await ch.queue_declare(queue, durable=durable, arguments=arguments)
    return ch


async def _declare_exchange(ch: Channel, opts: Options) -> tuple[Channel, bool]:
    """Use the exchange if it exists (amq.* ones cannot be declared); else make it."""
    try:
        await ch.exchange_declare(opts.exchange, passive=True)
        return ch, False
    except Closed as exc:
        if exc.scope != "channel":
            raise
    ch = await ch.conn.channel()
    await ch.exchange_declare(opts.exchange, opts.exchange_type, durable=opts.durable_queue)
    return ch, True


async def _clean_up(opts: Options, made_exchange: bool) -> None:
    if opts.predeclared or _mqtt_only(opts):
        return
    conn = await connect(list(opts.endpoints))
    try:
        ch = await conn.channel()
        for queue in opts.queues:
            await ch.queue_delete(queue)
        if made_exchange:
            await ch.exchange_delete(opts.exchange)
    finally:
        await conn.close()


async def _declare_queues(opts: Options) -> dict[str, Any]:
    conn = await connect(list(opts.endpoints))
    names = [f"{opts.queue}-{i}" for i in range(opts.queue_declares)]
    try:
        ch = await conn.channel()
        log(f"declaring {len(names)} queues on {conn.server or 'the broker'}")
        began = time.perf_counter()
        for name in names:
            await ch.queue_declare(name, durable=opts.durable_queue)
        elapsed = time.perf_counter() - began
        log(f"{len(names)} declares in {elapsed:.2f} s; deleting them")
        for name in names:
            await ch.queue_delete(name)
        return declare_report(declares=len(names), elapsed_s=elapsed, server=conn.server)
    finally:
        await conn.close()


# -- the processes --------------------------------------------------------------------------
class _Worker:
    def __init__(self, proc: BaseProcess, pipe: Pipe, name: str, consumer: bool) -> None:
        self.proc, self.pipe, self.name, self.consumer = proc, pipe, name, consumer
        self.result: ProducerResult | ConsumerResult | None = None
        self.latency: dict[int, int] = {}  # a consumer's histogram at its last tick
        self.ticks = 0  # … which was after this many intervals
        self.shown: dict[int, int] = {}  # … and at the last progress line


def _run_workers(opts: Options, server: str) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")  # no inherited loop, sockets or locks
    total = max(opts.consumers + opts.producers, 1)
    shared = worker.Shared(ctx.RawArray("q", total), ctx.RawArray("q", total),
                           ctx.RawArray("q", total), ctx.RawArray("q", [worker.NO_DEADLINE]))
    workers: list[_Worker] = []

    def spawn(target: Any, slot: int, name: str) -> _Worker:
        parent_end, child_end = ctx.Pipe()
        proc = ctx.Process(target=target, args=(opts, slot, child_end, shared),
                           name=name, daemon=True)
        proc.start()
        child_end.close()
        w = _Worker(proc, parent_end, name, target is worker.consumer_main)
        workers.append(w)
        return w

    try:
        how_long = f"{opts.duration:g} s" if opts.duration else "until the counts are reached"
        log(f"{opts.consumers} consumer(s), {opts.producers} producer(s), {opts.size} B, "
            f"{how_long}, {opts.protocol}, against {server or 'the broker'}")
        # Consumers first, so that the first message published already has a taker.
        consumers = [spawn(worker.consumer_main, i, f"consumer-{i}")
                     for i in range(opts.consumers)]
        _await_ready(consumers)
        producers = [spawn(worker.producer_main, opts.consumers + i, f"producer-{i}")
                     for i in range(opts.producers)]
        _await_ready(producers)
        start_ns = time.monotonic_ns() + START_DELAY_NS
        if opts.duration:
            shared.control[0] = start_ns + int(opts.duration * 1e9)
        for w in workers:
            w.pipe.send(("go", start_ns))
        _watch(opts, workers, shared, start_ns)
        timed = opts.duration and shared.control[0] >= start_ns + int(opts.duration * 1e9)
        result = aggregate(
            producers=[_result(w, ProducerResult) for w in producers],
            consumers=[_result(w, ConsumerResult) for w in consumers],
            size=opts.size, duration_s=opts.duration if timed else None, start_ns=start_ns,
            server=server,
            test_id=opts.test_id, protocol=opts.protocol, queues=len(opts.queues),
        )
        for line in report.summary_lines(opts.test_id, result):
            print(line, flush=True)
        return result
    finally:
        _stop(workers)


def _watch(opts: Options, workers: list[_Worker], shared: worker.Shared, start_ns: int) -> None:
    """Collect ticks and results; print a line every interval until the deadline; end a
    count-bound run once every producer (or every consumer) is done. Producers may wait
    for confirms, then for close-ok and the socket's end: the limit allows for that."""
    slack_ns = max(worker.DRAIN_MAX_NS,
                   int((worker.CONFIRM_GRACE_S + 2 * worker.PRODUCER_CLOSE_S + 10) * 1e9))
    lines = _Lines(opts, workers, shared, start_ns)
    pending = {w.pipe: w for w in workers}
    counted = opts.duration is None or opts.pmessages or opts.cmessages
    while pending:
        now = time.monotonic_ns()
        deadline = shared.control[0]
        if now > deadline + slack_ns:
            raise PerfError(f"{', '.join(w.name for w in pending.values())}: no result in time")
        lines.maybe_print(now, deadline)
        wake_at = min(lines.due, deadline, now + 20_000_000)
        for pipe in wait_pipes(list(pending), timeout=max(0.0, (wake_at - now) / 1e9)):
            w = pending[cast(Pipe, pipe)]
            try:
                msg = w.pipe.recv()
            except EOFError:
                raise PerfError(f"{w.name} exited without a result") from None
            if msg[0] == "tick":
                w.ticks, w.latency = msg[1], msg[2]
            else:
                w.result = msg[1]
                del pending[w.pipe]
        if counted:  # every producer done (-C), or every consumer (-D): the run is over
            for side in (False, True):
                group = [w for w in workers if w.consumer is side]
                if group and all(w.result is not None for w in group):
                    shared.control[0] = min(shared.control[0], time.monotonic_ns())


# a progress line waits for every consumer's tick of its interval, but no longer than this
LINE_LAG_NS = 500_000_000


class _Lines:
    """PerfTest's progress lines: rates over each interval, latency from the ticks."""

    def __init__(self, opts: Options, workers: list[_Worker], shared: worker.Shared,
                 start_ns: int) -> None:
        self.opts, self.workers, self.shared, self.start_ns = opts, workers, shared, start_ns
        self.step = int(opts.interval * 1e9)
        self.due = start_ns + self.step
        self.line = 1
        self.last_ns = start_ns
        self.sent = self.received = self.confirmed = self.nacked = 0

    def maybe_print(self, now: int, deadline: int) -> None:
        due = min(self.due, deadline)
        if self.due == worker.NO_DEADLINE or now < due:
            return
        late = [w for w in self.workers
                if w.consumer and w.result is None and w.ticks < self.line]
        if late and now < due + LINE_LAG_NS:
            return
        opts, seconds = self.opts, (now - self.last_ns) / 1e9
        counts, received = list(self.shared.counts), opts.consumers
        received, sent = sum(counts[:received]), sum(counts[received:])
        acked = sum(list(self.shared.confirmed)[opts.consumers:])
        nacked = sum(list(self.shared.nacked)[opts.consumers:])
        latency = Histogram()
        for w in self.workers:
            if w.consumer and w.latency:
                latency.merge(_since(w.latency, w.shown))
                w.shown = w.latency
        print(report.progress_line(
            opts.test_id, (now - self.start_ns) / 1e9,
            sent=(sent - self.sent) / seconds if opts.producers else None,
            received=(received - self.received) / seconds if opts.consumers else None,
            confirmed=(acked - self.confirmed) / seconds if opts.confirm else None,
            nacked=(nacked - self.nacked) / seconds if opts.confirm else None,
            latency=latency.perftest() if latency.counts else None,
        ), flush=True)
        self.sent, self.received, self.last_ns = sent, received, now
        self.confirmed, self.nacked = acked, nacked
        # the last line is the one at (or just past) the deadline
        self.line = max(self.line + 1, (now - self.start_ns) // self.step + 1)
        self.due = worker.NO_DEADLINE if now >= deadline else self.start_ns + self.line * self.step


def _since(counts: dict[int, int], earlier: dict[int, int]) -> Histogram:
    h = Histogram()
    h.counts = counts
    return h.since(earlier)


def _stop(workers: list[_Worker]) -> None:
    """Ask unfinished workers to close their connections, then make sure they are gone."""
    for w in workers:
        if w.result is None and w.proc.is_alive():
            with contextlib.suppress(OSError):
                w.pipe.send(("abort",))
    limit = time.monotonic() + 3.0  # one grace period for all, not one each
    for w in workers:
        w.proc.join(max(0.0, limit - time.monotonic()))
    for w in workers:
        if w.proc.is_alive():
            w.proc.terminate()  # e.g. interrupted mid-run: it is not reading the pipe
        w.proc.join(3)
        w.pipe.close()


def _await_ready(group: Sequence[_Worker]) -> None:
    pending = {w.pipe: w for w in group}
    limit = time.monotonic() + SETUP_TIMEOUT_S
    while pending:
        ready = wait_pipes(list(pending), timeout=max(0.0, limit - time.monotonic()))
        if not ready:
            raise PerfError(f"{', '.join(w.name for w in pending.values())}: no ready "
                            f"signal after {SETUP_TIMEOUT_S:g} s")
        for pipe in ready:
            w = pending.pop(cast(Pipe, pipe))
            try:
                msg = w.pipe.recv()
            except EOFError:
                raise PerfError(f"{w.name} exited during set-up") from None
            if msg[0] != "ready":
                raise PerfError(msg[1])


def _result(w: _Worker, kind: type[T]) -> T:
    assert isinstance(w.result, kind), w.name
    return w.result
