"""Alternate exchanges: where an exchange sends what it cannot route.

As RabbitMQ: the exchange argument ``alternate-exchange`` (a string) or, when the argument
is absent, the ``alternate-exchange`` key of the policy that applies to the exchange. It
is looked up when a message is routed, so it may be declared later, changed by a policy
at any time, or be missing (then the message is unroutable). Every exchange on the way
(exchange-to-exchange bindings, alternates of alternates) that routes a message nowhere
hands it to its own alternate; an exchange is visited once, so cycles end. A message
routed through an alternate counts as routed: ``mandatory`` does not return it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.core.errors import PreconditionFailed
from roost.core.field_types import field_type

ARGUMENT = "alternate-exchange"

# (kind "exchange" or "queue", name) -> the definition of the policy that applies, or None
PolicyLookup = Callable[[str, str], dict[str, Any] | None]


def no_policy(kind: str, name: str) -> dict[str, Any] | None:
    return None


def check_argument(arguments: dict[str, Any], exchange: str, vhost: str) -> None:
    """At declare: the argument must be a string (RabbitMQ's wording)."""
    value = arguments.get(ARGUMENT)
    if value is not None and not isinstance(value, str):
        raise PreconditionFailed(
            f"invalid type '{field_type(value)}' for arg '{ARGUMENT}' in exchange "
            f"'{exchange}' in vhost '{vhost}'"
        )


def alternate_name(arguments: dict[str, Any], name: str, policy: PolicyLookup) -> str | None:
    """The argument wins over the policy, as in RabbitMQ."""
    value = arguments.get(ARGUMENT)
    if isinstance(value, str):
        return value
    if not name:
        return None  # the default exchange has no alternate
    definition = policy("exchange", name)
    if definition is not None:
        value = definition.get(ARGUMENT)
        if isinstance(value, str):
            return value
    return None
