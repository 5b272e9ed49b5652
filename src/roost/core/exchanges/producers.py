"""``amq.roost.producers``: ask a stream for one producer's last publishing id.

A request-reply call, as RabbitMQ users make RPCs: publish (body ignored) with the
stream's name as routing key (or header ``x-stream``), header ``x-stream-producer-name``,
``reply_to`` (a queue's name, or ``amq.rabbitmq.reply-to``) and, usually, a
``correlation_id``. The broker answers at once with an empty message to ``reply_to``
whose headers are ``x-stream``, ``x-stream-producer-name`` and ``x-publishing-id`` — the
last id the stream stored for that producer, absent when the stream knows no such
producer — and whose ``correlation_id`` is the request's. It works for any producer,
however many a stream has seen (the offset query's table lists only the most recent).

Nothing is routed (the request is answered, not queued). Rights: write on this exchange,
like any publish; read on the stream, like the offset query (``basic.get``); and, when
``reply_to`` names a queue, write on the default exchange, since the reply is a publish
to it (a direct reply goes back to the requesting channel and needs nothing more). A
missing stream or reply queue is a 404 channel error; a queue that is not a stream, a
request without the producer header or ``reply_to``, a 406, as for amq.roost.offsets.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from roost.core.errors import NotFound, PreconditionFailed
from roost.core.exchanges.base import Destination, Exchange
from roost.core.exchanges.offsets import target_stream
from roost.core.features.direct_reply import REPLY_TO
from roost.core.message import Message, Properties, header_text
from roost.core.queues.stream import PRODUCER_HEADER, PUBLISHING_ID_HEADER

if TYPE_CHECKING:
    from roost.core.access import Access
    from roost.core.vhost import VHost

PRODUCERS_EXCHANGE = "amq.roost.producers"


class ProducersExchange(Exchange):
    """The exchange exists (declare passive, listings, rights) but routes nothing: the
    broker answers what is published to it with ``answer`` before any routing."""

    kind = "x-roost-producers"

    def __init__(self, vhost: str) -> None:
        super().__init__(vhost, PRODUCERS_EXCHANGE, True, False, False, {})

    def bind(self, destination: Destination, routing_key: str, arguments: dict[str, Any]) -> None:
        raise PreconditionFailed(f"cannot bind to exchange '{PRODUCERS_EXCHANGE}'")

    def route(self, message: Message) -> Collection[Destination]:
        return ()


def last_publishing_id(
    vhost: VHost, access: Access | None, stream: str, producer: str
) -> int | None:
    """The last publishing id ``stream`` stored for ``producer`` (None: it knows no such
    producer), for a user who may read the stream."""
    if access is not None:
        access.check("read", "queue", stream)
    queue = vhost.queues.get(stream)
    if queue is None:
        raise NotFound(f"no queue '{stream}' in vhost '{vhost.name}'")
    lookup = getattr(queue, "last_publishing_id", None)
    if lookup is None:
        raise PreconditionFailed(f"queue '{stream}' in vhost '{vhost.name}' is not a stream")
    found: int | None = lookup(producer)
    return found


def answer(vhost: VHost, access: Access | None, message: Message) -> None:
    """Answer a request published to amq.roost.producers (see the module docstring)."""
    headers = message.properties.headers or {}
    stream = target_stream(message)
    producer = header_text(headers.get(PRODUCER_HEADER))
    reply_to = message.properties.reply_to
    found = last_publishing_id(vhost, access, stream, producer)  # 403, 404, 406 first
    if not producer or not reply_to:
        raise PreconditionFailed(
            f"a producer query needs header {PRODUCER_HEADER} and the reply_to property"
        )
    direct = reply_to.startswith(REPLY_TO)
    if not direct:
        if access is not None:
            access.check("write", "exchange", "")
        if reply_to not in vhost.queues:
            raise NotFound(f"no queue '{reply_to}' in vhost '{vhost.name}'")
    out: dict[str, Any] = {"x-stream": stream, PRODUCER_HEADER: producer}
    if found is not None:
        out[PUBLISHING_ID_HEADER] = found
    reply = Message(
        "", reply_to, Properties(headers=out, correlation_id=message.properties.correlation_id), b""
    )
    routed, _refused = vhost.publish("", reply)
    if direct and not routed:
        # a reply_to the broker did not rewrite (no reply consumer on that channel)
        raise PreconditionFailed("fast reply consumer does not exist")
