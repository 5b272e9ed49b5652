"""A message's place in a queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mypy_extensions import mypyc_attr

if TYPE_CHECKING:
    from roost.core.message import Message


@mypyc_attr(allow_interpreted_subclasses=True)
class Entry:
    """A message's place in one queue. ``seq`` orders it; requeues go back by seq.

    Compiled (docs/compiled.md): a queue's compiled steps (core/queues/message_path.py)
    read and write its fields for every message. The priority, stream and cluster
    entries are interpreted subclasses that add slots."""

    __slots__ = ("deliveries", "expires", "message", "redelivered", "seq", "size", "slot")

    def __init__(self, seq: int, message: Message | None, size: int = 0) -> None:
        self.seq = seq
        # None while paged out: only in the store (slot), read back by Queue._page_in
        self.message = message
        self.redelivered = False
        self.deliveries = 0
        self.slot = 0  # the message's sequence number in the queue's store; 0: not stored
        self.size = len(message.body) if message is not None else size
        self.expires = 0.0  # monotonic deadline (core.features.lifecycle); 0.0: never

    def __lt__(self, other: Entry) -> bool:
        return self.seq < other.seq
