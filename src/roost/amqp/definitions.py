"""A channel's exchange and queue methods: each declares, binds, deletes or purges
through the adapter port, and replies once what it changed is durable
(``AMQPChannel.reply_durably``). Each function takes the channel first, as its own
methods would; ``HANDLERS`` joins them to the channel's table (amqp/handlers.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.amqp import codec_methods as m
from roost.core.errors import NotFound

if TYPE_CHECKING:
    from roost.amqp.handlers import AMQPChannel

# -- exchanges --------------------------------------------------------------------------


def exchange_declare(channel: AMQPChannel, method: m.ExchangeDeclare) -> None:
    completion = channel.broker.durable_from_here()
    channel.broker.declare_exchange(
        channel.client,
        method.exchange,
        method.type,
        passive=method.passive,
        durable=method.durable,
        auto_delete=method.auto_delete,
        internal=method.internal,
        arguments=method.arguments,
    )
    if not method.nowait:
        channel.reply_durably(completion, m.ExchangeDeclareOk())


def exchange_delete(channel: AMQPChannel, method: m.ExchangeDelete) -> None:
    completion = channel.broker.durable_from_here()
    channel.broker.delete_exchange(channel.client, method.exchange, if_unused=method.if_unused)
    if not method.nowait:
        channel.reply_durably(completion, m.ExchangeDeleteOk())


def exchange_bind(channel: AMQPChannel, method: m.ExchangeBind) -> None:
    completion = channel.broker.durable_from_here()
    channel.broker.bind_exchange(
        channel.client, method.destination, method.source, method.routing_key, method.arguments
    )
    if not method.nowait:
        channel.reply_durably(completion, m.ExchangeBindOk())


def exchange_unbind(channel: AMQPChannel, method: m.ExchangeUnbind) -> None:
    completion = channel.broker.durable_from_here()
    channel.broker.unbind_exchange(
        channel.client, method.destination, method.source, method.routing_key, method.arguments
    )
    if not method.nowait:
        channel.reply_durably(completion, m.ExchangeUnbindOk())

# -- queues -----------------------------------------------------------------------------


def queue_name(channel: AMQPChannel, name: str) -> str:
    """An empty queue name means the last queue declared on this channel."""
    if name:
        return name
    if not channel.last_queue:
        raise NotFound("no previously declared queue")
    return channel.last_queue


def queue_declare(channel: AMQPChannel, method: m.QueueDeclare) -> None:
    completion = channel.broker.durable_from_here()
    queue = channel.broker.declare_queue(
        channel.client,
        method.queue,
        passive=method.passive,
        durable=method.durable,
        exclusive=method.exclusive,
        auto_delete=method.auto_delete,
        arguments=method.arguments,
    )
    channel.last_queue = queue.name
    if not method.nowait:

        def declare_ok() -> m.QueueDeclareOk:
            return m.QueueDeclareOk(
                queue=queue.name,
                message_count=queue.message_count,
                consumer_count=queue.consumer_count,
            )

        channel.reply_durably(completion, declare_ok(), declare_ok)


def queue_bind(channel: AMQPChannel, method: m.QueueBind) -> None:
    queue = queue_name(channel, method.queue)
    key = method.routing_key if (method.routing_key or method.queue) else queue
    completion = channel.broker.durable_from_here()
    channel.broker.bind_queue(channel.client, queue, method.exchange, key, method.arguments)
    if not method.nowait:
        channel.reply_durably(completion, m.QueueBindOk())


def queue_unbind(channel: AMQPChannel, method: m.QueueUnbind) -> None:
    queue = queue_name(channel, method.queue)
    completion = channel.broker.durable_from_here()
    channel.broker.unbind_queue(
        channel.client, queue, method.exchange, method.routing_key, method.arguments
    )
    channel.reply_durably(completion, m.QueueUnbindOk())


def queue_purge(channel: AMQPChannel, method: m.QueuePurge) -> None:
    completion = channel.broker.durable_from_here()  # a cluster: the home node purged
    name = queue_name(channel, method.queue)
    count = channel.broker.purge_queue(channel.client, name)
    if not method.nowait:
        queue = channel.broker.queue(channel.client, name)

        def purge_ok() -> m.QueuePurgeOk:  # a cluster's home node answers the count
            return m.QueuePurgeOk(message_count=queue.purged(count))

        channel.reply_durably(completion, m.QueuePurgeOk(message_count=count), purge_ok)


def queue_delete(channel: AMQPChannel, method: m.QueueDelete) -> None:
    completion = channel.broker.durable_from_here()
    count = channel.broker.delete_queue(
        channel.client,
        queue_name(channel, method.queue),
        if_unused=method.if_unused,
        if_empty=method.if_empty,
    )
    if not method.nowait:
        channel.reply_durably(completion, m.QueueDeleteOk(message_count=count))


HANDLERS: dict[int, Callable[[AMQPChannel, Any], None]] = {
    m.ExchangeDeclare.INDEX: exchange_declare,
    m.ExchangeDelete.INDEX: exchange_delete,
    m.ExchangeBind.INDEX: exchange_bind,
    m.ExchangeUnbind.INDEX: exchange_unbind,
    m.QueueDeclare.INDEX: queue_declare,
    m.QueueBind.INDEX: queue_bind,
    m.QueueUnbind.INDEX: queue_unbind,
    m.QueuePurge.INDEX: queue_purge,
    m.QueueDelete.INDEX: queue_delete,
}
