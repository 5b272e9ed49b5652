"""AMQP producers and consumers of ``roost perf``, on ``roost.client``.

Both take their hot path on raw frames (``frames_received``): a producer writes each
batch as one pre-encoded template repeated, with only the 8-byte timestamp changing, and
counts confirms straight from basic.ack / basic.nack frames; a consumer counts
deliveries, reads each timestamp from the first body frame and answers with
pre-encoded acks, one write per socket read. Every other frame goes through the
client's protocol state as usual.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client import Connection, Endpoint, connect
from roost.client.confirms import ConfirmTracker
from roost.perf.options import TIMESTAMP_BYTES, Options
from roost.perf.stats import SIGNIFICANT_BITS, Tally

CHANNEL = 1  # the one channel each perf connection opens


class _Waking(Connection):
    """A connection whose ``wait(timeout)`` returns when anything changes."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint, product="roost-perf")
        self._wake: asyncio.Future[None] | None = None

    def wake(self) -> None:
        super().wake()
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Sleep until ``wake`` or ``timeout``; the caller re-checks its own condition."""
        self._wake = self.loop.create_future()
        await asyncio.wait([self._wake], timeout=timeout)


class ProducerConnection(_Waking):
    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        self.confirms = ConfirmTracker()
        self.returned = 0
        self.templates: list[tuple[bytes, bytes]] = []
        self.template_args: dict[str, Any] = {}
        self.priorities: list[int | None] = [None]

    @property
    def settled(self) -> int:
        return self.confirms.settled

    @property
    def message_bytes(self) -> int:
        """One message's frames on the wire, timestamp included."""
        prefix, suffix = self.templates[0]
        return len(prefix) + len(suffix) + 8

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
            self.frame(frame)
        self.wake()

    def send(self, n: int, stamp: bytes) -> None:
        """``n`` messages, all stamped ``stamp`` (empty: too small to carry one)."""
        templates = self.templates
        if len(templates) == 1:
            prefix, suffix = templates[0]
            self.write((prefix + stamp + suffix if stamp else prefix) * n)
            return
        k = len(templates)  # priorities cycle through the templates
        self.write(b"".join(
            templates[i % k][0] + stamp + templates[i % k][1] if stamp else templates[i % k][0]
            for i in range(n)
        ))

    def resize(self, size: int) -> None:
        """Bodies of ``size`` bytes from now on (``--variable-size``)."""
        self.templates = [publish_template(size=size, priority=priority, **self.template_args)
                          for priority in self.priorities]

    def _returned(self, _msg: Any) -> None:
        self.returned += 1


async def open_producer(opts: Options, slot: int) -> ProducerConnection:
    conn = await connect(opts.endpoints_for(slot), ProducerConnection)
    ch = await conn.channel()
    ch.on_return = conn._returned
    if opts.confirm:
        await ch.confirm_select()
    queue = opts.queue_of(slot)
    conn.template_args = dict(
        exchange=opts.exchange, routing_key=opts.routing_key_for(queue),
        persistent=opts.persistent, frame_max=conn.frame_max, mandatory=opts.mandatory,
        headers=dict(opts.headers) or None)
    conn.priorities = list(range(opts.priorities)) if opts.priorities else [None]
    conn.resize(opts.size)
    return conn


class ConsumerConnection(_Waking):
    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        self.tally = Tally()
        self.consuming = False
        self.want_stamp = False
        self.ack_each = False
        self.ack_every = 0  # > 0: one multiple=true ack every so many deliveries
        self.unacked = 0
        self.last_tag = 0
        self.ack_one = ack_template(multiple=False)
        self.ack_many = ack_template(multiple=True)

    def frames_received(self, frames: list[Any]) -> None:
        if not self.consuming:
            super().frames_received(frames)
            return
        t = self.tally
        if t.full:
            self._skip_deliveries(frames)
            return
        now = time.monotonic_ns()
        t.arrived(now)
        consumed, last_tag, want_stamp = t.consumed, self.last_tag, self.want_stamp
        limit, start_ns, stale = t.limit, t.start_ns, t.stale
        counts, top = t.latency.counts, t.latency.max
        tags: list[int] | None = [] if self.ack_each else None
        rest: list[Any] = []
        for i, frame in enumerate(frames):
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
                if consumed - stale >= limit:  # -D reached: the rest goes back unacked
                    t.full = True
                    rest = frames[i:]
                    break
                consumed += 1
                last_tag = frame.method.delivery_tag
                if tags is not None:
                    tags.append(last_tag)
            else:
                self._other(frame)
        if self.ack_every:
            self.unacked += consumed - t.consumed
        t.consumed, self.last_tag, self.want_stamp = consumed, last_tag, want_stamp
        t.stale = stale
        t.latency.max = top
        t.counted()
        if tags:
            pre, post = self.ack_one
            self.write(b"".join([pre + tag.to_bytes(8, "big") + post for tag in tags]))
        elif self.ack_every and self.unacked >= self.ack_every:
            self.ack_up_to_last()
        if rest:
            self._skip_deliveries(rest)
            self.wake()

    def _other(self, frame: Any) -> None:
        if type(frame) is codec.MethodFrame and type(frame.method) is m.BasicCancel:
            self.tally.cancelled = True  # the queue went away under us
            self.wake()
        self.frame(frame)

    def _skip_deliveries(self, frames: list[Any]) -> None:
        """After -D or the end of the run: deliveries are left unacked (requeued when the
        connection closes); anything else is handled as usual."""
        for frame in frames:
            kind = type(frame)
            if kind is codec.MethodFrame and type(frame.method) is not m.BasicDeliver:
                self._other(frame)
            elif kind is codec.HeartbeatFrame:
                self.frame(frame)

    def ack_up_to_last(self) -> None:
        if self.ack_every and self.unacked and self.last_tag:
            pre, post = self.ack_many
            self.write(pre + self.last_tag.to_bytes(8, "big") + post)
            self.unacked = 0

    def finish(self) -> None:
        """The run is over: stop counting, ack what is owed."""
        self.tally.full = True
        if self.error is None:
            self.ack_up_to_last()


async def open_consumer(opts: Options, slot: int) -> ConsumerConnection:
    conn = await connect(opts.endpoints_for(slot), ConsumerConnection)
    ch = await conn.channel()
    if not opts.auto_ack:
        conn.ack_each = opts.multi_ack_every == 1
        conn.ack_every = 0 if conn.ack_each else opts.multi_ack_every
    if opts.prefetch:
        await ch.qos(opts.prefetch)
    conn.consuming = True  # from here on deliveries take the fast path
    await ch.call(m.BasicConsume(queue=opts.queue_of(slot), consumer_tag=f"perf-{slot}",
                                 no_ack=opts.auto_ack))
    return conn


def publish_template(
    *, exchange: str, routing_key: str, size: int, persistent: bool, frame_max: int,
    priority: int | None = None, mandatory: bool = False, headers: dict[str, Any] | None = None,
) -> tuple[bytes, bytes]:
    """The frames of one basic.publish split around the body's first 8 bytes.

    A message is ``prefix + timestamp + suffix``: everything is encoded once per run
    and only the timestamp changes. With a body under 8 bytes the prefix is the whole
    message and the suffix is empty (no timestamp, no latency).
    """
    props = codec.encode_properties(
        m.BasicProperties(delivery_mode=2 if persistent else 1, priority=priority,
                          headers=headers)
    )
    whole = codec.encode_basic_publish(
        CHANNEL, exchange, routing_key, mandatory, False, props, bytes(size), frame_max
    )
    if size < TIMESTAMP_BYTES:
        return whole, b""
    method_len = len(codec.encode_method_frame(
        CHANNEL, m.BasicPublish(exchange=exchange, routing_key=routing_key, mandatory=mandatory)
    ))
    # header frame = 7 (frame header) + 12 (class, weight, body size) + props + 1 (end)
    body_at = method_len + 7 + 12 + len(props) + 1 + 7
    if whole[body_at - 7] != codec.FRAME_BODY:  # the first body frame's type octet
        raise AssertionError("unexpected basic.publish layout from the codec")
    return whole[:body_at], whole[body_at + 8 :]


def ack_template(multiple: bool) -> tuple[bytes, bytes]:
    """basic.ack on our channel split around its 8-byte delivery tag."""
    marker = 0x0102030405060708
    frame = codec.encode_method_frame(CHANNEL, m.BasicAck(delivery_tag=marker, multiple=multiple))
    at = frame.index(marker.to_bytes(8, "big"))
    return frame[:at], frame[at + 8 :]
