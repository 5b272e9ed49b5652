"""RabbitMQ's global counters per protocol (rabbitmq_global_* in /metrics): lifetime sums
over open and closed connections, how many of them publish and consume now, and the error
answers each protocol gave."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roost.core.client import ClientCounts, protocol_label
from roost.core.info import ProtocolTotals

if TYPE_CHECKING:
    from roost.core.connections import Connections
    from roost.core.stats import Counters

PROTOCOLS = ("amqp091", "stomp", "stream")  # always listed, as RabbitMQ lists its enabled ones


def protocol_totals(counters: Counters, connections: Connections) -> list[ProtocolTotals]:
    """The global counters per protocol (AMQP 0-9-1, STOMP, MQTT, the stream
    protocol), with the error answers each gave (``Counters.protocol_errors``)."""
    sums: dict[str, ClientCounts] = {p: ClientCounts() for p in PROTOCOLS}
    publishers: dict[str, int] = dict.fromkeys(PROTOCOLS, 0)
    consumers: dict[str, int] = dict.fromkeys(PROTOCOLS, 0)
    for label, retired in counters.retired_counts.items():
        sums.setdefault(label, ClientCounts()).add(retired)
    for client in connections:
        label = protocol_label(client.protocol)
        sums.setdefault(label, ClientCounts()).add(client.counts)
        if client.counts.received:
            publishers[label] = publishers.get(label, 0) + 1
        consumers[label] = consumers.get(label, 0) + sum(
            len(s.consumers) for s in client.sessions
        )
    return [
        ProtocolTotals(
            label,
            c.received,
            c.confirm_received,
            c.unroutable,
            c.returned,
            c.confirmed,
            c.consume_auto_ack,
            c.consume_manual_ack,
            c.get_auto_ack,
            c.get_manual_ack,
            c.get_empty,
            publishers.get(label, 0),
            consumers.get(label, 0),
            tuple(c.sizes),
            tuple(
                (name, n)
                for (protocol, name), n in counters.protocol_errors.items()
                if protocol == label
            ),
            c.size_sum,
        )
        for label, c in sums.items()
    ]
