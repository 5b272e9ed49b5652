"""The priority queue: a classic queue whose ready entries are kept in priority levels.

Declared with ``x-max-priority`` (0-255, an integer, RabbitMQ's checks and wording). A
message's ``priority`` property above the maximum counts as the maximum; no priority
counts as 0. Higher levels are delivered first, FIFO within a level; a requeued message
goes back to its place in its level. Everything else (paging, the store, acks, flow,
consumer choice) is the classic queue's: only the container of ready entries differs.

Recovery reads each stored message's properties to learn its level (the store keeps no
priority in its index), so a durable priority queue's restart reads every record once;
bodies are not kept (recovered entries stay paged out).
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

from roost.core.features.consumer_choice import invalid_arg
from roost.core.field_types import field_type as amqp_type
from roost.core.message import PROPERTY_NAMES, Message
from roost.core.queues.base import Queue
from roost.core.queues.entry import Entry

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.vhost import VHost

MAX_PRIORITY_ARGUMENT = "x-max-priority"
MAX_SUPPORTED = 255
_PRIORITY = PROPERTY_NAMES.index("priority")


class PriorityEntry(Entry):
    __slots__ = ("priority",)

    def __init__(self, seq: int, message: Message | None, size: int = 0) -> None:
        super().__init__(seq, message, size)
        self.priority = (message.properties.priority or 0) if message is not None else 0


class PriorityReady:
    """Ready entries in one deque per level (made on first use), highest level first."""

    __slots__ = ("_len", "_levels", "_top", "max")

    def __init__(self, max_priority: int) -> None:
        self.max = max_priority
        self._levels: list[deque[Entry] | None] = [None] * (max_priority + 1)
        self._len = 0
        self._top = -1  # no level above this one holds entries

    def _level(self, entry: Entry) -> deque[Entry]:
        p = min(getattr(entry, "priority", 0), self.max)
        level = self._levels[p]
        if level is None:
            level = self._levels[p] = deque()
        if p > self._top:
            self._top = p
        return level

    def _head_level(self) -> deque[Entry]:
        levels, top = self._levels, self._top
        while top >= 0:
            level = levels[top]
            if level:
                self._top = top
                return level
            top -= 1
        self._top = -1
        raise IndexError("no ready entries")

    def append(self, entry: Entry, /) -> None:
        self._level(entry).append(entry)
        self._len += 1

    def appendleft(self, entry: Entry, /) -> None:
        self._level(entry).appendleft(entry)
        self._len += 1

    def put_back(self, entry: Entry) -> None:
        """A requeued entry returns to its place (by seq) in its level."""
        level = self._level(entry)
        if not level or level[0].seq > entry.seq:
            level.appendleft(entry)
        else:
            insort(level, entry)
        self._len += 1

    def popleft(self) -> Entry:
        entry = self._head_level().popleft()
        self._len -= 1
        return entry

    def clear(self) -> None:
        for level in self._levels:
            if level is not None:
                level.clear()
        self._len = 0
        self._top = -1

    def __getitem__(self, index: int, /) -> Entry:
        if index == 0:
            return self._head_level()[0]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(index)
        return next(islice(iter(self), index, None))

    def __iter__(self) -> Iterator[Entry]:
        for level in reversed(self._levels):
            if level:
                yield from level

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0


def max_priority_argument(vhost: str, queue: str, arguments: dict[str, Any]) -> int:
    value = arguments.get(MAX_PRIORITY_ARGUMENT)
    if isinstance(value, bool) or not isinstance(value, int):
        detail = f'"expected integer, got {amqp_type(value)}"'
        raise invalid_arg(MAX_PRIORITY_ARGUMENT, vhost, queue, detail)
    if value < 0:
        raise invalid_arg(MAX_PRIORITY_ARGUMENT, vhost, queue, f"{{value_negative,{value}}}")
    if value > MAX_SUPPORTED:
        raise invalid_arg(MAX_PRIORITY_ARGUMENT, vhost, queue, f"{{max_value_exceeded,{value}}}")
    return value


class PriorityQueue(Queue):
    entry_class = PriorityEntry

    def __init__(
        self,
        vhost: VHost,
        name: str,
        *,
        durable: bool = False,
        exclusive_owner: Client | None = None,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        arguments = arguments or {}
        max_priority = max_priority_argument(vhost.name, name, arguments)
        super().__init__(
            vhost,
            name,
            durable=durable,
            exclusive_owner=exclusive_owner,
            auto_delete=auto_delete,
            arguments=arguments,
        )
        self.max_priority = max_priority
        self.levels = self.ready = PriorityReady(max_priority)

    def _recovered_entry(self, seq: int, slot: int, size: int) -> Entry:
        """A recovered message's entry in its level: its record is read once to learn it."""
        assert self.store is not None
        entry = PriorityEntry(seq, None, size)
        entry.priority = self.store.read(slot)[4][_PRIORITY] or 0
        return entry

    def _put_back(self, entry: Entry) -> None:
        self.levels.put_back(entry)
