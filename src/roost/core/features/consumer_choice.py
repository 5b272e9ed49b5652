"""Which consumer gets the next message, when plain round robin is not the answer.

- Consumer priorities (the ``x-priority`` consumer argument): a message goes to the
  highest-priority consumers that have credit, round robin among equals; lower ones get
  messages only while every higher one is blocked by its prefetch window.
- Single active consumer (the ``x-single-active-consumer`` queue argument): only the
  earliest registered consumer receives; when it is cancelled or its channel closes,
  the next in registration order takes over (RabbitMQ 3.10 ignores consumer priorities
  here for classic queues, and so does Roost).

A queue without either keeps ``chooser`` at None and its fast round robin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from roost.core.errors import PreconditionFailed
from roost.core.field_types import field_type as amqp_type

if TYPE_CHECKING:
    from roost.core.consumer import Consumer
    from roost.core.queues.base import Queue

SAC_ARGUMENT = "x-single-active-consumer"
PRIORITY_ARGUMENT = "x-priority"


class Chooser(Protocol):
    def pick(self) -> Consumer | None:
        """The consumer to hand the next message to, or None when nobody may take it."""

    def is_active(self, consumer: Consumer) -> bool: ...


class SingleActive:
    __slots__ = ("consumers",)

    def __init__(self, consumers: list[Consumer]) -> None:
        self.consumers = consumers  # the queue's list, in registration order

    def pick(self) -> Consumer | None:
        active = self.consumers[0] if self.consumers else None
        return active if active is not None and active.has_credit() else None

    def is_active(self, consumer: Consumer) -> bool:
        return bool(self.consumers) and self.consumers[0] is consumer


class ByPriority:
    """Groups of equal priority, highest first, each with its own round-robin cursor."""

    __slots__ = ("cursors", "groups")

    def __init__(self, consumers: list[Consumer]) -> None:
        levels = sorted({c.priority for c in consumers}, reverse=True)
        self.groups = [[c for c in consumers if c.priority == p] for p in levels]
        self.cursors = [0] * len(levels)

    def pick(self) -> Consumer | None:
        cursors = self.cursors
        for i, group in enumerate(self.groups):
            n = len(group)
            for _ in range(n):
                consumer = group[cursors[i] % n]
                cursors[i] += 1
                if consumer.has_credit():
                    return consumer
        return None

    def is_active(self, consumer: Consumer) -> bool:
        return True


def chooser_for(queue: Queue) -> Chooser | None:
    """The queue's chooser after its consumers changed (None: plain round robin)."""
    consumers = queue.consumers
    if queue.single_active:
        return SingleActive(consumers)
    if len({c.priority for c in consumers}) > 1:
        return ByPriority(consumers)
    return None




def invalid_arg(key: str, vhost: str, queue: str, detail: str) -> PreconditionFailed:
    return PreconditionFailed(
        f"invalid arg '{key}' for queue '{queue}' in vhost '{vhost}': {detail}"
    )


def single_active_argument(vhost: str, queue: str, arguments: dict[str, Any]) -> bool:
    """The ``x-single-active-consumer`` flag; RabbitMQ accepts booleans only."""
    value = arguments.get(SAC_ARGUMENT)
    if value is None:
        return False
    if not isinstance(value, bool):
        detail = "{unacceptable_type," + amqp_type(value) + "}"
        raise invalid_arg(SAC_ARGUMENT, vhost, queue, detail)
    return value


def check_consumer_arguments(queue: Queue, arguments: dict[str, Any]) -> None:
    """``x-priority`` must be an integer (RabbitMQ's check and wording)."""
    value = arguments.get(PRIORITY_ARGUMENT)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        detail = f'"expected integer, got {amqp_type(value)}"'
        raise invalid_arg(PRIORITY_ARGUMENT, queue.vhost.name, queue.name, detail)
