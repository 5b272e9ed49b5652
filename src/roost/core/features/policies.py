"""Policies applied to queues: the highest-priority matching policy's queue keys
(message-ttl, expires, dead-letter-*, max-length*, overflow, delivery-limit, and
message-mutators with message-mutator-args: core.mutators) merged with
each queue's arguments (core.features.settings), at declaration and whenever a policy
is set or deleted, to every existing queue of its vhost at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from roost.core.events import (
    Event,
    ExchangeDeclared,
    OperatorPolicyChanged,
    OperatorPolicyDeleted,
    PolicyChanged,
    PolicyDeleted,
    QueueDeclared,
    QueueDeleted,
    VHostChanged,
)
from roost.core.features.lifecycle import QueueFeatures
from roost.core.features.settings import QueueSettings, resolve
from roost.core.mutators import chain_for
from roost.core.policy import effective_policy, merge_operator

if TYPE_CHECKING:
    from roost.core.events import Listener
    from roost.core.exchanges.base import Exchange
    from roost.core.policy import Policy
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.policies")


class Definitions(Protocol):
    """What the applier reads of the definitions (core.catalog.Catalog)."""

    policies: dict[tuple[str, str], Policy]
    vhosts: dict[str, VHost]

    @property
    def operator_policies(self) -> dict[tuple[str, str], Policy]: ...
    on_change: list[Listener]

    def policy_definition(self, vhost: str, kind: str, name: str) -> dict[str, Any] | None: ...


def queue_policy(defs: Definitions, queue: Queue) -> dict[str, Any] | None:
    """The definition in force for ``queue``: its policy's, with its operator policy's
    limits over it (the lower value of each key both set), if either applies."""
    vhost = queue.vhost.name
    matching = [p for (v, _), p in defs.policies.items() if v == vhost]
    policy = effective_policy(matching, "queue", queue.name, queue.kind) if matching else None
    definition = None if policy is None else policy.definition
    operators = defs.operator_policies
    if operators:
        mine = [p for (v, _), p in operators.items() if v == vhost]
        operator = effective_policy(mine, "queue", queue.name, queue.kind) if mine else None
        if operator is not None:
            return merge_operator(definition, operator.definition)
    return definition


def apply_to_queue(defs: Definitions, queue: Queue) -> None:
    """(Re)compute a queue's settings; attach its features when they are needed."""
    if queue.kind == "stream" or queue.deleted:
        return  # streams keep their own retention (core/queues/stream.py)
    definition = queue_policy(defs, queue)
    queue.mutators = chain_for(definition)
    settings = resolve(queue.arguments, definition)
    features = queue.features
    if features is None:
        if not settings.active:
            return
        features = queue.features = QueueFeatures(queue, QueueSettings())
    if settings != features.settings:
        features.configure(settings)  # a queue already holding messages is trimmed


def apply_to_exchange(defs: Definitions, exchange: Exchange) -> None:
    """An exchange runs the message mutators of the policy that applies to it."""
    if exchange.name and not exchange.deleted:  # never the default exchange
        definition = defs.policy_definition(exchange.vhost, "exchange", exchange.name)
        exchange.mutators = chain_for(definition)


def _isolated(apply: Callable[[Definitions, Any], None], defs: Definitions, obj: Any) -> None:
    """One object that cannot take a policy (a bug) must not keep it from the others."""
    try:
        apply(defs, obj)
    except Exception:
        log.exception("applying policies to %r failed", obj)


def apply_policies(defs: Definitions) -> None:
    """Install the listeners: on vhosts (a queue declared or deleted) and on the broker
    (a policy set or deleted, a vhost added). Installed before the store's listeners, so
    a recovered queue has its settings before its messages come back."""

    def on_queue_change(event: Event) -> None:
        match event:
            case QueueDeclared(queue=queue):
                apply_to_queue(defs, queue)
            case ExchangeDeclared(exchange=exchange):
                apply_to_exchange(defs, exchange)
            case QueueDeleted(queue=queue) if queue.features is not None:
                queue.features.close()

    def watch(vhost: VHost) -> None:
        if on_queue_change not in vhost.on_change:
            vhost.on_change.insert(0, on_queue_change)

    def on_broker_change(event: Event) -> None:
        if isinstance(event, VHostChanged):
            watch(event.vhost)
        elif isinstance(
            event, PolicyChanged | PolicyDeleted | OperatorPolicyChanged | OperatorPolicyDeleted
        ):
            vhost = defs.vhosts.get(event.policy.vhost)
            if vhost is not None:
                for queue in list(vhost.queues.values()):
                    _isolated(apply_to_queue, defs, queue)
                for exchange in list(vhost.exchanges.values()):
                    _isolated(apply_to_exchange, defs, exchange)

    defs.on_change.insert(0, on_broker_change)
    for vhost in defs.vhosts.values():
        watch(vhost)
