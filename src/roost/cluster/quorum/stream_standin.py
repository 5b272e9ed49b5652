"""A replicated stream's stand-in on a node that does not lead it, and the hold on a
stream recovered from disk until its group is known (``stream_groups.py``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from roost.cluster.quorum.standin import QuorumStandIn
from roost.core.errors import PreconditionFailed

if TYPE_CHECKING:
    from roost.core.consumer import Consumer
    from roost.core.message import Message
    from roost.core.queues.stream import StreamQueue


class StreamStandIn(QuorumStandIn):
    """A replicated stream led on another node. Its one consumer here reads through the
    leader with its own arguments (``x-stream-offset`` …); after a failover it
    subscribes to the new leader from the offset after the last one it was given."""

    kind = "stream"

    def add_consumer(self, consumer: Consumer) -> None:
        where = f"stream queue '{self.name}' in vhost '{self.vhost.name}'"
        if self.consumers:
            raise PreconditionFailed(
                f"one consumer per connection node for {where} led on node '{self.home}':"
                " consume on the leader's node for more"
            )
        try:
            json.dumps(consumer.arguments)
        except (TypeError, ValueError):
            raise PreconditionFailed(
                f"consumer arguments for {where} led on node '{self.home}' must be"
                " integers or strings here: consume on the leader's node"
            ) from None
        self.subscribe_arguments = dict(consumer.arguments)
        super().add_consumer(consumer)

    def purge(self) -> int:
        """A stream is not purged (406, as a local stream answers). Deleted here (a real
        delete, or this node's stand-in replaced by the stream it now leads), nothing is
        asked of the old home: its stream goes with the definitions, and a home still
        leading it would refuse the purge."""
        if not self.deleted:
            raise PreconditionFailed(
                f"purge not supported by stream queue '{self.name}' in vhost '{self.vhost.name}'"
            )
        count = self.message_count
        self._give_back(requeue=False)
        return count

    def remove_consumer(self, consumer: Consumer) -> None:
        super().remove_consumer(consumer)
        if not self.consumers:
            self.subscribe_arguments = None

    def arrived(
        self, delivery_id: int, redelivered: bool, message: Message, home_seq: int = 0
    ) -> None:
        headers = message.properties.headers or {}
        offset = headers.get("x-stream-offset")
        if self.subscribe_arguments is not None and isinstance(offset, int):
            count = headers.get("x-stream-chunk-records", 1)  # a chunked delivery's
            self.subscribe_arguments["x-stream-offset"] = offset + int(count)  # resumes there
        super().arrived(delivery_id, redelivered, message, home_seq)


class Rejoining:
    """A stream this node recovered from disk, until the definitions say who leads it."""

    keeps_copy = True  # replaced by a stand-in: the copy stays, cut on the leader's SYNC

    def __init__(self, queue: StreamQueue) -> None:
        self.refusal = f"{queue._where()}: rejoining its group after a restart"

    def appended(self) -> None:
        pass

    def offset_stored(self, name: str, offset: int) -> None:
        pass

    def close(self, why: str = "") -> None:
        pass
