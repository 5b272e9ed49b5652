"""An AMQP channel on an asyncio ``Connection``: declare, bind, delete, publish with
confirms, consume with prefetch and acks, basic.get.

Synchronous methods are awaited (their replies come in order, so several may be in
flight); a broker's channel.close fails them with ``ChannelClosed``, whose reply code
says why, and the channel is gone (open another). Publishing never waits: ``publish``
writes and, in confirm mode, returns a future that resolves to True (ack) or False
(nack); ``await drain()`` is the flow control (socket buffer, connection.blocked).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client.connection import ContentReceived, MethodReceived
from roost.client.errors import ClientError
from roost.client.message import Message

if TYPE_CHECKING:
    from roost.client.aio import Connection

OnMessage = Callable[[Message], None]
_EMPTY_PROPERTIES = m.BasicProperties()


_EXPECTED: dict[type[Any], frozenset[int]] = {}


def _expected(kind: type[Any]) -> frozenset[int]:
    """The reply indexes the spec names for a method class (built once per class)."""
    expect = _EXPECTED.get(kind)
    if expect is None:
        expect = _EXPECTED[kind] = frozenset(r.INDEX for r in kind.RESPONSES)
    return expect


class Channel:
    def __init__(self, conn: Connection, number: int) -> None:
        self.conn = conn
        self.number = number
        self.error: BaseException | None = None  # why it ended
        self.on_return: OnMessage | None = None  # mandatory publishes that found no queue
        self.on_end: Callable[[BaseException], None] | None = None  # told once it ends
        self.consumers: dict[str, tuple[OnMessage, Callable[[str], None] | None]] = {}
        self._calls: deque[tuple[frozenset[int], asyncio.Future[Any]]] = deque()
        self._next_tag = -1  # confirm mode: the last publish's sequence number; -1 = off
        self._confirms: dict[int, asyncio.Future[bool]] = {}
        self._floor = 1  # every tag below is settled
        self._consumers_started = 0

    # -- plumbing -------------------------------------------------------------------------

    async def call(self, method: Any, *replies: type[Any]) -> Any:
        """Send ``method`` and wait for its reply (one of ``replies``, else the spec's)."""
        if self.error is not None:
            raise self.error
        expect = _expected(type(method)) if not replies else frozenset(r.INDEX for r in replies)
        fut: asyncio.Future[Any] = self.conn.loop.create_future()
        self._calls.append((expect, fut))
        self.send(method)
        return await fut

    def send(self, method: Any) -> None:
        """Send a method that has no reply (acks, nowait requests)."""
        if self.error is not None:
            raise self.error
        self.conn.write(codec.encode_method_frame(self.number, method))

    async def opening(self) -> None:
        expect = frozenset((m.ChannelOpenOk.INDEX,))
        fut: asyncio.Future[Any] = self.conn.loop.create_future()
        self._calls.append((expect, fut))
        self.conn.flush()  # channel.open, queued by the protocol state
        await fut

    def received(self, event: MethodReceived | ContentReceived) -> None:
        method = event.method
        calls = self._calls
        if type(event) is ContentReceived:
            msg = Message.from_content(method, event.properties, event.body)
            kind = type(method)
            if kind is m.BasicDeliver:
                handlers = self.consumers.get(method.consumer_tag)
                if handlers is not None:
                    handlers[0](msg)
            elif kind is m.BasicGetOk:
                self._resolve(msg)
            elif self.on_return is not None:
                self.on_return(msg)
            return
        if calls and method.INDEX in calls[0][0]:
            self._resolve(method)
        elif type(method) is m.BasicAck or type(method) is m.BasicNack:
            self._settle(method.delivery_tag, method.multiple, type(method) is m.BasicAck)
        elif type(method) is m.BasicCancel:  # the queue went away, or was deleted
            handlers = self.consumers.pop(method.consumer_tag, None)
            if handlers is not None and handlers[1] is not None:
                handlers[1](method.consumer_tag)

    def ended(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
            if self.on_end is not None:
                self.on_end(error)
        while self._calls:
            fut = self._calls.popleft()[1]
            if not fut.done():
                fut.set_exception(error)
        confirms, self._confirms = self._confirms, {}
        for fut in confirms.values():
            if not fut.done():
                fut.set_exception(error)

    def _resolve(self, value: Any) -> None:
        fut = self._calls.popleft()[1]
        if not fut.done():
            fut.set_result(value)

    def _settle(self, tag: int, multiple: bool, ok: bool) -> None:
        confirms = self._confirms
        if multiple:
            tags = range(self._floor, tag + 1)
            self._floor = max(self._floor, tag + 1)
        else:
            tags = range(tag, tag + 1)
        for t in tags:
            fut = confirms.pop(t, None)
            if fut is not None and not fut.done():
                fut.set_result(ok)
        while self._floor not in confirms and self._floor <= self._next_tag:
            self._floor += 1

    # -- declare, bind, delete ------------------------------------------------------------

    async def queue_declare(
        self, queue: str = "", *, passive: bool = False, durable: bool = False,
        exclusive: bool = False, auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> m.QueueDeclareOk:
        """Returns the declare-ok (the name, message and consumer counts)."""
        reply: m.QueueDeclareOk = await self.call(m.QueueDeclare(
            queue=queue, passive=passive, durable=durable, exclusive=exclusive,
            auto_delete=auto_delete, arguments=arguments or {}))
        return reply

    async def queue_bind(self, queue: str, exchange: str, routing_key: str = "",
                         arguments: dict[str, Any] | None = None) -> None:
        await self.call(m.QueueBind(queue=queue, exchange=exchange, routing_key=routing_key,
                                    arguments=arguments or {}))

    async def queue_unbind(self, queue: str, exchange: str, routing_key: str = "",
                           arguments: dict[str, Any] | None = None) -> None:
        await self.call(m.QueueUnbind(queue=queue, exchange=exchange, routing_key=routing_key,
                                      arguments=arguments or {}))

    async def queue_purge(self, queue: str) -> int:
        reply = await self.call(m.QueuePurge(queue=queue))
        return int(reply.message_count)

    async def queue_delete(self, queue: str, *, if_unused: bool = False,
                           if_empty: bool = False) -> int:
        reply = await self.call(m.QueueDelete(queue=queue, if_unused=if_unused,
                                              if_empty=if_empty))
        return int(reply.message_count)

    async def exchange_declare(
        self, exchange: str, type: str = "direct", *, passive: bool = False,
        durable: bool = False, auto_delete: bool = False, internal: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        await self.call(m.ExchangeDeclare(
            exchange=exchange, type=type, passive=passive, durable=durable,
            auto_delete=auto_delete, internal=internal, arguments=arguments or {}))

    async def exchange_delete(self, exchange: str, *, if_unused: bool = False) -> None:
        await self.call(m.ExchangeDelete(exchange=exchange, if_unused=if_unused))

    async def exchange_bind(self, destination: str, source: str, routing_key: str = "",
                            arguments: dict[str, Any] | None = None) -> None:
        await self.call(m.ExchangeBind(destination=destination, source=source,
                                       routing_key=routing_key, arguments=arguments or {}))

    async def exchange_unbind(self, destination: str, source: str, routing_key: str = "",
                              arguments: dict[str, Any] | None = None) -> None:
        await self.call(m.ExchangeUnbind(destination=destination, source=source,
                                         routing_key=routing_key, arguments=arguments or {}))

    # -- publishing -------------------------------------------------------------------------

    async def confirm_select(self) -> None:
        await self.call(m.ConfirmSelect())
        self._next_tag = max(self._next_tag, 0)

    def publish(
        self, exchange: str, routing_key: str, body: bytes,
        properties: m.BasicProperties | None = None, *, mandatory: bool = False,
    ) -> asyncio.Future[bool] | None:
        """Write one message. In confirm mode: a future, True once the broker took
        responsibility for it (ack), False if it refused (nack)."""
        if self.error is not None:
            raise self.error
        self.conn.write(codec.encode_basic_publish(
            self.number, exchange, routing_key, mandatory, False,
            codec.encode_properties(properties or _EMPTY_PROPERTIES), body,
            self.conn.frame_max))
        return self.expect_confirm()

    def expect_confirm(self) -> asyncio.Future[bool] | None:
        """Count one publish on this channel; its confirm future (None outside confirm
        mode). ``publish`` calls it; a caller that writes pre-encoded publish frames
        itself calls it once for each."""
        if self._next_tag < 0:
            return None
        self._next_tag += 1
        fut: asyncio.Future[bool] = self.conn.loop.create_future()
        self._confirms[self._next_tag] = fut
        return fut

    async def drain(self) -> None:
        await self.conn.drain()
        if self.error is not None:
            raise self.error

    # -- consuming ---------------------------------------------------------------------------

    async def qos(self, prefetch_count: int, *, prefetch_size: int = 0,
                  global_: bool = False) -> None:
        await self.call(m.BasicQos(prefetch_size=prefetch_size, prefetch_count=prefetch_count,
                                   global_=global_))

    async def consume(
        self, queue: str, on_message: OnMessage, *, no_ack: bool = False,
        exclusive: bool = False, consumer_tag: str = "",
        arguments: dict[str, Any] | None = None,
        on_cancel: Callable[[str], None] | None = None,
    ) -> str:
        """Start a consumer; returns its tag. ``on_cancel(tag)`` hears the broker cancel
        it (its queue was deleted)."""
        if not consumer_tag:  # ours, not the broker's: deliveries may beat consume-ok here
            self._consumers_started += 1
            consumer_tag = f"roost.ctag-{self.number}.{self._consumers_started}"
        self.consumers[consumer_tag] = (on_message, on_cancel)
        try:
            await self.call(m.BasicConsume(
                queue=queue, consumer_tag=consumer_tag, no_ack=no_ack, exclusive=exclusive,
                arguments=arguments or {}))
        except BaseException:
            self.consumers.pop(consumer_tag, None)
            raise
        return consumer_tag

    async def cancel(self, consumer_tag: str) -> None:
        await self.call(m.BasicCancel(consumer_tag=consumer_tag))
        self.consumers.pop(consumer_tag, None)

    async def get(self, queue: str, *, no_ack: bool = False) -> Message | None:
        """One message, or None when the queue is empty."""
        reply = await self.call(m.BasicGet(queue=queue, no_ack=no_ack))
        return reply if isinstance(reply, Message) else None

    def ack(self, delivery_tag: int, *, multiple: bool = False) -> None:
        self.send(m.BasicAck(delivery_tag=delivery_tag, multiple=multiple))

    def nack(self, delivery_tag: int, *, multiple: bool = False, requeue: bool = True) -> None:
        self.send(m.BasicNack(delivery_tag=delivery_tag, multiple=multiple, requeue=requeue))

    def reject(self, delivery_tag: int, *, requeue: bool = True) -> None:
        self.send(m.BasicReject(delivery_tag=delivery_tag, requeue=requeue))

    async def close(self) -> None:
        """channel.close, and wait for close-ok."""
        if self.error is not None:
            return
        fut: asyncio.Future[None] = self.conn.loop.create_future()
        self._calls.append((frozenset(), fut))  # failed by ``ended`` when close-ok arrives
        self.conn.amqp.close_channel(self.number)
        self.conn.flush()
        with contextlib.suppress(ClientError):
            await fut
