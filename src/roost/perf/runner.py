"""The parent process: prepares the broker, runs the workers, aggregates one report."""

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

from roost.amqp import codec_methods as m
from roost.perf import client, worker
from roost.perf.options import Options
from roost.perf.stats import ConsumerResult, ProducerResult, aggregate, declare_report

T = TypeVar("T")

SETUP_TIMEOUT_S = 30.0
START_DELAY_NS = 100_000_000  # let every worker see "go" before the window opens
PRECONDITION_FAILED = 406


class PerfError(Exception):
    """The run could not start or finish (the message says which worker and why)."""


def log(text: str) -> None:
    print(f"roost perf: {text}", file=sys.stderr, flush=True)


def _run_async(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=client.new_event_loop) as runner:
        return runner.run(coro)


def run(opts: Options) -> dict[str, Any]:
    ep = opts.endpoint
    try:
        if opts.queue_declares:
            return _run_async(_declare_queues(opts))
        server, made_exchange = _run_async(_prepare(opts))
    except (OSError, TimeoutError, client.ClosedByBroker) as exc:
        raise PerfError(f"{ep.host}:{ep.port}: {exc or type(exc).__name__}") from exc
    try:
        return _run_workers(opts, server)
    finally:
        try:
            _run_async(_clean_up(opts, made_exchange))
        except (OSError, client.ClosedByBroker, TimeoutError) as exc:
            log(f"could not delete queue {opts.queue!r}: {exc or type(exc).__name__}")


# -- the broker side: declare, purge, delete -----------------------------------------
async def _prepare(opts: Options) -> tuple[str, bool]:
    """Declare and purge the queue (and bind it); returns the server and whether we
    created the exchange (then we delete it at the end)."""
    conn = await client.connect(opts.endpoint)
    made_exchange = False
    try:
        await _declare(conn, opts.queue, opts.durable_queue, dict(opts.queue_args))
        await conn.call(m.QueuePurge(queue=opts.queue), m.QueuePurgeOk)
        if opts.exchange:
            made_exchange = await _declare_exchange(conn, opts.exchange, opts.durable_queue)
            await conn.call(
                m.QueueBind(queue=opts.queue, exchange=opts.exchange,
                            routing_key=opts.routing_key),
                m.QueueBindOk,
            )
        return conn.server, made_exchange
    finally:
        await conn.close()


async def _declare(
    conn: client.Connection, queue: str, durable: bool, arguments: dict[str, Any]
) -> None:
    declare = m.QueueDeclare(queue=queue, durable=durable, arguments=arguments)
    try:
        await conn.call(declare, m.QueueDeclareOk)
    except client.ClosedByBroker as exc:
        if exc.scope != "channel" or exc.reply_code != PRECONDITION_FAILED:
            raise
        # It exists with other properties (say, durable from an earlier run): it is
        # ours to reuse, so replace it.
        log(f"queue {queue!r} exists with other properties; re-creating it")
        await conn.open_channel()
        await conn.call(m.QueueDelete(queue=queue), m.QueueDeleteOk)
        await conn.call(declare, m.QueueDeclareOk)


async def _declare_exchange(conn: client.Connection, name: str, durable: bool) -> bool:
    """Use the exchange if it exists (amq.* ones cannot be declared); else make it."""
    try:
        await conn.call(m.ExchangeDeclare(exchange=name, passive=True), m.ExchangeDeclareOk)
        return False
    except client.ClosedByBroker as exc:
        if exc.scope != "channel":
            raise
    await conn.open_channel()
    await conn.call(m.ExchangeDeclare(exchange=name, type="direct", durable=durable),
                    m.ExchangeDeclareOk)
    return True


async def _clean_up(opts: Options, made_exchange: bool) -> None:
    conn = await client.connect(opts.endpoint)
    try:
        await conn.call(m.QueueDelete(queue=opts.queue), m.QueueDeleteOk)
        if made_exchange:
            await conn.call(m.ExchangeDelete(exchange=opts.exchange), m.ExchangeDeleteOk)
    finally:
        await conn.close()


async def _declare_queues(opts: Options) -> dict[str, Any]:
    conn = await client.connect(opts.endpoint)
    names = [f"{opts.queue}-{i}" for i in range(opts.queue_declares)]
    try:
        log(f"declaring {len(names)} queues on {conn.server or 'the broker'}")
        began = time.perf_counter()
        for name in names:
            await conn.call(m.QueueDeclare(queue=name, durable=opts.durable_queue),
                            m.QueueDeclareOk)
        elapsed = time.perf_counter() - began
        log(f"{len(names)} declares in {elapsed:.2f} s; deleting them")
        for name in names:
            await conn.call(m.QueueDelete(queue=name), m.QueueDeleteOk)
        return declare_report(declares=len(names), elapsed_s=elapsed, server=conn.server)
    finally:
        await conn.close()


# -- the processes --------------------------------------------------------------------
class _Worker:
    def __init__(self, proc: BaseProcess, pipe: Pipe, name: str) -> None:
        self.proc, self.pipe, self.name = proc, pipe, name
        self.result: ProducerResult | ConsumerResult | None = None


def _run_workers(opts: Options, server: str) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")  # no inherited loop, sockets or locks
    total = opts.consumers + opts.producers
    progress = ctx.RawArray("q", max(total, 1))
    workers: list[_Worker] = []

    def spawn(target: Any, slot: int, name: str) -> _Worker:
        parent_end, child_end = ctx.Pipe()
        proc = ctx.Process(target=target, args=(opts, slot, child_end, progress),
                           name=name, daemon=True)
        proc.start()
        child_end.close()
        w = _Worker(proc, parent_end, name)
        workers.append(w)
        return w

    try:
        log(f"{opts.consumers} consumer(s), {opts.producers} producer(s), {opts.size} B, "
            f"{opts.duration:g} s against {server or 'the broker'}")
        # Consumers first, so that the first message published already has a taker.
        consumers = [spawn(worker.consumer_main, i, f"consumer-{i}")
                     for i in range(opts.consumers)]
        _await_ready(consumers)
        producers = [spawn(worker.producer_main, opts.consumers + i, f"producer-{i}")
                     for i in range(opts.producers)]
        _await_ready(producers)
        start_ns = time.monotonic_ns() + START_DELAY_NS
        deadline_ns = start_ns + int(opts.duration * 1e9)
        for w in workers:
            w.pipe.send(("go", start_ns, deadline_ns))
        _report_progress(progress, opts.consumers, start_ns, deadline_ns)
        # Producers may wait for confirms, then for close-ok and the socket's end.
        slack_s = worker.CONFIRM_GRACE_S + 2 * worker.PRODUCER_CLOSE_S + 10
        limit = deadline_ns + max(worker.DRAIN_MAX_NS, int(slack_s * 1e9))
        _collect(workers, limit)
        return aggregate(
            producers=[_result(w, ProducerResult) for w in producers],
            consumers=[_result(w, ConsumerResult) for w in consumers],
            size=opts.size,
            duration_s=opts.duration,
            server=server,
        )
    finally:
        _stop(workers)


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


def _report_progress(progress: Any, n_consumers: int, start_ns: int, deadline_ns: int) -> None:
    """One stderr line per second with the rates of the last second."""
    last_pub = last_con = 0
    tick = start_ns
    while True:
        tick = min(tick + 1_000_000_000, deadline_ns)
        time.sleep(max(0.0, (tick - time.monotonic_ns()) / 1e9))
        counts = list(progress)
        con, pub = sum(counts[:n_consumers]), sum(counts[n_consumers:])
        log(f"t={(tick - start_ns) / 1e9:5.1f}s  published {pub - last_pub:>9,}  "
            f"consumed {con - last_con:>9,}")
        last_pub, last_con = pub, con
        if tick >= deadline_ns:
            log("window closed; draining consumers")
            return


def _collect(workers: list[_Worker], limit_ns: int) -> None:
    pending = {w.pipe: w for w in workers}
    while pending:
        ready = wait_pipes(list(pending), timeout=max(0.0, (limit_ns - time.monotonic_ns()) / 1e9))
        if not ready:
            raise PerfError(f"{', '.join(w.name for w in pending.values())}: no result in time")
        for pipe in ready:
            w = pending.pop(cast(Pipe, pipe))
            try:
                msg = w.pipe.recv()
            except EOFError:
                raise PerfError(f"{w.name} exited without a result") from None
            w.result = msg[1]


def _result(w: _Worker, kind: type[T]) -> T:
    assert isinstance(w.result, kind), w.name
    return w.result
