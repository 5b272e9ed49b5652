"""The pipeline's AMQP client: ``roost.client``'s blocking face plus what Spark jobs ask
of a Roost stream (offsets, ranged reads, offset-by-time look-ups, producer probes).

Spark calls ``read``/``write`` on executors in plain threads: a blocking socket is the
simplest fit, and the codec parses a whole receive buffer at a time (no per-frame
awaits), which is what makes reading fast. One connection, one channel. Broker refusals
surface as ``RoostError`` with the reply code and a sentence naming what the user asked.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client import BlockingConnection, ClientError, Closed, ConnectError, Endpoint, parse_uri


class RoostError(Exception):
    """The broker refused something; ``code`` is the AMQP reply code (0: not a reply)."""

    def __init__(self, text: str, code: int = 0) -> None:
        super().__init__(f"{code} {text}" if code else text)
        self.code = code
        self.text = text


class Unreachable(RoostError):
    """No connection could be made (refused, reset, timed out): the node may be down."""


@contextlib.contextmanager
def missing_as(text: str) -> Iterator[None]:
    """The broker's 404 re-raised as ``text``, which names what the user asked for;
    any other failure passes unchanged."""
    try:
        yield
    except (RoostError, Closed) as exc:
        code = exc.code if isinstance(exc, RoostError) else exc.reply_code
        if code == 404 and not node_down(exc):
            raise RoostError(text, 404) from None
        raise


def node_down(exc: BaseException) -> bool:
    """A cluster node's 404 for a queue whose node (a replicated stream's leader) is down
    or not reachable from it: the queue exists, another node or a moment may serve it."""
    return "is down or inaccessible" in str(exc)


# an AMQP URL cannot start inside another one unless written there literally: a list is
# split only where the next item starts with a scheme
_SEPARATOR = re.compile(r"\s*,\s*(?=amqps?://)", re.IGNORECASE)


def node_urls(option: str) -> list[str]:
    """The URLs in option ``url``: one, or several nodes' separated by commas."""
    return [u for u in _SEPARATOR.split(option.strip()) if u] or [option]


def endpoint(url: str) -> Endpoint:
    try:
        return parse_uri(url)
    except ValueError as exc:
        raise RoostError(f"not an amqp://user:pass@host:port/vhost URL: {url!r} ({exc})") from None


@dataclass
class Delivery:
    tag: int
    exchange: str
    routing_key: str
    properties: tuple[Any, ...]  # the 14 basic properties in spec order
    body: bytes


class Client(BlockingConnection):
    """A connection to ``url``, or to the first node that answers when it lists several
    (``node_urls``)."""

    def __init__(self, url: str) -> None:
        urls = node_urls(url)
        eps = [endpoint(u) for u in urls]
        try:
            super().__init__(urls if len(urls) > 1 else url, product="roost-pipeline")
        except ConnectError as exc:
            cause, ep = exc.last, eps[-1]
            if isinstance(cause, Closed):
                raise RoostError(
                    f"cannot open vhost '{ep.vhost}' on {ep.host}:{ep.port} as user "
                    f"'{ep.user}': {cause.reply_text}", cause.reply_code) from None
            where = ", ".join(f"{e.host}:{e.port}" for e in eps)
            raise Unreachable(f"cannot connect to {where}: {cause}") from None

    # -- streams --------------------------------------------------------------------------

    def stream_info(self, stream: str) -> dict[str, Any]:
        """First and next offsets (and producers' last ids) in one round trip: a basic.get
        on a stream answers with an empty message carrying them as headers."""
        # no_ack=False: should the queue be a classic one, its message goes back
        msg = self.get(stream)
        if msg is None:
            raise RoostError(f"queue '{stream}' is not a stream")
        headers = msg.properties.headers or {}
        if "x-stream-next-offset" not in headers:
            self.send(m.BasicReject(delivery_tag=msg.delivery_tag, requeue=True))
            raise RoostError(f"queue '{stream}' is not a stream")
        self.ack(msg.delivery_tag)
        return dict(headers)

    def read_range(
        self,
        stream: str,
        start: int,
        end: int,
        *,
        prefetch: int = 5000,
        chunk_bytes: int = 0,
    ) -> Iterator[Delivery]:
        """Every message with offset in [start, end): x-stream-end-offset makes the broker
        cancel the consumer after the last one, so no waiting for silence. With
        ``chunk_bytes`` each delivery is a chunk of records (``roost.pipeline.chunks``).
        Deliveries are read here straight from the frames (the hot path); everything else
        goes through the client's protocol state."""
        if end <= start:
            return
        self.call(m.BasicQos(prefetch_count=prefetch))
        ok = self.call(
            m.BasicConsume(
                queue=stream,
                consumer_tag="",
                arguments={
                    "x-stream-offset": start,
                    "x-stream-end-offset": end,
                    **({"x-roost-chunk-bytes": chunk_bytes} if chunk_bytes else {}),
                },
            )
        )
        tag = ok.consumer_tag
        unacked = 0
        last_tag = 0
        method: Any = None
        header: Any = None
        chunks: list[bytes] = []
        size = 0
        next_frame = self.next_frame
        while method is not None or tag not in self.cancelled:
            frame = next_frame()
            kind = type(frame)
            if kind is codec.BodyFrame:
                chunks.append(frame.payload)
                size += len(frame.payload)
            elif kind is codec.HeaderFrame:
                header = frame
                chunks = []
                size = 0
            elif kind is codec.MethodFrame:
                if type(frame.method) is m.BasicDeliver:
                    method = frame.method
                    header = None
                else:
                    self.handle(frame)
                continue
            else:
                continue
            if header is not None and size >= header.body_size and method is not None:
                last_tag = method.delivery_tag
                yield Delivery(
                    last_tag,
                    method.exchange,
                    method.routing_key,
                    codec.decode_properties(header.properties),
                    chunks[0] if len(chunks) == 1 else b"".join(chunks),
                )
                method = None
                unacked += 1
                if unacked >= prefetch // 2:
                    self.ack(last_tag, multiple=True)
                    unacked = 0
        if unacked:
            self.ack(last_tag, multiple=True)

    def is_stream(self, queue: str) -> bool:
        """Whether ``queue`` is a stream this user may read, asked without touching a
        classic queue's messages: a producer query (``amq.roost.producers``) is answered
        for a stream and refused with a channel error otherwise."""
        reply_to = "amq.rabbitmq.reply-to"
        self.call(m.BasicConsume(queue=reply_to, no_ack=True))
        query = properties(reply_to=reply_to, headers={"x-stream-producer-name": "roost-probe"})
        # sent now, not buffered: not a publish that flush_confirmed should wait for
        self.write(self.publish_frames("amq.roost.producers", queue, query, b""))
        try:
            self.wait(m.BasicDeliver)
        except Closed as exc:
            if exc.scope != "channel":
                raise
            self.reopen()  # the refusal closed the channel
            return False
        self.reopen()  # a fresh channel: no reply consumer left behind
        return True

    def check_exchange(self, exchange: str) -> None:
        """Fails (404) unless ``exchange`` exists; "" is the default exchange."""
        if exchange:
            self.call(m.ExchangeDeclare(exchange=exchange, passive=True))

    def check_queue(self, queue: str) -> None:
        """Fails (404) unless ``queue`` exists."""
        self.call(m.QueueDeclare(queue=queue, passive=True))

    def offsets_for_times(self, stream: str, info: dict[str, Any], times: list[int]) -> list[int]:
        """The first offset appended at or after each time (ms since the epoch; the next
        offset when none is), in one round trip: one consumer per time that starts there
        (``x-roost-start-timestamp-ms``) with credit for a single one-record chunk, whose
        ``x-stream-offset`` header is the answer. ``info`` is ``stream_info``'s answer:
        times outside the stream's first and last timestamps need no consumer."""
        first_ts = int(info["x-stream-first-timestamp"])
        last_ts = int(info["x-stream-last-timestamp"])
        answers: dict[str, int] = {}
        asked: list[str] = []
        flight = [codec.encode_method_frame(self.channel, m.BasicQos(prefetch_count=1))]
        for i, ts in enumerate(times):
            if ts <= first_ts or ts > last_ts:  # (an empty stream's timestamps are 0)
                continue
            tag = f"roost-time-{i}"
            asked.append(tag)
            flight.append(
                codec.encode_method_frame(
                    self.channel,
                    m.BasicConsume(
                        queue=stream,
                        consumer_tag=tag,
                        arguments={"x-roost-start-timestamp-ms": ts, "x-roost-chunk-bytes": 1},
                    ),
                )
            )
        if asked:
            self.write(b"".join(flight))
            delivering = ""
            body_left = 0  # of the delivery being read: read whole, never half
            while len(answers) < len(asked) or body_left > 0:
                frame = self.next_frame()
                kind = type(frame)
                if kind is codec.MethodFrame:
                    if type(frame.method) is m.BasicDeliver:
                        delivering = frame.method.consumer_tag
                    else:
                        self.handle(frame)
                elif kind is codec.HeaderFrame:
                    body_left = frame.body_size
                    if delivering:
                        headers = codec.decode_properties(frame.properties)[2] or {}
                        answers[delivering] = int(headers["x-stream-offset"])
                        delivering = ""
                elif kind is codec.BodyFrame:
                    body_left -= len(frame.payload)
            for tag in asked:
                self.call(m.BasicCancel(consumer_tag=tag))
        first, next_offset = int(info["x-stream-first-offset"]), int(info["x-stream-next-offset"])
        out = []
        for i, ts in enumerate(times):
            if ts <= first_ts:
                out.append(first)
            elif ts > last_ts:
                out.append(next_offset)
            else:  # appended since the offset query: still within what it saw
                out.append(min(answers[f"roost-time-{i}"], next_offset))
        return out

    def ensure_stream(self, stream: str) -> None:
        """Declare ``stream`` unless a queue of that name exists (whatever its arguments:
        a declare with other ones would be refused)."""
        try:
            self.check_queue(stream)
        except Closed as exc:
            if exc.reply_code != 404:
                raise
            self.reopen()  # the 404 closed the channel
            self.declare_stream(stream)

    def declare_stream(self, stream: str, **arguments: Any) -> None:
        self.call(
            m.QueueDeclare(
                queue=stream, durable=True, arguments={"x-queue-type": "stream", **arguments}
            )
        )


def properties(**values: Any) -> m.BasicProperties:
    return m.BasicProperties(**values)


__all__ = ["Client", "ClientError", "Delivery", "RoostError", "Unreachable", "endpoint",
           "missing_as", "node_down", "node_urls", "properties"]
