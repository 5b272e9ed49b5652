"""Direct reply-to: RPC replies sent straight to the requesting channel, no reply queue.

As RabbitMQ implements it (checked against 3.10.8 with pika):

- the requester consumes from the pseudo-queue ``amq.rabbitmq.reply-to`` in no-ack mode
  (with acks: 406 ``reply consumer cannot acknowledge``; twice on one channel: 406
  ``reply consumer already set``), without declaring it;
- it publishes requests with ``reply_to = amq.rabbitmq.reply-to`` on that channel; the
  broker rewrites it to ``amq.rabbitmq.reply-to.<token>`` (without a reply consumer on the
  channel: 406 ``fast reply consumer does not exist``);
- the responder publishes the reply to the default exchange with that name as routing
  key; it is delivered at once to the requester's reply consumer, never queued, and
  dropped when that consumer or its channel is gone;
- ``queue.declare`` of ``amq.rabbitmq.reply-to`` succeeds with 0 messages and 1 consumer,
  and of a generated name likewise while its consumer lives, else 404, so a responder can
  check that the requester is still there.

The token is random and names one reply consumer: after a cancel, or on a new consume,
old names lead nowhere. Difference: RabbitMQ 3.10 answers a delivered reply published
with ``mandatory`` by a ``basic.return`` as well; here only an undeliverable one returns.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

from roost.core.errors import NotAllowed, NotFound, PreconditionFailed
from roost.core.queues.base import Queue

if TYPE_CHECKING:
    from roost.core.consumer import Consumer
    from roost.core.message import Message
    from roost.core.session import Session
    from roost.core.vhost import VHost

REPLY_TO = "amq.rabbitmq.reply-to"
PREFIX = REPLY_TO + "."


class ReplyPseudoQueue(Queue):
    """What reply consumers consume from: it never holds a message and is in no vhost's
    queue table; it only tells the registry when a consumer goes (cancel, channel close)."""

    kind = "direct-reply-to"

    def __init__(self, vhost: VHost, registry: DirectReplyTo) -> None:
        super().__init__(vhost, REPLY_TO)
        self.registry = registry

    def check_consume(self, exclusive: bool) -> None:
        """Every channel may have its own reply consumer, exclusive or not."""

    def remove_consumer(self, consumer: Consumer) -> None:
        super().remove_consumer(consumer)
        self.registry.forget(consumer)


class DirectReplyTo:
    """One vhost's reply consumers, by token and by session."""

    def __init__(self, vhost: VHost) -> None:
        self.vhost = vhost
        self.queue = ReplyPseudoQueue(vhost, self)
        self._by_token: dict[str, Consumer] = {}
        self._token_of: dict[Session, str] = {}

    def consume(self, session: Session, tag: str, *, no_ack: bool) -> Consumer:
        if tag in session.consumers:
            raise NotAllowed(f"attempt to reuse consumer tag '{tag}'")
        if session in self._token_of:
            raise PreconditionFailed("reply consumer already set")
        if not no_ack:
            raise PreconditionFailed("reply consumer cannot acknowledge")
        consumer = session.consume(self.queue, tag, no_ack=True, exclusive=False)
        token = base64.urlsafe_b64encode(os.urandom(18)).decode("ascii")
        self._by_token[token] = consumer
        self._token_of[session] = token
        return consumer

    def forget(self, consumer: Consumer) -> None:
        token = self._token_of.pop(consumer.session, None)
        if token is not None:
            self._by_token.pop(token, None)

    def request(self, session: Session, message: Message) -> Message:
        """The request as published: ``reply_to`` names this session's reply consumer."""
        token = self._token_of.get(session)
        if token is None:
            raise PreconditionFailed("fast reply consumer does not exist")
        return message.with_properties(message.properties.replace(reply_to=PREFIX + token))

    def deliver(self, message: Message) -> bool:
        """Hand a reply (routing key ``amq.rabbitmq.reply-to.<token>``) to its consumer;
        False when nobody waits for it any more."""
        consumer = self._by_token.get(message.routing_key[len(PREFIX) :])
        if consumer is None or consumer.session.closed:
            return False
        consumer.session.deliver_direct(consumer.tag, message)
        return True

    def declare(self, name: str) -> Queue:
        """queue.declare of the pseudo-queue or of a generated name (0 messages, 1
        consumer), 404 for a name that leads nowhere."""
        if name == REPLY_TO:
            found: Consumer | None = None
        else:
            found = self._by_token.get(name[len(PREFIX) :]) if name.startswith(PREFIX) else None
            if found is None:
                raise NotFound(f"no queue '{name}' in vhost '{self.vhost.name}'")
        view = Queue(self.vhost, name)  # in no table: only declare-ok reads it
        # RabbitMQ counts one consumer, also for the bare pseudo-queue name
        view.consumers = [found if found is not None else _ANYONE]  # type: ignore[list-item]
        return view


_ANYONE = object()  # stands for "a consumer" in a declare-ok's count
