"""The firehose, as RabbitMQ's ``amq.rabbitmq.trace`` (``rabbitmqctl trace_on``).

While a vhost traces (``roost ctl trace_on -p V``, or ``PUT /api/vhosts/V`` with
``{"tracing": true}``), every message published in it is copied to the vhost's
``amq.rabbitmq.trace`` topic exchange with routing key ``publish.<exchange>`` when it
enters, and every delivery with ``deliver.<queue>``; the copy has the original body and
RabbitMQ's headers (``exchange_name``, ``routing_keys``, ``properties``, ``node``,
``vhost``, ``connection``, ``channel``, ``user``, and ``routed_queues`` or
``redelivered``). Bind a queue to the exchange (``#`` for everything) to read them.
Copies of copies are never made. As in RabbitMQ, tracing is not kept across a restart.

Off, it costs one attribute test per publish and per delivery (``vhost.tracer is
None``): bench/ops_cost.py measures both states.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from roost.core.message import Message, Properties

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.exchanges.base import Exchange
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

TRACE_EXCHANGE = "amq.rabbitmq.trace"


def _properties_table(p: Properties) -> dict[str, Any]:
    """The message's properties that are set, by their AMQP names."""
    return {k: v for k, v in p.as_dict().items() if v is not None}


class Tracer:
    def __init__(self, vhost: VHost, node: str) -> None:
        self.vhost = vhost
        self.node = node
        # the client whose publish is being routed now (Messaging.publish sets it), so
        # the copy made at routing (vhost._enqueue) can name its connection and channel
        self.client: Client | None = None
        self.channel = 0
        self.message: Message | None = None

    def publishing(self, client: Client, channel: int, message: Message) -> None:
        self.client, self.channel, self.message = client, channel, message

    def _copy(self, prefix: str, suffix: str, message: Message, extra: dict[str, Any]) -> None:
        vhost = self.vhost
        trace = vhost.exchanges.get(TRACE_EXCHANGE)
        if trace is None or message.exchange == TRACE_EXCHANGE:
            return  # a copy is never traced again
        keys = [message.routing_key]
        headers = message.properties.headers or {}
        for name in ("CC", "BCC"):
            more = headers.get(name)
            if isinstance(more, list):
                keys += [str(k) for k in more]
        table = {
            "exchange_name": message.exchange,
            "routing_keys": keys,
            "properties": _properties_table(message.properties),
            "node": self.node,
            "vhost": vhost.name,
            **extra,
        }
        copy = Message(TRACE_EXCHANGE, f"{prefix}.{suffix}", Properties(headers=table),
                       message.body)  # fmt: skip
        vhost.route_held(trace, copy)

    def _who(self, client: Client | None, channel: int) -> dict[str, Any]:
        if client is None:
            return {"connection": "<internal>", "channel": 0, "user": "rmq-internal"}
        return {"connection": client.name, "channel": channel, "user": client.user.name}

    def published(self, exchange: Exchange, message: Message, queues: Collection[Queue]) -> None:
        """``message`` entered ``exchange`` and reached ``queues``; a message the broker
        routes itself (dead-lettered, released by a delayed exchange) is "<internal>"."""
        ours = message is self.message
        extra = {
            **self._who(self.client if ours else None, self.channel),
            "routed_queues": [q.name for q in queues],
        }
        self._copy("publish", exchange.name, message, extra)

    def delivered(
        self, queue: Queue, message: Message, redelivered: bool, client: Client, channel: int
    ) -> None:
        extra = {"redelivered": 1 if redelivered else 0, **self._who(client, channel)}
        self._copy("deliver", queue.name, message, extra)
