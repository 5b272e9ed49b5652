"""A replicated stream's stand-in on a node that does not lead it, and the hold on a
stream recovered from disk until its group is known (``stream_groups.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from roost.cluster.quorum.standin import QuorumStandIn
from roost.core.errors import PreconditionFailed

if TYPE_CHECKING:
    from roost.cluster.quorum.stream_follower import StreamFollower
    from roost.core.consumer import Consumer
    from roost.core.message import Message
    from roost.core.queues.entry import Entry
    from roost.core.queues.stream import StreamQueue


class StreamStandIn(QuorumStandIn):
    """A replicated stream led on another node. Its one consumer here reads through the
    leader with its own arguments (``x-stream-offset`` …); after a failover it
    subscribes to the new leader from the offset after the last one it was given."""

    kind = "stream"
    # this node's copy of the log when it is a member (stream_groups.py sets it): the
    # stream protocol's QueryPublisherSequence and QueryOffset are answered from it
    local_copy: Callable[[], StreamFollower | None] = staticmethod(lambda: None)

    def _copy(self) -> StreamFollower:
        copy = self.local_copy()
        if copy is None:
            raise PreconditionFailed(
                f"stream queue '{self.name}' in vhost '{self.vhost.name}' is led on node"
                f" '{self.home}' and has no copy on this node: ask its members"
            )
        return copy

    def last_publishing_id(self, producer: str) -> int | None:
        """The producer's last id in this member's copy (the leader ships each record's
        producer and publishing id with it)."""
        return self._copy().log.producers.get(producer)

    def stored_offset(self, name: str) -> int | None:
        return self._copy().log.stored_offset(name)

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

    def rehome(self, home: str) -> None:
        moved = home != self.home
        super().rehome(home)
        if moved:  # the stream protocol's publishers here are told (MetadataUpdate)
            self.vhost.streams.moved(self.vhost.name, self.name)

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
        super().arrived(delivery_id, redelivered, message, home_seq)
        self._end_reached()

    def _delivered(self, entry: Entry) -> None:
        """The resume offset moves as records are handed to the client, not as they
        arrive: the leader sends ahead of the client's prefetch, and what waits here is
        dropped when the leader goes (``lost_home``), so it must be asked for again."""
        super()._delivered(entry)
        message = entry.message
        headers = None if message is None else message.properties.headers
        offset = None if headers is None else headers.get("x-stream-offset")
        if self.subscribe_arguments is not None and isinstance(offset, int):
            count = headers.get("x-stream-chunk-records", 1) if headers else 1  # a chunk's
            self.subscribe_arguments["x-stream-offset"] = offset + int(count)  # resumes there

    def dispatch(self) -> None:
        super().dispatch()
        self._end_reached()

    def dispatch_to(self, consumer: Consumer) -> None:
        super().dispatch_to(consumer)
        self._end_reached()

    def _end_reached(self) -> None:
        """``x-stream-end-offset``: once the record before it is handed out here, the
        consumer is cancelled (basic.cancel), as on the leader's node. The leader's own
        cancel of the subscription does not reach the client: it may come from a leader
        that lost its place, and records it sent ahead may still wait here."""
        arguments = self.subscribe_arguments
        if arguments is None or self.ready:
            return
        end = arguments.get("x-stream-end-offset")
        reached = arguments.get("x-stream-offset")
        if isinstance(end, int) and isinstance(reached, int) and reached >= end:
            for consumer in list(self.consumers):
                self.remove_consumer(consumer)
                consumer.session.consumer_gone(consumer)


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
