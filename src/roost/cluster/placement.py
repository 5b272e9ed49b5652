"""Where a new queue's home goes, as RabbitMQ's queue leader locator places it:

- ``client-local`` (the default): the node whose client declared it;
- ``balanced``: the running node homing the fewest queues (ties: the declaring node,
  then by name). RabbitMQ 3.10's classic-queue argument ``x-queue-master-locator`` with
  ``min-masters`` means the same; its ``random`` is taken as ``balanced`` too.

Chosen from the queue's ``x-queue-leader-locator`` (or ``x-queue-master-locator``)
argument, else from the ``queue-leader-locator`` key of the policy that applies to it
when it is declared (RabbitMQ 3.12's policy key). Bad values are refused before this
(406, ``roost.core.features.settings``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

ARGUMENTS = ("x-queue-leader-locator", "x-queue-master-locator")
POLICY_KEY = "queue-leader-locator"
BALANCED = frozenset({"balanced", "min-masters", "random", "least-leaders"})


def wants_balanced(arguments: dict[str, Any], policy: dict[str, Any] | None = None) -> bool:
    """The queue's argument wins over its policy, as for its other placement-like keys."""
    for name in ARGUMENTS:
        value = arguments.get(name)
        if value is not None:
            return str(value) in BALANCED
    return policy is not None and str(policy.get(POLICY_KEY)) in BALANCED


def balanced_home(me: str, running: Iterable[str], homes: Iterable[str]) -> str:
    """The running node with the fewest queues (``homes``: every queue's home node)."""
    counts = Counter(homes)
    candidates = set(running) | {me}
    return min(candidates, key=lambda n: (counts[n], n != me, n))
