"""A replicated stream's stand-in on a node that does not lead it, and the hold on a
stream recovered from disk until its group is known (``stream_groups.py``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.cluster.link import frames as f
from roost.cluster.quorum.standin import QuorumStandIn
from roost.cluster.wire import properties_of
from roost.core.errors import PreconditionFailed
from roost.core.exchanges.offsets import OFFSETS_EXCHANGE
from roost.core.message import Message, Properties

if TYPE_CHECKING:
    from roost.cluster.quorum.stream_follower import StreamFollower
    from roost.cluster.remote import DataPlane
    from roost.core.consumer import Consumer
    from roost.core.queues.entry import Entry
    from roost.core.queues.stream import StreamQueue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.quorum")


class StreamStandIn(QuorumStandIn):
    """A replicated stream led on another node. Each consumer here reads through the
    leader with its own arguments (``x-stream-offset`` …), in a subscription of its own
    (the first in this stand-in, the others in lanes); after a failover each subscribes
    to the new leader from the offset after the last one it was given."""

    kind = "stream"
    # this node's copy of the log when it is a member (stream_groups.py sets it): the
    # stream protocol's QueryPublisherSequence and QueryOffset are answered from it
    local_copy: Callable[[], StreamFollower | None] = staticmethod(lambda: None)

    def __init__(self, plane: DataPlane, vhost: VHost, item: dict[str, Any], home: str) -> None:
        super().__init__(plane, vhost, item, home)
        # offsets this node's clients stored, sent to the leader, until this node's copy
        # shows them (the leader sends each stored offset to every member): a QueryOffset
        # here right after a StoreOffset here sees it
        self.stored_here: dict[str, int] = {}
        # further subscriptions of this node's consumers, one each (``_add_lane``); on a
        # lane, ``main`` is the stand-in the vhost holds
        self.lanes: list[StreamStandIn] = []
        self.main: StreamStandIn | None = None

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
        here = self.stored_here.get(name)
        copy = self.local_copy()
        if copy is None and here is not None:
            return here
        stored = self._copy().log.stored_offset(name)
        if here is None:
            return stored
        if stored == here:  # the leader's own now, and every member's
            del self.stored_here[name]
        return here

    def commit_offset(self, name: str, offset: int) -> None:
        """StoreOffset (or an ``amq.roost.offsets`` commit) on a node that does not lead:
        sent to the leader, as RabbitMQ writes a stored offset to the stream's leader,
        which keeps it as its own and sends it to every member, so it survives a
        failover as the leader's offsets do. No answer: with the leader's node out of
        reach it is dropped, as a StoreOffset is, and logged."""
        link = self.plane.node.links.link(self.home)
        if link is None:
            where, home = self._where(), self.home
            log.info("%s: offset of '%s' not stored: leader '%s' out of reach", where, name, home)
            return
        self.stored_here[name] = offset
        headers: dict[str, Any] = {"x-stream-consumer-name": name, "x-stream-offset": offset}
        message = Message(OFFSETS_EXCHANGE, self.name, Properties(headers=headers), b"")
        raw = properties_of(message)  # publish id 0: nothing waits for an answer
        link.send(
            f.Publish(0, 0, self.vhost.name, [self.name], OFFSETS_EXCHANGE, self.name, raw, b"")
        )

    def ask_leader(self, question: dict[str, Any], answered: Callable[[Any], None]) -> bool:
        """No copy here: the leader answers the stream protocol's query (``stream_asks.py``).
        False: this node's copy answers, or its own memory of an offset stored here."""
        asks = getattr(self.plane.node, "stream_asks", None)
        if asks is None or self.local_copy() is not None:
            return False
        if question.get("what") == "offset" and question.get("reference") in self.stored_here:
            return False
        asks.ask(self.home, self.vhost.name, self.name, question, answered)
        return True

    def committed_range(self) -> tuple[int, int]:
        """(first offset, end of what this node knows is committed) of its copy."""
        copy = self._copy()
        return copy.log.first_offset, min(copy.known, copy.log.next_offset)

    def start_offset(self, kind: str, value: int | None, name: str) -> int:
        """Where a subscription from ``kind``/``value`` starts, from this node's copy as
        far as it knows the records committed (ResolveOffsetSpec here)."""
        copy = self._copy()
        first, end = self.committed_range()
        if kind == "first":
            return first
        if kind == "last":
            return max(min(copy.log.last_chunk_offset, end - 1), first)
        if kind == "offset":
            return value or 0
        if kind == "timestamp":
            return min(copy.log.offset_for_time(value or 0), end)
        return end

    def add_consumer(self, consumer: Consumer) -> None:
        where = f"stream queue '{self.name}' in vhost '{self.vhost.name}'"
        if self.consumers and self.main is None:
            self._add_lane(consumer)
            return
        try:
            json.dumps(consumer.arguments)
        except (TypeError, ValueError):
            raise PreconditionFailed(
                f"consumer arguments for {where} led on node '{self.home}' must be"
                " integers or strings here: consume on the leader's node"
            ) from None
        self.subscribe_arguments = dict(consumer.arguments)
        super().add_consumer(consumer)

    def _add_lane(self, consumer: Consumer) -> None:
        """A further consumer here reads through a subscription of its own at the leader
        (each its own offset): a lane, a stand-in of the same stream that only the main
        one knows (the vhost, routing and management see the main one)."""
        item = {"name": self.name, "durable": self.durable, "arguments": dict(self.arguments)}
        lane = StreamStandIn(self.plane, self.vhost, item, self.home)
        lane.main = self
        lane.group = self.group
        lane.local_copy = self.local_copy
        consumer.queue = lane
        try:
            lane.add_consumer(consumer)
        except BaseException:
            consumer.queue = self
            raise
        self.lanes.append(lane)

    def moving(self) -> list[tuple[Consumer, dict[str, Any] | None]]:
        """This node now leads the stream: every consumer here (lanes' too) leaves, each
        with the arguments it resumes from (the offset after the last it was given)."""
        found = [(consumer, self.subscribe_arguments) for consumer in self.consumers]
        self.consumers.clear()
        for lane in self.lanes:
            found += lane.moving()
            lane.plane.unsubscribe(lane)
        self.lanes.clear()
        return found

    @property
    def consumer_count(self) -> int:
        lanes = sum(len(ln.consumers) - (1 if ln.consumer_id else 0) for ln in self.lanes)
        return super().consumer_count + lanes

    def rehome(self, home: str) -> None:
        moved = home != self.home
        super().rehome(home)
        for lane in self.lanes:  # each subscribes there from its own resume offset
            lane.rehome(home)
        if moved and self.main is None:
            self.stored_here.clear()  # the old leader may have gone before sending them
            # the stream protocol's publishers here are told (MetadataUpdate)
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
        for lane in self.lanes:  # their consumers are cancelled as the main one's were
            lane.deleted = True
            for consumer in list(lane.consumers):
                lane.consumers.remove(consumer)
                consumer.session.consumer_gone(consumer)
            lane._give_back(requeue=False)
            lane.plane.unsubscribe(lane)
        self.lanes.clear()
        return count

    def remove_consumer(self, consumer: Consumer) -> None:
        super().remove_consumer(consumer)
        if not self.consumers:
            self.subscribe_arguments = None
            main = self.main
            if main is not None and self in main.lanes:
                main.lanes.remove(self)

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
