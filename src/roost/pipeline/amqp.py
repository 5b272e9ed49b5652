"""A small blocking AMQP 0-9-1 client on Roost's sans-IO codec, for Spark tasks.

Spark calls ``read``/``write`` on executors in plain threads: a blocking socket is the
simplest fit, and the codec parses a whole receive buffer at a time (no per-frame
awaits), which is what makes reading fast. One connection, channel 1.
"""

from __future__ import annotations

import contextlib
import socket
import urllib.parse
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from roost.amqp import codec
from roost.amqp import codec_methods as m

CHANNEL = 1
FRAME_MAX = 131072


class RoostError(Exception):
    """The broker refused something; ``code`` is the AMQP reply code (0: not a reply)."""

    def __init__(self, text: str, code: int = 0) -> None:
        super().__init__(f"{code} {text}" if code else text)
        self.code = code
        self.text = text


@contextlib.contextmanager
def missing_as(text: str) -> Iterator[None]:
    """The broker's 404 re-raised as ``text``, which names what the user asked for;
    any other failure passes unchanged."""
    try:
        yield
    except RoostError as exc:
        if exc.code == 404:
            raise RoostError(text, 404) from None
        raise


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    user: str
    password: str
    vhost: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "amqp" or not parts.hostname:
            raise RoostError(f"not an amqp://user:pass@host:port/vhost URL: {url!r}")
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        return cls(
            parts.hostname,
            parts.port or 5672,
            urllib.parse.unquote(parts.username or "guest"),
            urllib.parse.unquote(parts.password or "guest"),
            urllib.parse.unquote(path) if path else "/",
        )


@dataclass
class Delivery:
    tag: int
    exchange: str
    routing_key: str
    properties: tuple[Any, ...]  # the 14 basic properties in spec order
    body: bytes


class Client:
    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self.endpoint = ep = Endpoint.parse(url)
        try:
            self.sock = socket.create_connection((ep.host, ep.port), timeout=timeout)
        except OSError as exc:
            raise RoostError(f"cannot connect to {ep.host}:{ep.port}: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = codec.FrameReader(frame_max=FRAME_MAX, expect_protocol_header=False)
        self.frame_max = FRAME_MAX
        self.cancelled: set[str] = set()
        self.confirmed = 0  # highest publish sequence number settled
        self.nacked = False
        self.returned = 0  # mandatory publishes the broker could not route
        self.return_reason = ""
        self._out: list[bytes] = []
        self._pending: deque[Any] = deque()
        self.published = 0
        try:
            self.sock.sendall(codec.PROTOCOL_HEADER)
            self._handshake()
        except (RoostError, OSError) as exc:
            self.sock.close()
            text = exc.text if isinstance(exc, RoostError) else str(exc)
            code = exc.code if isinstance(exc, RoostError) else 0
            raise RoostError(
                f"cannot open vhost '{ep.vhost}' on {ep.host}:{ep.port} as user "
                f"'{ep.user}': {text}",
                code,
            ) from None

    # -- frames ---------------------------------------------------------------------------

    def _next(self) -> Any:
        """The next frame; blocks on the socket only when none is buffered."""
        pending = self._pending
        while not pending:
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                raise RoostError("timed out waiting for the broker") from None
            if not data:
                raise RoostError("the broker closed the connection")
            self.reader.feed(data)
            pending.extend(self.reader.frames())
        return pending.popleft()

    def _control(self, method: Any) -> None:
        """Methods outside the expected flow: closes raise, cancels and confirms note."""
        kind = type(method)
        if kind is m.ConnectionClose:
            self._send(codec.encode_method_frame(0, m.ConnectionCloseOk()))
            raise RoostError(method.reply_text, method.reply_code)
        if kind is m.ChannelClose:
            self._send(codec.encode_method_frame(CHANNEL, m.ChannelCloseOk()))
            raise RoostError(method.reply_text, method.reply_code)
        if kind is m.BasicCancel:
            self.cancelled.add(method.consumer_tag)
        elif kind is m.BasicReturn:  # its header and body frames follow, and are skipped
            self.returned += 1
            self.return_reason = (
                f"{method.reply_code} {method.reply_text}: exchange '{method.exchange}', "
                f"routing key '{method.routing_key}'"
            )
        elif kind is m.BasicAck or kind is m.BasicNack:
            if kind is m.BasicNack:
                self.nacked = True
            self.confirmed = max(self.confirmed, method.delivery_tag)

    def _send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, method: Any, *replies: type[Any], channel: int = CHANNEL) -> Any:
        self._send(codec.encode_method_frame(channel, method))
        return self._wait(replies)

    def _wait(self, replies: tuple[type[Any], ...]) -> Any:
        while True:
            frame = self._next()
            if type(frame) is codec.HeartbeatFrame:
                self._send(codec.encode_heartbeat())
            elif type(frame) is codec.MethodFrame:
                if type(frame.method) in replies:
                    return frame.method
                self._control(frame.method)

    def _handshake(self) -> None:
        ep = self.endpoint
        self._wait((m.ConnectionStart,))
        tune = self.call(
            m.ConnectionStartOk(
                client_properties={
                    "product": "roost-pipeline",
                    "capabilities": {
                        "publisher_confirms": True,
                        "consumer_cancel_notify": True,
                        "authentication_failure_close": True,
                    },
                },
                mechanism="PLAIN",
                response=f"\0{ep.user}\0{ep.password}".encode(),
                locale="en_US",
            ),
            m.ConnectionTune,
            channel=0,
        )
        self.frame_max = min(tune.frame_max or FRAME_MAX, FRAME_MAX)
        self._send(
            codec.encode_method_frame(
                0,
                m.ConnectionTuneOk(
                    channel_max=tune.channel_max, frame_max=self.frame_max, heartbeat=0
                ),
            )
        )
        self.call(m.ConnectionOpen(virtual_host=ep.vhost), m.ConnectionOpenOk, channel=0)
        self.call(m.ChannelOpen(), m.ChannelOpenOk)

    def close(self) -> None:
        try:
            self.call(
                m.ConnectionClose(reply_code=200, reply_text="bye", class_id=0, method_id=0),
                m.ConnectionCloseOk,
                channel=0,
            )
        except (RoostError, OSError):
            pass
        finally:
            self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- streams --------------------------------------------------------------------------

    def stream_info(self, stream: str) -> dict[str, Any]:
        """First and next offsets (and producers' last ids) in one round trip: a basic.get
        on a stream answers with an empty message carrying them as headers."""
        # no_ack=False: should the queue be a classic one, its message goes back
        self._send(codec.encode_method_frame(CHANNEL, m.BasicGet(queue=stream, no_ack=False)))
        reply = self._wait((m.BasicGetOk, m.BasicGetEmpty))
        if type(reply) is m.BasicGetEmpty:
            raise RoostError(f"queue '{stream}' is not a stream")
        delivery = self._content(reply.delivery_tag, reply)
        headers = delivery.properties[2] or {}
        if "x-stream-next-offset" not in headers:
            self._send(
                codec.encode_method_frame(
                    CHANNEL, m.BasicReject(delivery_tag=delivery.tag, requeue=True)
                )
            )
            raise RoostError(f"queue '{stream}' is not a stream")
        self._send(codec.encode_method_frame(CHANNEL, m.BasicAck(delivery_tag=delivery.tag)))
        return dict(headers)

    def _content(self, tag: int, method: Any) -> Delivery:
        header: Any = None
        chunks: list[bytes] = []
        size = 0
        while header is None or size < header.body_size:
            frame = self._next()
            if type(frame) is codec.HeaderFrame:
                header = frame
            elif type(frame) is codec.BodyFrame:
                chunks.append(frame.payload)
                size += len(frame.payload)
        return Delivery(
            tag,
            method.exchange,
            method.routing_key,
            codec.decode_properties(header.properties),
            b"".join(chunks),
        )

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
        ``chunk_bytes`` each delivery is a chunk of records (``roost.pipeline.chunks``)."""
        if end <= start:
            return
        self.call(m.BasicQos(prefetch_count=prefetch), m.BasicQosOk)
        ok = self.call(
            m.BasicConsume(
                queue=stream,
                consumer_tag="",
                arguments={
                    "x-stream-offset": start,
                    "x-stream-end-offset": end,
                    **({"x-roost-chunk-bytes": chunk_bytes} if chunk_bytes else {}),
                },
            ),
            m.BasicConsumeOk,
        )
        tag = ok.consumer_tag
        unacked = 0
        last_tag = 0
        method: Any = None
        header: Any = None
        chunks: list[bytes] = []
        size = 0
        next_frame = self._next
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
                    self._control(frame.method)
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
                    self._ack(last_tag)
                    unacked = 0
        if unacked:
            self._ack(last_tag)

    def _ack(self, tag: int) -> None:
        self._send(codec.encode_method_frame(CHANNEL, m.BasicAck(delivery_tag=tag, multiple=True)))

    # -- publishing -----------------------------------------------------------------------

    def confirm_select(self) -> None:
        self.call(m.ConfirmSelect(), m.ConfirmSelectOk)
        self.published = 0

    def publish(
        self,
        exchange: str,
        routing_key: str,
        properties: Any,
        body: bytes,
        *,
        mandatory: bool = False,
    ) -> None:
        """Buffer one publish; ``flush_confirmed`` sends the batch and waits for confirms.
        A ``mandatory`` one that reaches no queue makes ``flush_confirmed`` fail."""
        self._out.append(self._publish_frames(exchange, routing_key, properties, body, mandatory))
        self.published += 1

    def _publish_frames(
        self, exchange: str, routing_key: str, properties: Any, body: bytes, mandatory: bool
    ) -> bytes:
        return codec.encode_basic_publish(
            CHANNEL,
            exchange,
            routing_key,
            mandatory,
            False,
            codec.encode_properties(properties),
            body,
            self.frame_max,
        )

    def flush_confirmed(self, window: int = 0) -> None:
        """Send what is buffered, then wait until at most ``window`` publishes are
        unconfirmed: a window keeps the broker busy (its fsync, our encoding) while
        confirms come back; 0 waits for all of them."""
        if self._out:
            self._send(b"".join(self._out))
            self._out = []
        while self.published - self.confirmed > window:
            frame = self._next()
            if type(frame) is codec.MethodFrame:
                self._control(frame.method)
        if self.nacked:
            raise RoostError("the broker refused (nacked) some published messages")
        if self.returned:
            # the broker returns an unroutable message before it confirms it
            raise RoostError(
                f"{self.returned} published message(s) reached no queue ({self.return_reason})"
            )

    def is_stream(self, queue: str) -> bool:
        """Whether ``queue`` is a stream this user may read, asked without touching a
        classic queue's messages: a producer query (``amq.roost.producers``) is answered
        for a stream and refused with a channel error otherwise."""
        reply_to = "amq.rabbitmq.reply-to"
        self.call(m.BasicConsume(queue=reply_to, no_ack=True), m.BasicConsumeOk)
        query = properties(reply_to=reply_to, headers={"x-stream-producer-name": "roost-probe"})
        # sent now, not buffered: not a publish that flush_confirmed should wait for
        self._send(self._publish_frames("amq.roost.producers", queue, query, b"", False))
        try:
            self._wait((m.BasicDeliver,))
        except RoostError as exc:
            if not exc.code:
                raise
            self.call(m.ChannelOpen(), m.ChannelOpenOk)  # the refusal closed the channel
            return False
        # closing the channel drops the reply's content frames and the reply consumer
        self.call(
            m.ChannelClose(reply_code=200, reply_text="", class_id=0, method_id=0),
            m.ChannelCloseOk,
        )
        self.call(m.ChannelOpen(), m.ChannelOpenOk)
        return True

    def check_exchange(self, exchange: str) -> None:
        """Fails (404) unless ``exchange`` exists; "" is the default exchange."""
        if exchange:
            self.call(m.ExchangeDeclare(exchange=exchange, passive=True), m.ExchangeDeclareOk)

    def check_queue(self, queue: str) -> None:
        """Fails (404) unless ``queue`` exists."""
        self.call(m.QueueDeclare(queue=queue, passive=True), m.QueueDeclareOk)

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
        flight = [codec.encode_method_frame(CHANNEL, m.BasicQos(prefetch_count=1))]
        for i, ts in enumerate(times):
            if ts <= first_ts or ts > last_ts:  # (an empty stream's timestamps are 0)
                continue
            tag = f"roost-time-{i}"
            asked.append(tag)
            flight.append(
                codec.encode_method_frame(
                    CHANNEL,
                    m.BasicConsume(
                        queue=stream,
                        consumer_tag=tag,
                        arguments={"x-roost-start-timestamp-ms": ts, "x-roost-chunk-bytes": 1},
                    ),
                )
            )
        if asked:
            self._send(b"".join(flight))
            delivering = ""
            while len(answers) < len(asked):
                frame = self._next()
                if type(frame) is codec.MethodFrame:
                    if type(frame.method) is m.BasicDeliver:
                        delivering = frame.method.consumer_tag
                    else:
                        self._control(frame.method)
                elif type(frame) is codec.HeaderFrame and delivering:
                    headers = codec.decode_properties(frame.properties)[2] or {}
                    answers[delivering] = int(headers["x-stream-offset"])
                    delivering = ""
            for tag in asked:
                self.call(m.BasicCancel(consumer_tag=tag), m.BasicCancelOk)
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
        except RoostError as exc:
            if exc.code != 404:
                raise
            self.call(m.ChannelOpen(), m.ChannelOpenOk)  # the 404 closed the channel
            self.declare_stream(stream)

    def declare_stream(self, stream: str, **arguments: Any) -> None:
        self.call(
            m.QueueDeclare(
                queue=stream, durable=True, arguments={"x-queue-type": "stream", **arguments}
            ),
            m.QueueDeclareOk,
        )


def properties(**values: Any) -> m.BasicProperties:
    return m.BasicProperties(**values)
