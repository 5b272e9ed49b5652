"""The replication of a quorum queue recovered from this node's own disk (it led it
before a restart) until ``QuorumManager._rejoin`` knows its group."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roost.core.message import Message
    from roost.core.queues.entry import Entry
    from roost.core.queues.quorum import QuorumQueue


class Rejoining:
    """The replication of a recovered quorum queue until its group is known: publishes
    are refused (nacked; a publisher retries, as on a leader's loss)."""

    def __init__(self, queue: QuorumQueue) -> None:
        self.queue = queue

    def push(self, message: Message) -> bool:
        q = self.queue
        q.refusal = f"{q._where()}: rejoining its group after a restart"
        return False

    def delivered(self, entry: Entry) -> None:
        pass

    def forgotten(self, entry: Entry) -> None:
        pass

    def close(self, why: str = "queue deleted") -> None:
        pass
