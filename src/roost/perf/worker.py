"""Producer and consumer processes: each owns an event loop and one connection.

The parent talks to a worker over a pipe: the worker sends ``("ready", server)`` or
``("error", text)``, waits for ``("go", start_ns)`` (or ``("abort",)``), sends a
consumer's latency histogram as ``("tick", n, counts)`` after interval n, and answers with
``("result", ProducerResult | ConsumerResult)``. Times are ``time.monotonic_ns()``, one
clock for every process on the machine. Shared arrays carry each worker's running
count (``counts``, and ``confirmed`` for producers) and the run's deadline
(``control[0]``), which the parent moves when a count-bound run is over.

The protocol seam: ``ROLES`` maps ``--protocol`` to the functions that open a
producer and a consumer link, the two shapes ``perf/links.py`` types (mypy checks every
entry); consumers may speak another protocol than producers (``--consumer-protocol``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import signal
import time
from collections.abc import MutableSequence
from multiprocessing.connection import Connection as Pipe
from typing import NamedTuple

from roost.client.aio import new_event_loop
from roost.perf import amqp, mqtt_codec, stomp
from roost.perf.links import ConsumerLink, ConsumerOpener, Link, ProducerLink, ProducerOpener
from roost.perf.options import TIMESTAMP_BYTES, Options
from roost.perf.stats import ConsumerResult, ProducerResult

BATCH_BYTES = 64 * 1024  # one write per loop iteration carries about this much
MAX_BATCH = 1000
CONFIRM_GRACE_S = 2.0  # after the window, wait this long for outstanding confirms
# A producer waits this long for close-ok: it proves the broker has taken every publish
# (a backlogged broker reads them late), so none trickles into the next run's queue.
PRODUCER_CLOSE_S = 15.0
DRAIN_IDLE_NS = 1_000_000_000  # consumers stop once nothing came for this long…
DRAIN_MAX_NS = 5_000_000_000  # …or this long after the producers' deadline
NO_DEADLINE = 1 << 62

async def _mqtt_producer(opts: Options, slot: int) -> ProducerLink:
    if opts.mqtt_client == "paho":
        from roost.perf import mqtt  # paho-mqtt (roost[perf]): imported only to be used

        return await mqtt.open_producer(opts, slot)
    return await mqtt_codec.open_producer(opts, slot)


async def _mqtt_consumer(opts: Options, slot: int) -> ConsumerLink:
    if opts.mqtt_client == "paho":
        from roost.perf import mqtt

        return await mqtt.open_consumer(opts, slot)
    return await mqtt_codec.open_consumer(opts, slot)


ROLES: dict[str, tuple[ProducerOpener, ConsumerOpener]] = {
    "amqp": (amqp.open_producer, amqp.open_consumer),
    "stomp": (stomp.open_producer, stomp.open_consumer),
    "ws": (stomp.open_producer, stomp.open_consumer),
    "mqtt": (_mqtt_producer, _mqtt_consumer),
}


class Shared(NamedTuple):
    """Arrays in shared memory, one slot per worker (control: one, the deadline)."""

    counts: MutableSequence[int]
    confirmed: MutableSequence[int]
    nacked: MutableSequence[int]
    control: MutableSequence[int]


def producer_main(opts: Options, slot: int, pipe: Pipe, shared: Shared) -> None:
    name = _worker_start()
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        try:
            link = runner.run(ROLES[opts.protocol][0](opts, slot))
        except Exception as exc:
            pipe.send(("error", f"{name}: {exc or type(exc).__name__}"))
            return
        start_ns = _ready(runner, link, pipe)
        if start_ns is None:
            return
        try:
            result = runner.run(produce(link, opts, slot, shared, start_ns))
        except Exception as exc:  # a bug or a broken socket: report it, do not vanish
            result = ProducerResult(published=shared.counts[slot], error=f"{name}: {exc!r}")
        pipe.send(("result", result))


def consumer_main(opts: Options, slot: int, pipe: Pipe, shared: Shared) -> None:
    name = _worker_start()
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        try:
            link = runner.run(ROLES[opts.consumers_speak][1](opts, slot))
        except Exception as exc:
            pipe.send(("error", f"{name}: {exc or type(exc).__name__}"))
            return
        attach(link, opts, slot, shared)
        start_ns = _ready(runner, link, pipe)
        if start_ns is None:
            return
        try:
            outcome = runner.run(consume(link, opts, slot, pipe, shared, start_ns))
        except Exception as exc:  # a bug or a broken socket: report it, do not vanish
            outcome = ConsumerResult(error=f"{name}: {exc!r}")
        pipe.send(("result", outcome))


def _worker_start() -> str:
    # Ctrl-C reaches the whole process group; the parent decides how the run ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return multiprocessing.current_process().name  # "producer-0", set by the parent


def _ready(runner: asyncio.Runner, link: Link, pipe: Pipe) -> int | None:
    """Say ready and wait for the parent's go: its start time, or None (link closed)."""
    pipe.send(("ready", link.server))
    try:
        msg = pipe.recv()
    except EOFError:
        msg = ("abort",)
    if msg[0] != "go":
        runner.run(link.close())
        return None
    start: int = msg[1]
    return start


async def produce(link: ProducerLink, opts: Options, slot: int, shared: Shared,
                  start_ns: int) -> ProducerResult:
    """Publish in batches until the deadline or ``-C``, within the confirm window and
    the rate; one timestamp per batch (the whole batch goes out at that instant)."""
    size = opts.size
    stamped = size >= TIMESTAMP_BYTES
    batch = max(1, min(MAX_BATCH, BATCH_BYTES // link.message_bytes))
    window, rates, sizes = opts.confirm, opts.rate_steps, opts.size_steps
    limit = opts.pmessages or NO_DEADLINE
    counts, confirmed, nacked, control = shared
    clock = time.monotonic_ns
    sent = 0
    if opts.startup_delay_s:  # -prsd: this producer's rate counts from its own start
        start_ns += int(random.uniform(0, opts.startup_delay_s) * 1e9)
    # Loop timers may fire a little early; a batch stamped before start_ns would be
    # taken by the consumers for an earlier run's leftover.
    while (now := clock()) < start_ns:
        await asyncio.sleep((start_ns - now) / 1e9)
    while link.error is None and sent < limit:
        now = clock()
        deadline = control[0]
        if now >= deadline:
            break
        # waits are short enough to see the parent end a count-bound run early
        left_s = min(deadline - now, 1_000_000_000) / 1e9
        if link.paused:
            await link.wait(left_s)
            continue
        elapsed = (now - start_ns) / 1e9
        if sizes is not None and (step := int(sizes.value_at(elapsed))) != size:
            size, stamped = step, step >= TIMESTAMP_BYTES  # --variable-size's next step
            link.resize(size)
            batch = max(1, min(MAX_BATCH, BATCH_BYTES // link.message_bytes))
        n = min(batch, limit - sent)
        if window:
            n = min(n, window - (sent - link.settled))
            if n <= 0:
                await link.wait(left_s)
                continue
        if rates is not None:
            n = min(n, rates.budget(elapsed, sent))
            if n <= 0:
                await asyncio.sleep(min(rates.wait_s(elapsed, sent), left_s))
                continue
        link.send(n, now.to_bytes(8, "big") if stamped else b"")
        sent += n
        counts[slot] = sent
        confirmed[slot], nacked[slot] = link.confirms.acked, link.confirms.nacked
        await asyncio.sleep(0)  # let the loop read confirms and report back-pressure
    grace = clock() + int(CONFIRM_GRACE_S * 1e9)
    while window and link.error is None and link.settled < sent and clock() < grace:
        await link.wait((grace - clock()) / 1e9)
        confirmed[slot], nacked[slot] = link.confirms.acked, link.confirms.nacked
    finished_ns = clock()
    error = link.error
    await link.close(PRODUCER_CLOSE_S)
    return ProducerResult(
        published=sent, confirmed=link.confirms.acked, nacked=link.confirms.nacked,
        returned=getattr(link, "returned", 0), finished_ns=finished_ns,
        error=f"{multiprocessing.current_process().name}: {error}" if error else None,
    )


async def consume(link: ConsumerLink, opts: Options, slot: int, pipe: Pipe, shared: Shared,
                  start_ns: int) -> ConsumerResult:
    """Count until the deadline has passed and the queue went quiet (or ``-D``), sending
    the latency histogram to the parent every interval."""
    t = link.tally
    t.last_rx_ns = start_ns
    # a message stamped before the start is an earlier run's (stale: not counted) in a
    # queue this run purged; in a predeclared one (-p), whatever is there is the run's
    t.start_ns = 0 if opts.predeclared else start_ns
    tick_ns = int(opts.interval * 1e9)
    ticks = 1
    while link.error is None and not t.done:
        now = time.monotonic_ns()
        next_tick = start_ns + ticks * tick_ns
        if now >= next_tick:  # a busy loop may be late: one tick covers the time missed
            ticks = (now - start_ns) // tick_ns
            pipe.send(("tick", ticks, dict(t.latency.counts)))
            ticks += 1
            continue
        deadline = t.control[0]
        if now < deadline:
            await link.wait((min(deadline, next_tick) - now) / 1e9)
            continue
        if now - t.last_rx_ns >= DRAIN_IDLE_NS or now >= deadline + DRAIN_MAX_NS:
            break
        await link.wait(min(0.05, max(0.0, (next_tick - now) / 1e9)))
    error = link.error
    link.finish()
    await link.close()
    total = t.counted_total
    return ConsumerResult(
        consumed=total, consumed_in_window=total if t.in_window is None else t.in_window,
        stale=t.stale, latency_us=t.latency, last_ns=t.last_rx_ns,
        error=f"{multiprocessing.current_process().name}: {error}" if error else None,
    )


def attach(link: ConsumerLink, opts: Options, slot: int, shared: Shared) -> None:
    """Point a consumer link's tally at the shared arrays and the ``-D`` limit."""
    t = link.tally
    t.progress, t.slot, t.control = shared.counts, slot, shared.control
    t.limit = opts.cmessages or NO_DEADLINE
    t.busy_us = opts.consumer_latency_us
