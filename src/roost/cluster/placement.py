"""Where a new queue's home goes, as RabbitMQ's queue leader locator places it:

- ``client-local`` (the default): the node whose client declared it;
- ``balanced``: the running node homing the fewest queues (ties: the declaring node,
  then by name). RabbitMQ 3.10's classic-queue argument ``x-queue-master-locator`` with
  ``min-masters`` means the same; its ``random`` is taken as ``balanced`` too.

Chosen from the queue's ``x-queue-leader-locator`` (or ``x-queue-master-locator``)
argument; the policy keys of the same names are not read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

ARGUMENTS = ("x-queue-leader-locator", "x-queue-master-locator")
BALANCED = frozenset({"balanced", "min-masters", "random"})


def wants_balanced(arguments: dict[str, Any]) -> bool:
    for name in ARGUMENTS:
        value = arguments.get(name)
        if value is not None:
            return str(value) in BALANCED
    return False


def balanced_home(me: str, running: Iterable[str], homes: Iterable[str]) -> str:
    """The running node with the fewest queues (``homes``: every queue's home node)."""
    counts = Counter(homes)
    candidates = set(running) | {me}
    return min(candidates, key=lambda n: (counts[n], n != me, n))
