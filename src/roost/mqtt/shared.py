"""Shared subscriptions (MQTT 5 spec 4.8.2): ``$share/GROUP/filter``.

One queue per group and filter, ``mqtt-shared-GROUP-<routing key>``, bound to
``amq.topic`` with the filter's key; every member connection consumes it (QoS 0 members
without acks, QoS 1 members acked by PUBACK), so the queue spreads its messages across
the group's members, each message to one of them, and a QoS 1 message a member leaves
unacknowledged goes to another member. The queue is durable when the first member that
declares it has a persistent session (then it keeps messages while the group has no
member), else auto-delete: it goes with its last member.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core.errors import BrokerError, NotFound
from roost.mqtt import mapping
from roost.mqtt.subscriptions import Subscriptions, shared_queue, shared_tag
from roost.mqtt.topics import split_shared

if TYPE_CHECKING:
    from roost.core import AdapterPort
    from roost.core.ports.adapter import Client, Consumer, Session

log = logging.getLogger("roost.mqtt")


def join(
    port: AdapterPort, client: Client, session: Session, full_filter: str,
    group: str, topic_filter: str, qos: int, *, persistent: bool,
    arguments: dict[str, Any], prefetch: int,
) -> Consumer | None:
    """Declare (if need be) and bind the group's queue and consume it; the consumer to
    start after the SUBACK, or None when this connection already consumes it (a
    SUBSCRIBE repeated: only its options change)."""
    name = shared_queue(group, topic_filter)
    tag = shared_tag(full_filter)
    current = session.consumers.get(tag)
    if current is not None:
        if current.no_ack == (qos == 0):
            return None
        session.cancel(tag)  # subscribed again at the other QoS: consume anew
    try:
        port.queue(client, name)
    except NotFound:
        port.declare_queue(
            client, name, durable=persistent, auto_delete=not persistent,
            arguments=arguments if persistent else {},
        )
    port.bind_queue(client, name, mapping.EXCHANGE, mapping.routing_key(topic_filter), {})
    session.prefetch_count = prefetch if qos else 0
    try:
        return port.consume(session, name, tag, no_ack=qos == 0, exclusive=False)
    finally:
        session.prefetch_count = 0


def leave(session: Session, full_filter: str) -> bool:
    """Stop consuming the group's queue (an auto-delete one goes with its last member);
    False when this connection was no member."""
    return session.cancel(shared_tag(full_filter))


def rejoin(
    saved: Subscriptions, join: Callable[[str, str, str, int], Consumer | None], peer: str
) -> list[Consumer]:
    """A persistent session's next connection consumes its groups' queues again (``join``
    is the session's); a group whose queue is gone or refused is left, with a warning."""
    consumers = []
    for full_filter, options in saved.shared.items():
        group = split_shared(full_filter)
        assert group is not None
        try:
            consumer = join(full_filter, group[0], group[1], options.qos)
        except BrokerError as exc:
            log.warning("%s: shared subscription %s not resumed: %s", peer, full_filter, exc.text)
            continue
        if consumer is not None:
            consumers.append(consumer)
    return consumers
