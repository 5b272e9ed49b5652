"""Policies: a name, a regular expression over object names, and a definition.

Roost stores policies and shows which one applies to each queue and exchange (the highest
priority match, as RabbitMQ picks it); applying their keys (max-length, message-ttl, …)
to queues belongs to the queue features.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from roost.core.errors import PreconditionFailed

APPLY_TO = ("all", "queues", "exchanges", "classic_queues", "quorum_queues", "streams")


@dataclass
class Policy:
    vhost: str
    name: str
    pattern: str
    definition: dict[str, Any]
    priority: int = 0
    apply_to: str = "all"
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.apply_to not in APPLY_TO:
            raise PreconditionFailed(
                f"invalid apply-to '{self.apply_to}', expected one of {', '.join(APPLY_TO)}"
            )
        if not isinstance(self.definition, dict) or not self.definition:
            raise PreconditionFailed("policy definition must be a non-empty object")
        try:
            self._regex = re.compile(self.pattern)
        except (re.error, TypeError) as exc:
            raise PreconditionFailed(f"invalid policy pattern '{self.pattern}': {exc}") from None

    def applies_to(self, kind: str, name: str, queue_type: str = "classic") -> bool:
        """Does this policy match an object (kind "queue" or "exchange") of that name?"""
        target = self.apply_to
        if kind == "exchange":
            ok = target in ("all", "exchanges")
        else:
            ok = target in ("all", "queues") or target == {
                "classic": "classic_queues",
                "quorum": "quorum_queues",
                "stream": "streams",
            }.get(queue_type)
        return ok and self._regex.search(name) is not None


# what an operator policy may set (core/parameters.py), and how it meets a user policy's
# value: the lower one applies (RabbitMQ's merge_policy_value)
OPERATOR_KEYS = (
    "expires",
    "message-ttl",
    "max-length",
    "max-length-bytes",
    "max-in-memory-length",
    "max-in-memory-bytes",
    "delivery-limit",
)


def merge_operator(user: dict[str, Any] | None, operator: dict[str, Any]) -> dict[str, Any]:
    """A queue's effective definition: the user policy's, with each operator key at the
    lower of the two values."""
    merged = dict(user or {})
    for key, value in operator.items():
        mine = merged.get(key)
        merged[key] = value if not isinstance(mine, int) else min(mine, value)
    return merged


def effective_policy(
    policies: list[Policy], kind: str, name: str, queue_type: str = "classic"
) -> Policy | None:
    """The matching policy with the highest priority (ties: the first by name)."""
    best: Policy | None = None
    for policy in sorted(policies, key=lambda p: p.name):
        if policy.applies_to(kind, name, queue_type) and (
            best is None or policy.priority > best.priority
        ):
            best = policy
    return best
