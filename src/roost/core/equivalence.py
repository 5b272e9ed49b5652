"""A redeclare must match what it redeclares: RabbitMQ's equivalence checks of an
exchange's and a queue's properties and arguments, with its wording for the 406."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.core.errors import PreconditionFailed
from roost.core.features import alternate
from roost.core.field_types import field_type

if TYPE_CHECKING:
    from roost.core.exchanges import Exchange
    from roost.core.queues.base import Queue

# RabbitMQ compares these queue arguments on redeclare; other arguments are ignored.
EQUIVALENCE_ARGS = (
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-type",
    "x-single-active-consumer",
    "x-delivery-limit",
)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    return str(value)


def _typed(value: Any) -> str:
    """RabbitMQ's wording for an argument on one side of an inequivalence."""
    if value is None:
        return "none"
    kind = field_type(value)
    return f"the value '{_fmt(value)}' of type '{kind}'"


def check_exchange(
    ex: Exchange,
    vhost: str,
    kind: str,
    durable: bool,
    auto_delete: bool,
    internal: bool,
    arguments: dict[str, Any],
) -> None:
    where = f"for exchange '{ex.name}' in vhost '{vhost}'"
    _check_fields(
        where,
        ("type", kind, ex.kind),
        ("durable", durable, ex.durable),
        ("auto_delete", auto_delete, ex.auto_delete),
        ("internal", internal, ex.internal),
    )
    # RabbitMQ compares one exchange argument on redeclare
    _check_argument(where, alternate.ARGUMENT, arguments, ex.arguments)


def _check_argument(
    where: str, key: str, arguments: dict[str, Any], existing: dict[str, Any]
) -> None:
    received, current = arguments.get(key), existing.get(key)
    if received == current:
        return
    if received is None or current is None:  # one side lacks it: name the types
        received_text, current_text = _typed(received), _typed(current)
    else:
        received_text, current_text = f"'{_fmt(received)}'", f"'{_fmt(current)}'"
    raise PreconditionFailed(
        f"inequivalent arg '{key}' {where}: "
        f"received {received_text} but current is {current_text}"
    )


def check_queue(
    q: Queue,
    vhost: str,
    durable: bool,
    exclusive: bool,
    auto_delete: bool,
    arguments: dict[str, Any],
) -> None:
    where = f"for queue '{q.name}' in vhost '{vhost}'"
    _check_fields(
        where,
        ("durable", durable, q.durable),
        ("exclusive", exclusive, q.exclusive),
        ("auto_delete", auto_delete, q.auto_delete),
    )
    for key in EQUIVALENCE_ARGS:
        _check_argument(where, key, arguments, q.arguments)


def _check_fields(where: str, *fields: tuple[str, Any, Any]) -> None:
    """(name, received, current) of each property: the first that differs is a 406."""
    for field, received, current in fields:
        if received != current:
            raise PreconditionFailed(
                f"inequivalent arg '{field}' {where}: "
                f"received '{_fmt(received)}' but current is '{_fmt(current)}'"
            )
