"""The blocking face of the client: one connection, one channel, a plain socket, for
code that runs in ordinary threads (Spark calls the pipeline's readers and writers on
executor threads, where no event loop runs).

Each call sends, then reads until its reply; the codec parses a whole receive buffer at
a time, so a reader that loops over ``next_frame`` (the pipeline's stream reads) costs
no per-frame system call. Heartbeats are sent only while a call waits for the broker:
keep them off (the default here) unless the caller talks to the broker often.
"""

from __future__ import annotations

import socket
from collections import deque
from typing import Any, Self

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client.confirms import ConfirmTracker
from roost.client.connection import (
    ChannelEnded,
    ClientConnection,
    ConnectionEnded,
    ContentReceived,
    Event,
    MethodReceived,
    Opened,
)
from roost.client.errors import ClientError, ConnectError, ConnectionLost
from roost.client.message import Message
from roost.client.tls import client_context, server_hostname
from roost.client.uri import Endpoint, parse_uris

RECV_BYTES = 1 << 20


class BlockingConnection:
    """Connects to the first of ``uris`` that answers and opens channel 1 (``channel``).
    A broker's close raises ``ChannelClosed`` or ``ConnectionClosed``; after a channel
    error, ``reopen()`` gives a fresh channel."""

    def __init__(
        self, uris: str | list[str], *, name: str = "", product: str = "roost",
        heartbeat: int = 0,
    ) -> None:
        self.cancelled: set[str] = set()  # consumer tags the broker cancelled
        self.confirms = ConfirmTracker()
        self.published = 0  # publishes since confirm_select
        self.returned: list[Message] = []  # mandatory publishes that reached no queue
        self._out: list[bytes] = []
        errors: list[tuple[str, BaseException]] = []
        for ep in parse_uris(uris):
            try:
                self._open(ep, name, product, heartbeat)
                break
            except (OSError, TimeoutError, ClientError, ValueError) as exc:
                errors.append((str(ep), exc))
        else:
            raise ConnectError(errors)

    def _open(self, ep: Endpoint, name: str, product: str, heartbeat: int) -> None:
        self.endpoint = ep
        sock = socket.create_connection(ep.address, timeout=ep.connection_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ep.tls:
                sock = client_context(ep).wrap_socket(sock, server_hostname=server_hostname(ep))
            self.sock = sock
            self.amqp = ClientConnection(ep, name=name, product=product, heartbeat=heartbeat)
            self._frames: deque[Any] = deque()
            self.amqp.start()
            self._flush()
            while not isinstance(self._event(self.next_frame()), Opened):
                pass
            if self.amqp.heartbeat:  # wake up in time to send ours while waiting
                sock.settimeout(min(ep.connection_timeout, self.amqp.heartbeat / 2))
            self.channel = 0
            self.reopen()
        except BaseException:
            sock.close()
            raise

    @property
    def frame_max(self) -> int:
        return self.amqp.frame_max

    @property
    def server(self) -> str:
        return self.amqp.server

    # -- frames ---------------------------------------------------------------------------

    def next_frame(self) -> Any:
        """The next frame; blocks on the socket only when none is buffered."""
        frames = self._frames
        waited = 0.0
        while not frames:
            try:
                data = self.sock.recv(RECV_BYTES)
            except TimeoutError:
                waited += self.sock.gettimeout() or 0.0
                if not self.amqp.heartbeat or waited >= self.endpoint.connection_timeout:
                    raise ConnectionLost("timed out waiting for the broker") from None
                self.amqp.tick(waited, 0.0)  # silence so far: we are the one owing a beat
                self._flush()
                continue
            if not data:
                raise ConnectionLost("the broker closed the connection")
            waited = 0.0
            reader = self.amqp.reader
            reader.feed(data)
            frames.extend(reader.frames())
        return frames.popleft()

    def handle(self, frame: Any) -> Event | None:
        """Apply one frame: closes raise, confirms and cancels are noted, the rest is
        returned for the caller to look at."""
        return self._event(frame)

    def _event(self, frame: Any) -> Event | None:
        event = self.amqp.receive(frame)
        if self.amqp.has_data:
            self._flush()
        kind = type(event)
        if kind is MethodReceived:
            method = event.method  # type: ignore[union-attr]
            if type(method) is m.BasicAck or type(method) is m.BasicNack:
                self.confirms.settle(method.delivery_tag, method.multiple,
                                     ok=type(method) is m.BasicAck)
            elif type(method) is m.BasicCancel:
                self.cancelled.add(method.consumer_tag)
        elif kind is ContentReceived and type(event.method) is m.BasicReturn:  # type: ignore[union-attr]
            assert isinstance(event, ContentReceived)
            self.returned.append(Message.from_content(event.method, event.properties,
                                                      event.body))
        elif kind is ConnectionEnded:
            self.sock.close()
            raise event.error or ConnectionLost("the connection was closed")  # type: ignore[union-attr]
        elif kind is ChannelEnded and event.error is not None:  # type: ignore[union-attr]
            raise event.error  # type: ignore[union-attr]
        return event

    def _flush(self) -> None:
        self.sock.sendall(self.amqp.data_to_send())

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, method: Any) -> None:
        self.write(codec.encode_method_frame(self.channel, method))

    def call(self, method: Any, *replies: type[Any]) -> Any:
        """Send ``method`` and read until one of ``replies`` (else the spec's) arrives."""
        self.send(method)
        return self.wait(*(replies or method.RESPONSES))

    def wait(self, *replies: type[Any]) -> Any:
        expect = frozenset(r.INDEX for r in replies)
        while True:
            event = self._event(self.next_frame())
            if type(event) is MethodReceived and event.method.INDEX in expect:
                return event.method
            if type(event) is ContentReceived and event.method.INDEX in expect:
                return Message.from_content(event.method, event.properties, event.body)

    def reopen(self) -> None:
        """Open a channel (after the broker closed ours, or to start afresh)."""
        if self.channel in self.amqp.channels:
            self.amqp.close_channel(self.channel)
            self._flush()
            while not isinstance(self._event(self.next_frame()), ChannelEnded):
                pass
        self.channel = self.amqp.open_channel()
        self._flush()
        self.wait(m.ChannelOpenOk)

    # -- messages ---------------------------------------------------------------------------

    def get(self, queue: str, *, no_ack: bool = False) -> Message | None:
        reply = self.call(m.BasicGet(queue=queue, no_ack=no_ack))
        return reply if isinstance(reply, Message) else None

    def ack(self, delivery_tag: int, *, multiple: bool = False) -> None:
        self.send(m.BasicAck(delivery_tag=delivery_tag, multiple=multiple))

    def confirm_select(self) -> None:
        self.call(m.ConfirmSelect())
        self.confirms = ConfirmTracker()
        self.published = 0

    def publish(
        self, exchange: str, routing_key: str, properties: Any, body: bytes, *,
        mandatory: bool = False,
    ) -> None:
        """Buffer one publish: ``flush_confirmed`` sends the batch."""
        self._out.append(self.publish_frames(exchange, routing_key, properties, body,
                                             mandatory))
        self.published += 1

    def publish_frames(self, exchange: str, routing_key: str, properties: Any, body: bytes,
                       mandatory: bool = False) -> bytes:
        return codec.encode_basic_publish(
            self.channel, exchange, routing_key, mandatory, False,
            codec.encode_properties(properties), body, self.frame_max)

    def flush_confirmed(self, window: int = 0) -> None:
        """Send what is buffered, then read until at most ``window`` publishes are
        unconfirmed (0: all confirmed). Raises ``ClientError`` if the broker nacked any,
        or returned a mandatory one (it returns before it confirms)."""
        if self._out:
            self.write(b"".join(self._out))
            self._out = []
        while self.published - self.confirms.settled > window:
            self._event(self.next_frame())
        if self.confirms.nacked:
            raise ClientError("the broker refused (nacked) some published messages")
        if self.returned:
            r = self.returned[-1]
            raise ClientError(
                f"{len(self.returned)} published message(s) reached no queue ({r.reply_code} "
                f"{r.reply_text}: exchange '{r.exchange}', routing key '{r.routing_key}')")

    # -- life cycle -------------------------------------------------------------------------

    def close(self) -> None:
        """connection.close and its close-ok (errors ignored: we are leaving)."""
        try:
            self.amqp.close()
            self._flush()
            while True:
                self._event(self.next_frame())
        except (ClientError, OSError):
            pass
        finally:
            self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
