"""STOMP destinations mapped onto exchanges and queues, as RabbitMQ's STOMP plugin does.

Pure functions (no broker imports): a destination string becomes a ``Destination`` that
says where a SEND is published and what a SUBSCRIBE consumes from. The handler turns
that into core calls, so AMQP clients see the very same queues and exchanges.

- ``/queue/NAME``       durable queue NAME; SEND via the default exchange.
- ``/topic/PATTERN``    ``amq.topic`` with key PATTERN; each SUBSCRIBE gets its own
                        exclusive auto-delete queue (durable when ``durable:true`` + id).
                        ``/topic/prefix*`` (a ``*`` glued to a word) is a prefix
                        subscription: every topic that starts with ``prefix``.
- ``/exchange/NAME/KEY``  any exchange; SUBSCRIBE binds an exclusive queue with KEY.
- ``/amq/queue/NAME``   an existing queue, never declared.
- ``/temp-queue/NAME``  a private reply queue of the connection (see handler).
- ``/reply-queue/NAME`` the AMQP name of someone's temp queue (what ``reply-to`` holds).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from urllib.parse import unquote

# the binding argument that makes a topic exchange match the key as a prefix (what a
# /topic/prefix* subscription binds with; core.exchanges.topic)
PREFIX_ARGUMENT = "x-key-prefix"


class DestinationError(ValueError):
    """An unknown or malformed destination; the text goes into the ERROR frame."""


@dataclass(frozen=True)
class Destination:
    kind: str  # queue, topic, exchange, amq-queue, temp-queue, reply-queue
    name: str  # queue name, topic pattern/key, or exchange name
    key: str = ""  # routing key for exchange destinations
    prefix: str | None = None  # set for /topic/prefix* subscriptions

    @property
    def publish_exchange(self) -> str:
        if self.kind == "topic":
            return "amq.topic"
        if self.kind == "exchange":
            return self.name
        return ""

    @property
    def publish_key(self) -> str:
        if self.kind == "exchange":
            return self.key
        return self.name


def parse(text: str) -> Destination:
    if text.startswith("/queue/"):
        return Destination("queue", _name(text, "/queue/"))
    if text.startswith("/amq/queue/"):
        return Destination("amq-queue", _name(text, "/amq/queue/"))
    if text.startswith("/temp-queue/"):
        return Destination("temp-queue", _name(text, "/temp-queue/"))
    if text.startswith("/reply-queue/"):
        return Destination("reply-queue", _name(text, "/reply-queue/"))
    if text.startswith("/topic/"):
        pattern = _name(text, "/topic/")
        if pattern.endswith("*") and len(pattern) > 1 and pattern[-2] != ".":
            return Destination("topic", pattern, prefix=pattern[:-1])
        return Destination("topic", pattern)
    if text.startswith("/exchange/"):
        rest = text[len("/exchange/") :]
        name, _, key = rest.partition("/")
        if not name:
            raise DestinationError(f"'{text}' is not a valid exchange destination")
        return Destination("exchange", unquote(name), unquote(key))
    raise DestinationError(f"'{text}' is not a valid destination")


def _name(text: str, prefix: str) -> str:
    name = unquote(text[len(prefix) :])
    if not name:
        raise DestinationError(f"'{text}' is not a valid destination")
    return name


def for_message(exchange: str, routing_key: str) -> str:
    """The ``destination`` header of a MESSAGE, from where the message was published."""
    if exchange == "":
        return f"/queue/{routing_key}"
    if exchange == "amq.topic":
        return f"/topic/{routing_key}"
    return f"/exchange/{exchange}/{routing_key}"


def durable_subscription_queue(destination: str, sub_id: str) -> str:
    """The queue of a durable topic subscription, named from its destination and id
    together (RabbitMQ's STOMP plugin hashes both with md5 too): the same id on another
    destination is another subscription with a queue of its own."""
    digest = hashlib.md5(f"{destination}\0{sub_id}".encode(), usedforsecurity=False).digest()
    return "stomp-subscription-" + base64.urlsafe_b64encode(digest).decode().rstrip("=")
