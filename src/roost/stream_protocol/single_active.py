"""Single active consumer on a stream (Subscribe properties ``single-active-consumer``
and ``name``): of the subscriptions that share a name on one stream, across every
connection, one is active; the others wait. The active one is told with ConsumerUpdate
(active) and answers with the offset to start from; when it leaves (Unsubscribe, its
connection closes, the stream goes), the oldest waiting one becomes active the same
way, as RabbitMQ does for a plain stream.

On a partition of a super stream (Subscribe property ``super-stream``), RabbitMQ spreads
the partitions over the group's members: partition ``i`` (its order in the super stream)
is read by member ``i mod n`` of the ``n`` members in arrival order, so two consumers of a
three-partition super stream read two and one partitions. A member joining or leaving
moves partitions: the one that steps down is told ConsumerUpdate (not active) and stops
reading; the new one is made active only when the old one has answered (or after
``STEP_DOWN_TIMEOUT``), as RabbitMQ does, so it can resume from the offset the old one
stored instead of reading the partition a second time.

The groups are the broker's (one table per adapter port, so every connection of a
server shares it), kept here because only the stream protocol has the notion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

# seconds the group waits for a stepping-down member's ConsumerUpdate answer before it
# activates the next one anyway (RabbitMQ's stream request timeout is 60 s)
STEP_DOWN_TIMEOUT = 60.0


@dataclass
class Group:
    """The members in arrival order, the active one, the one stepping down (told it is
    not active, its answer awaited), and for a super stream's partition its order (None:
    a plain stream, the first member is active)."""

    partition: int | None = None
    members: list[Any] = field(default_factory=list)
    active: Any = None
    stepping_down: Any = None

    def chosen(self) -> Any:
        if not self.members:
            return None
        if self.partition is None:
            return self.members[0]
        return self.members[self.partition % len(self.members)]


# (vhost, stream, name) -> its group
Groups = dict[tuple[str, str, str], Group]
_TABLES: WeakKeyDictionary[Any, Groups] = WeakKeyDictionary()
Change = Callable[[Any], None]


def groups_of(port: Any) -> Groups:
    table = _TABLES.get(port)
    if table is None:
        table = _TABLES[port] = {}
    return table


def _settle(group: Group, activate: Change, deactivate: Change) -> None:
    """Make the member the rule chooses the active one. An active member that must give
    way is stepped down first: the next is activated when it answers (``stepped_down``)."""
    if group.stepping_down is not None:
        return  # settled again when it answers, times out or leaves
    chosen = group.chosen()
    if chosen is group.active:
        return
    previous = group.active
    if previous is not None and previous in group.members:
        group.active = None
        group.stepping_down = previous
        deactivate(previous)
        return
    group.active = chosen
    if chosen is not None:
        activate(chosen)


def join(
    groups: Groups,
    key: tuple[str, str, str],
    member: Any,
    partition: int | None,
    activate: Change,
    deactivate: Change,
) -> None:
    """Add ``member``; activate whom the group's rule now chooses."""
    group = groups.setdefault(key, Group(partition))
    group.members.append(member)
    _settle(group, activate, deactivate)


def leave(
    groups: Groups, key: tuple[str, str, str], member: Any, activate: Change, deactivate: Change
) -> None:
    """Remove ``member``; activate whom the group's rule now chooses, if anyone."""
    group = groups.get(key)
    if group is None or member not in group.members:
        return
    group.members.remove(member)
    if group.active == member:  # members are (commands, subscription) pairs: equal, not one
        group.active = None
    if group.stepping_down == member:  # gone: nothing more to wait for
        group.stepping_down = None
    if not group.members:
        del groups[key]
        return
    _settle(group, activate, deactivate)


def stepped_down(
    groups: Groups, key: tuple[str, str, str], member: Any, activate: Change, deactivate: Change
) -> None:
    """``member`` answered its step-down (or the wait timed out): activate the next."""
    group = groups.get(key)
    if group is None or group.stepping_down != member:
        return
    group.stepping_down = None
    _settle(group, activate, deactivate)
