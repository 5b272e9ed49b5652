"""Replicated streams on a cluster: who leads each one, and failover, as for quorum queues
(``manager.py``), with a stream's own log shipping (``stream_leader.py``,
``stream_follower.py``).

A stream declared on a cluster node is led by that node: it picks the members
(``x-initial-cluster-size``, default the smaller of 3 and the running nodes, itself
first), wins the stream's election (``PREFIX/stream-leaders/VHOST/NAME`` under its
node's lease, the key's create revision the term) and records the group
(``PREFIX/stream-group/VHOST/NAME``) with a fenced write. Other nodes reach it through a
stand-in (publishes forwarded to the leader); members also hold a copy of the log, made
when the leader's first ``SYNC`` arrives. A stream declared while one node runs stays a
plain local stream (as on a single node).

Failover: each member watches the election key; when it goes, the members write their
positions (term, durable offset) under ``PREFIX/stream-pos/…``, the longest log
campaigns once a majority's positions are in (``candidacy.py``, the quorum queues' rule:
never over a longer member still running), and the winner reopens its copy as the
stream (offsets unchanged),
points the definition's home at itself (every node's stand-in follows) and syncs the
other members. A node restarted with a copy on disk refuses publishes to it until the
definitions say who leads; a copy replaced by a stand-in is deleted and taken again
from the leader.

This object sits in front of the quorum manager for the link frames and stand-ins: it
takes a stream's and hands the rest on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from roost.cluster.coordinator import Compare, Delete, Put
from roost.cluster.errors import ClusterError
from roost.cluster.link import frames as f
from roost.cluster.quorum.groupbase import GroupBase, Key
from roost.cluster.quorum.standin import QuorumGroup
from roost.cluster.quorum.stream_follower import StreamFollower, open_log
from roost.cluster.quorum.stream_leader import OFS, SYNC, StreamReplicator
from roost.cluster.quorum.stream_members import StreamMembers
from roost.cluster.quorum.stream_standin import Rejoining, StreamStandIn
from roost.cluster.quorum.stream_swap import swap_in_copy
from roost.core.events import QueueDeclared, QueueDeleted
from roost.core.queues.stream import StreamQueue

if TYPE_CHECKING:
    from roost.cluster.election import Election
    from roost.cluster.link.transport import Link
    from roost.cluster.node import ClusterNode
    from roost.cluster.quorum.manager import QuorumManager
    from roost.cluster.remote import DataPlane
    from roost.core.broker import Broker
    from roost.core.events import Event
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.quorum")

LOOK_AGAIN = 0.5  # seconds between a member's looks at the positions while it may not run


class StreamGroups(GroupBase):
    kind = "stream"
    leaders = "stream-leaders"
    records = "stream-group"

    def __init__(
        self, node: ClusterNode, broker: Broker, plane: DataPlane, defs: Any, quorum: QuorumManager
    ) -> None:
        self.node = node
        self.broker = broker
        self.plane = plane
        self.defs = defs
        self.quorum = quorum
        self.prefix = node.prefix
        self.leading: dict[Key, StreamReplicator] = {}
        self.following: dict[Key, StreamFollower] = {}
        self.groups: dict[Key, QuorumGroup] = {}
        self.tasks: dict[Key, asyncio.Task[None]] = {}
        self.elections: dict[Key, Election] = {}  # of the streams led here
        self.kept: set[Key] = set()  # copies found on disk at start, kept for a stand-in
        self.members = StreamMembers(self)
        self.promoting = False
        self._hold_recovered()
        # link frames: a stream's come here, the rest go on to the quorum manager
        handlers = node.frame_handlers
        handlers[handlers.index(quorum.frame)] = self.frame
        node.link_up.append(self._link_up)
        broker.catalog.on_change.append(self._broker_changed)
        for vhost in broker.catalog.vhosts.values():
            vhost.on_change.append(self._changed)

    # -- stand-ins and events

    def make_queue(self, vhost: VHost, item: dict[str, Any], home: str) -> Queue:
        if (item.get("arguments") or {}).get("x-queue-type") != "stream":
            return self.quorum.make_queue(vhost, item, home)
        queue = StreamStandIn(self.plane, vhost, item, home)
        key = (vhost.name, queue.name)
        queue.group = self._group_at(key, home)
        queue.local_copy = lambda: self.following.get(key)
        if key not in self.following and key not in self.leading:
            self.quorum._spawn_free(self._follow_as_member(queue))
        return queue

    async def _follow_as_member(self, stand_in: StreamStandIn) -> None:
        """A member follows as soon as its node knows the stream, with an empty copy
        until the leader's first ``SYNC``: it writes its position when the leader goes
        (``candidacy.py`` needs a majority's). Waiting for that ``SYNC`` is not enough:
        the leader may be cut off before it arrives (it is dropped while the stream's
        definition has not reached this node, and sent again a second later), and the
        others then never hear from a majority."""
        key = (stand_in.vhost.name, stand_in.name)
        for _ in range(50):  # the leader writes the group record just after its election
            if key in self.following or key in self.leading:
                return
            kv = await self.node.coordinator.get(self._key("stream-group", key))
            if kv is not None and self.name in json.loads(kv.value)["members"]:
                if key not in self.following and key not in self.leading:
                    self._spawn(key, self._adopt_copy(stand_in))
                return
            if kv is not None:
                return
            await asyncio.sleep(0.1)

    def _changed(self, event: Event) -> None:
        match event:
            case QueueDeclared(queue=StreamQueue() as queue) if not self.promoting:
                if queue.replication is None:
                    self._lead_new(queue)
            case QueueDeleted(queue=queue) if not self.promoting:
                key = (queue.vhost.name, queue.name)
                follower = self.following.pop(key, None)
                if follower is not None:  # deleted everywhere: our copy goes too
                    follower.log.destroy()
                    task = self.tasks.pop(key, None)
                    if task is not None:
                        task.cancel()
                rep = self.leading.get(key)
                if rep is not None and rep.queue is queue:
                    del self.leading[key]
                    rep.close()
                    if not queue.remote and rep.term:
                        self._spawn(key, self._forget(key, rep.term), replace=False)
                if isinstance(queue, StreamQueue) and queue.replication is not None:
                    asyncio.get_running_loop().call_soon(self._keep_copy, queue)
            case _:
                pass

    def _keep_copy(self, queue: StreamQueue) -> None:
        """A replicated stream's log outlives its queue here when a stand-in took its
        place (this node follows now: the copy is kept and cut to its committed prefix
        on the leader's ``SYNC``); deleted for good, its files go."""
        taken = queue.vhost.queues.get(queue.name)
        key = (queue.vhost.name, queue.name)
        if not isinstance(taken, StreamStandIn | StreamQueue) or key in self.members.left:
            queue.log.destroy()
        else:
            self.kept.add(key)

    def _hold_recovered(self) -> None:
        """Streams recovered from disk refuse publishes until ``start``: the links are up
        before the definitions are read, and a publish confirmed by a copy that another
        member has since taken over from would be lost."""
        for vhost in self.broker.catalog.vhosts.values():
            for queue in vhost.queues.values():
                if isinstance(queue, StreamQueue) and queue.replication is None:
                    queue.replication = Rejoining(queue)

    def start(self) -> None:
        for vhost in self.broker.catalog.vhosts.values():
            for queue in list(vhost.queues.values()):
                if isinstance(queue, StreamQueue) and isinstance(queue.replication, Rejoining):
                    self._spawn((vhost.name, queue.name), self._rejoin(queue))
                elif isinstance(queue, StreamStandIn):
                    self._spawn((vhost.name, queue.name), self._adopt_copy(queue))
        self.quorum._spawn_free(self.members.follow())
        self.quorum._spawn_free(self.members.reconcile())

    async def _adopt_copy(self, stand_in: StreamStandIn) -> None:
        """A member restarted while another node led its stream: its copy (kept on disk)
        follows from now on, so it takes part in the next election even if that leader
        never sends to it again. A copy of a group that no longer lists this node (taken
        out while it was down) is deleted."""
        key = (stand_in.vhost.name, stand_in.name)
        kv = await self.node.coordinator.get(self._key("stream-group", key))
        members = json.loads(kv.value)["members"] if kv is not None else []
        vhost = stand_in.vhost
        if key in self.following or key in self.leading:
            return
        if vhost.queues.get(stand_in.name) is not stand_in:
            return
        if self.name not in members:
            if kv is not None and key in self.kept:  # taken out while down: the copy goes
                self.kept.discard(key)
                open_log(vhost.streams, key[0], key[1], dict(stand_in.arguments)).destroy()
                log.info("stream %s: taken out of its group while down, its copy goes", key)
            return
        follower = StreamFollower(
            vhost.streams, self.broker.message_store, key[0], key[1], dict(stand_in.arguments)
        )
        self.following[key] = follower
        await self._watch_leader(key, follower)

    async def _rejoin(self, queue: StreamQueue) -> None:
        key = (queue.vhost.name, queue.name)
        kv = await self.node.coordinator.get(self._key("stream-group", key))
        members = json.loads(kv.value)["members"] if kv is not None else [self.name]
        if not isinstance(queue.replication, Rejoining) or queue.deleted:
            return
        if len(members) <= 1:  # a one-member stream: served here as it was
            queue.replication = None
            return
        rep = StreamReplicator(self.broker, self.node.links, queue, self.name, members)
        queue.replication = rep
        queue.group = rep
        self.leading[key] = rep
        await self._elect(key, rep)

    # -- leading a new stream

    def _lead_new(self, queue: StreamQueue) -> None:
        running = sorted(self._running(), key=lambda n: (n != self.name, n))
        size = queue.arguments.get("x-initial-cluster-size")
        size = min(int(size) if size else 3, len(running)) or 1
        members = running[:size] or [self.name]
        if len(members) == 1:
            return  # one member: a local stream, as on a single node
        key = (queue.vhost.name, queue.name)
        rep = StreamReplicator(self.broker, self.node.links, queue, self.name, members)
        queue.replication = rep
        queue.group = rep
        self.leading[key] = rep
        self._spawn(key, self._elect(key, rep))

    async def _elect(self, key: Key, rep: StreamReplicator) -> None:
        election = self._election(key)
        leader = await election.campaign_once()
        if not election.term:
            log.warning("stream %s: %s leads it already", key, leader.node)
            rep.close("another node leads this stream")
            return
        record = {
            "members": rep.members,
            "leader": self.name,
            "term": election.term,
            "target": self.members.target(key, rep.queue.arguments),
        }
        ops = [Put(self._key("stream-group", key), json.dumps(record).encode())]
        await self._home_here(key, ops)  # the stream's home: here now
        result = await election.fenced_txn([], ops)
        if not result.succeeded:
            rep.close("leadership lost")
            return
        self.elections[key] = election
        self._arm_stepdown(key, rep)
        rep.started(election.term)
        log.info(
            "stream %s: leader %s, term %d, members %s", key, self.name, election.term, rep.members
        )

    async def _forget(self, key: Key, term: int) -> None:
        leader_key = self._key("stream-leaders", key)
        await self.node.coordinator.txn(
            [Compare(leader_key, "create", term)],
            [Delete(leader_key), Delete(self._key("stream-group", key))],
        )

    # -- frames

    def frame(self, link: Link, frame: f.Frame) -> None:
        match frame:
            case f.Replicate():
                key = (frame.vhost, frame.queue)
                if key in self.following or key in self.leading:
                    self._replicate(link, key, frame)
                elif frame.entries and frame.entries[0][:1] in (SYNC, OFS):
                    self._replicate(link, key, frame)  # a stream's first batch to us
                else:
                    self.quorum.frame(link, frame)
            case f.ReplicateAck():
                rep = self.leading.get((frame.vhost, frame.queue))
                if rep is not None:
                    rep.acknowledged(link.peer, frame)
                else:
                    self.quorum.frame(link, frame)
            case _:
                self.quorum.frame(link, frame)

    def _replicate(self, link: Link, key: Key, frame: f.Replicate) -> None:
        rep = self.leading.get(key)
        if rep is not None:
            if frame.term <= rep.term:  # an older leader: fenced off
                link.send(f.ReplicateAck(frame.vhost, frame.queue, rep.term, 0, False))
                return
            rep.close("a newer leader was elected")
            del self.leading[key]
            self.broker.streams.moved(*key)  # its stream-protocol publishers here are told
        follower = self.following.get(key)
        if follower is None:
            if key in self.members.left:
                return  # sent before this node was taken out of the group
            vhost = self.broker.catalog.vhosts.get(key[0])
            stand_in = None if vhost is None else vhost.queues.get(key[1])
            if not isinstance(stand_in, StreamStandIn):
                return  # its definition has not reached us: the leader syncs again
            follower = StreamFollower(
                vhost.streams,  # type: ignore[union-attr]
                self.broker.message_store,
                key[0],
                key[1],
                dict(stand_in.arguments),
            )
            self.following[key] = follower
            self._spawn(key, self._watch_leader(key, follower))
        follower.receive(link, frame)

    # -- failover

    async def _follow_leader(self, key: Key, follower: StreamFollower) -> None:
        election = self._election(key)
        while self.following.get(key) is follower:
            leader = await election.leader()
            if leader is not None:
                await election._wait_for_vacancy(leader)
                follower.fence = max(follower.fence, leader.term)
            pos_prefix = self._key("stream-pos", key) + "/"
            group_key = self._key("stream-group", key)
            if not await self._positions_allow(
                pos_prefix, group_key, follower.position, follower.fence
            ):  # a longer member campaigns, or positions are still coming in
                await asyncio.sleep(LOOK_AGAIN)
                continue
            if not election.lease_id:
                raise ClusterError("this node has no lease yet")
            await election.campaign_once()
            if election.term:
                await self._promote(key, follower, election)
                return

    async def _promote(self, key: Key, follower: StreamFollower, election: Election) -> None:
        kv = await self.node.coordinator.get(self._key("stream-group", key))
        members = json.loads(kv.value)["members"] if kv is not None else [self.name]
        vhost = self.broker.catalog.vhosts.get(key[0])
        stand_in = None if vhost is None else vhost.queues.get(key[1])
        if vhost is None or not isinstance(stand_in, StreamStandIn):
            await election.resign()
            return
        del self.following[key]
        follower.close()
        queue = swap_in_copy(self, vhost, stand_in)
        rep = StreamReplicator(self.broker, self.node.links, queue, self.name, members)
        rep.stored.update(follower.stored)
        queue.replication = rep
        queue.group = rep
        self.leading[key] = rep
        record = {
            "members": members,
            "leader": self.name,
            "term": election.term,
            "target": self.members.target(key, queue.arguments),
        }
        ops = [Put(self._key("stream-group", key), json.dumps(record).encode())]
        await self._home_here(key, ops)
        result = await election.fenced_txn([], ops)
        if not result.succeeded:
            rep.close("leadership lost")
            return
        self.elections[key] = election
        self._arm_stepdown(key, rep)
        rep.started(election.term)
        log.warning(
            "stream %s: now led here (term %d, next offset %d)",
            key,
            election.term,
            queue.log.next_offset,
        )

    async def stop(self) -> None:
        await self._cancel(self.tasks.values())
