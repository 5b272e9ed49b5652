"""Single active consumer on a stream (Subscribe properties ``single-active-consumer``
and ``name``): of the subscriptions that share a name on one stream, across every
connection, one is active; the others wait. The active one is told with ConsumerUpdate
(active) and answers with the offset to start from; when it leaves (Unsubscribe, its
connection closes, the stream goes), the oldest waiting one becomes active the same
way, as RabbitMQ does for a plain stream.

The groups are the broker's (one table per adapter port, so every connection of a
server shares it), kept here because only the stream protocol has the notion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

# (vhost, stream, name) -> members in arrival order; the first is the active one
Groups = dict[tuple[str, str, str], list[Any]]
_TABLES: WeakKeyDictionary[Any, Groups] = WeakKeyDictionary()


def groups_of(port: Any) -> Groups:
    table = _TABLES.get(port)
    if table is None:
        table = _TABLES[port] = {}
    return table


def join(groups: Groups, key: tuple[str, str, str], member: Any) -> bool:
    """Add ``member``; True when it is the active one (the group was empty)."""
    members = groups.setdefault(key, [])
    members.append(member)
    return len(members) == 1


def leave(
    groups: Groups, key: tuple[str, str, str], member: Any, activate: Callable[[Any], None]
) -> None:
    """Remove ``member``; when it was active, ``activate`` the next one, if any."""
    members = groups.get(key)
    if not members or member not in members:
        return
    was_active = members[0] == member
    members.remove(member)
    if not members:
        del groups[key]
    elif was_active:
        activate(members[0])
