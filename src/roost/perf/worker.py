"""Producer and consumer processes: each owns an event loop and one connection.

The parent talks to a worker over a pipe: the worker sends ``("ready", server)`` or
``("error", text)``, waits for ``("go", start_ns, deadline_ns)`` (or ``("abort",)``)
and answers with ``("result", ProducerResult | ConsumerResult)``. Times are
``time.monotonic_ns()``, which is one clock for every process on the machine.
Workers also store their running message count in a shared array slot, for the
parent's progress lines.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import time
from collections.abc import Coroutine, MutableSequence
from multiprocessing.connection import Connection as Pipe
from typing import Any

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.perf import client
from roost.perf.confirms import ConfirmTracker
from roost.perf.options import TIMESTAMP_BYTES, Options
from roost.perf.stats import (
    SIGNIFICANT_BITS,
    ConsumerResult,
    Histogram,
    ProducerResult,
    rate_budget,
)

BATCH_BYTES = 64 * 1024  # one write per loop iteration carries about this much
MAX_BATCH = 1000
CONFIRM_GRACE_S = 2.0  # after the window, wait this long for outstanding confirms
# A producer waits this long for close-ok: it proves the broker has taken every publish
# (a backlogged broker reads them late), so none trickles into the next run's queue.
PRODUCER_CLOSE_S = 15.0
DRAIN_IDLE_NS = 1_000_000_000  # consumers stop once nothing came for this long…
DRAIN_MAX_NS = 5_000_000_000  # …or this long after the producers' deadline


def producer_main(opts: Options, slot: int, pipe: Pipe, progress: MutableSequence[int]) -> None:
    _main(Producer, opts, slot, pipe, progress)


def consumer_main(opts: Options, slot: int, pipe: Pipe, progress: MutableSequence[int]) -> None:
    _main(Consumer, opts, slot, pipe, progress)


def _main(
    role: type[Producer] | type[Consumer],
    opts: Options,
    slot: int,
    pipe: Pipe,
    progress: MutableSequence[int],
) -> None:
    # Ctrl-C reaches the whole process group; the parent decides how the run ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    name = multiprocessing.current_process().name  # "producer-0", set by the parent
    with asyncio.Runner(loop_factory=client.new_event_loop) as runner:
        try:
            setup: Coroutine[Any, Any, Producer | Consumer] = role.setup(opts, slot, progress)
            worker = runner.run(setup)
        except Exception as exc:
            pipe.send(("error", f"{name}: {exc or type(exc).__name__}"))
            return
        pipe.send(("ready", worker.conn.server))
        try:
            msg = pipe.recv()
        except EOFError:
            msg = ("abort",)
        if msg[0] != "go":
            runner.run(worker.conn.close())
            return
        try:
            result = runner.run(worker.run(msg[1], msg[2]))
        except Exception as exc:  # a bug or a broken socket: report it, do not vanish
            result = worker.failed(f"{name}: {exc!r}")
        pipe.send(("result", result))


def _remaining_s(deadline_ns: int) -> float:
    return max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9)


class ProducerConnection(client.Connection):
    def __init__(self) -> None:
        super().__init__()
        self.confirms = ConfirmTracker()

    def frames_received(self, frames: list[Any]) -> None:
        settle = self.confirms.settle
        for frame in frames:
            if type(frame) is codec.MethodFrame:
                method = frame.method
                if type(method) is m.BasicAck:
                    settle(method.delivery_tag, method.multiple)
                    continue
                if type(method) is m.BasicNack:
                    settle(method.delivery_tag, method.multiple, ok=False)
                    continue
            self.control(frame)
        self.wake()


class Producer:
    def __init__(self, opts: Options, slot: int, progress: MutableSequence[int],
                 conn: ProducerConnection) -> None:
        self.opts = opts
        self.slot = slot
        self.progress = progress
        self.conn = conn
        # one template per priority (one without): a batch cycles through them
        self.templates = [
            client.publish_template(
                exchange=opts.exchange,
                routing_key=opts.routing_key,
                size=opts.size,
                persistent=opts.persistent,
                frame_max=conn.frame_max,
                priority=priority,
            )
            for priority in (range(opts.priorities) if opts.priorities else [None])
        ]
        self.prefix, self.suffix = self.templates[0]

    @classmethod
    async def setup(cls, opts: Options, slot: int, progress: MutableSequence[int]) -> Producer:
        conn = await client.connect(opts.endpoint, ProducerConnection)
        assert isinstance(conn, ProducerConnection)
        if opts.confirm:
            await conn.call(m.ConfirmSelect(), m.ConfirmSelectOk)
        return cls(opts, slot, progress, conn)

    def _mixed(self, n: int, stamp: bytes) -> bytes:
        """``n`` messages whose priorities cycle through the templates."""
        templates = self.templates
        k = len(templates)
        return b"".join(
            templates[i % k][0] + stamp + templates[i % k][1] if stamp else templates[i % k][0]
            for i in range(n)
        )

    def failed(self, error: str) -> ProducerResult:
        return ProducerResult(published=self.progress[self.slot], error=error)

    async def run(self, start_ns: int, deadline_ns: int) -> ProducerResult:
        conn, opts = self.conn, self.opts
        tracker = conn.confirms
        prefix, suffix = self.prefix, self.suffix
        stamped = opts.size >= TIMESTAMP_BYTES
        batch = max(1, min(MAX_BATCH, BATCH_BYTES // (len(prefix) + len(suffix) + 8)))
        window, rate = opts.confirm, opts.rate
        progress, slot = self.progress, self.slot
        assert conn.transport is not None
        write = conn.transport.write
        clock = time.monotonic_ns
        sent = 0
        # Loop timers may fire a little early; a batch stamped before start_ns would be
        # taken by the consumers for an earlier run's leftover.
        while (now := clock()) < start_ns:
            await asyncio.sleep((start_ns - now) / 1e9)
        while conn.error is None:
            now = clock()
            if now >= deadline_ns:
                break
            if conn.paused:
                await conn.wait((deadline_ns - now) / 1e9)
                continue
            n = batch
            if window:
                n = min(n, window - (sent - tracker.settled))
                if n <= 0:
                    await conn.wait((deadline_ns - now) / 1e9)
                    continue
            if rate:
                elapsed = (now - start_ns) / 1e9
                n = min(n, rate_budget(rate, elapsed, sent))
                if n <= 0:
                    await asyncio.sleep(min((sent + 1) / rate - elapsed, (deadline_ns - now) / 1e9))
                    continue
            # One timestamp per batch: the whole batch goes to the socket at this instant.
            if len(self.templates) > 1:
                write(self._mixed(n, now.to_bytes(8, "big") if stamped else b""))
            else:
                msg = prefix + now.to_bytes(8, "big") + suffix if stamped else prefix
                write(msg * n)
            sent += n
            progress[slot] = sent
            await asyncio.sleep(0)  # let the loop read confirms and report back-pressure
        grace = time.monotonic_ns() + int(CONFIRM_GRACE_S * 1e9)
        while window and conn.error is None and tracker.settled < sent:
            if time.monotonic_ns() >= grace:
                break
            await conn.wait(_remaining_s(grace))
        error = conn.error
        await conn.close(PRODUCER_CLOSE_S)
        return ProducerResult(
            published=sent,
            confirmed=tracker.acked,
            nacked=tracker.nacked,
            error=f"{multiprocessing.current_process().name}: {error}" if error else None,
        )


class ConsumerConnection(client.Connection):
    def __init__(self) -> None:
        super().__init__()
        self.consuming = False
        self.cancelled = False
        self.deadline_ns = 1 << 62
        self.consumed = 0  # deliveries, stale ones included (they need acks all the same)
        self.stale = 0  # stamped before this run started: left over from an earlier run
        self.start_ns = 0
        self.in_window: int | None = None
        self.last_rx_ns = 0
        self.latency = Histogram()
        self.want_stamp = False
        self.ack_each = False
        self.ack_every = 0  # > 0: one multiple=true ack every so many deliveries
        self.unacked = 0
        self.last_tag = 0
        self.ack_one = client.ack_template(multiple=False)
        self.ack_many = client.ack_template(multiple=True)
        self.progress: MutableSequence[int] = [0]
        self.slot = 0
        self.on_method = self._on_method

    def _on_method(self, method: Any) -> None:
        if type(method) is m.BasicCancel:  # the queue went away under us
            self.cancelled = True
            self.wake()

    def frames_received(self, frames: list[Any]) -> None:
        if not self.consuming:
            super().frames_received(frames)
            return
        now = time.monotonic_ns()
        if now >= self.deadline_ns and self.in_window is None:
            self.in_window = self.consumed - self.stale
        self.last_rx_ns = now
        consumed, last_tag, want_stamp = self.consumed, self.last_tag, self.want_stamp
        latency = self.latency
        counts, top = latency.counts, latency.max
        start_ns, stale = self.start_ns, self.stale
        tags: list[int] | None = [] if self.ack_each else None
        for frame in frames:
            kind = type(frame)
            if kind is codec.BodyFrame:
                if want_stamp:
                    want_stamp = False
                    stamp = int.from_bytes(frame.payload[:8], "big")
                    if stamp < start_ns:
                        stale += 1
                        continue
                    lat = (now - stamp) // 1000
                    if lat < 0:
                        lat = 0
                    if lat > top:
                        top = lat
                    key = lat
                    if lat >> SIGNIFICANT_BITS:  # inline stats.bucket: this runs per message
                        shift = lat.bit_length() - SIGNIFICANT_BITS
                        key = lat >> shift << shift
                    counts[key] = counts.get(key, 0) + 1
            elif kind is codec.HeaderFrame:
                want_stamp = frame.body_size >= TIMESTAMP_BYTES
            elif kind is codec.MethodFrame and type(frame.method) is m.BasicDeliver:
                consumed += 1
                last_tag = frame.method.delivery_tag
                if tags is not None:
                    tags.append(last_tag)
            else:
                self.control(frame)
        if self.ack_every:
            self.unacked += consumed - self.consumed
        self.consumed, self.last_tag, self.want_stamp = consumed, last_tag, want_stamp
        self.stale = stale
        latency.max = top
        self.progress[self.slot] = consumed - stale
        if tags:
            pre, post = self.ack_one
            self.write(b"".join([pre + t.to_bytes(8, "big") + post for t in tags]))
        elif self.ack_every and self.unacked >= self.ack_every:
            self.ack_up_to_last()

    def ack_up_to_last(self) -> None:
        if self.ack_every and self.unacked and self.last_tag:
            pre, post = self.ack_many
            self.write(pre + self.last_tag.to_bytes(8, "big") + post)
            self.unacked = 0


class Consumer:
    def __init__(self, opts: Options, slot: int, conn: ConsumerConnection) -> None:
        self.opts = opts
        self.slot = slot
        self.conn = conn

    @classmethod
    async def setup(cls, opts: Options, slot: int, progress: MutableSequence[int]) -> Consumer:
        conn = await client.connect(opts.endpoint, ConsumerConnection)
        assert isinstance(conn, ConsumerConnection)
        conn.progress, conn.slot = progress, slot
        if not opts.auto_ack:
            conn.ack_each = opts.multi_ack_every == 1
            conn.ack_every = 0 if conn.ack_each else opts.multi_ack_every
        if opts.prefetch:
            await conn.call(m.BasicQos(prefetch_size=0, prefetch_count=opts.prefetch),
                            m.BasicQosOk)
        conn.consuming = True  # from here on deliveries take the fast path
        await conn.call(
            m.BasicConsume(queue=opts.queue, consumer_tag=f"perf-{slot}", no_ack=opts.auto_ack),
            m.BasicConsumeOk,
        )
        return cls(opts, slot, conn)

    def failed(self, error: str) -> ConsumerResult:
        conn = self.conn
        return ConsumerResult(consumed=conn.consumed - conn.stale, stale=conn.stale, error=error)

    async def run(self, start_ns: int, deadline_ns: int) -> ConsumerResult:
        conn = self.conn
        conn.start_ns = start_ns
        conn.deadline_ns = deadline_ns
        conn.last_rx_ns = start_ns
        while conn.error is None and not conn.cancelled:
            now = time.monotonic_ns()
            if now < deadline_ns:
                await conn.wait((deadline_ns - now) / 1e9)
                continue
            if now - conn.last_rx_ns >= DRAIN_IDLE_NS or now >= deadline_ns + DRAIN_MAX_NS:
                break
            await conn.wait(0.05)
        error = conn.error
        conn.consuming = False
        if error is None:
            conn.ack_up_to_last()
        await conn.close()
        return ConsumerResult(
            consumed=conn.consumed - conn.stale,
            consumed_in_window=(conn.consumed - conn.stale) if conn.in_window is None
            else conn.in_window,
            stale=conn.stale,
            latency_us=conn.latency,
            error=f"{multiprocessing.current_process().name}: {error}" if error else None,
        )
