"""Replicated quorum queues on a cluster: who leads each one, and failover.

A quorum queue declared on a cluster node is led by that node first: it picks the
members (``x-quorum-initial-group-size``, default the smaller of 3 and the running
nodes, itself first), records them in etcd next to the definition
(``PREFIX/quorum/VHOST/QUEUE``) and wins the queue's election (``cluster/election.py``,
key ``PREFIX/leaders/VHOST/QUEUE`` under its node's lease; the term is the key's create
revision). Other nodes reach it through a ``QuorumStandIn``; members also hold a
``Follower`` copy, made when the leader's first records arrive or, for a member
added while this node runs, when the new group record is seen (``regroup.py``).

Failover: a follower watches the election key. When the leader's lease expires the key
goes; each surviving member writes its position (term, durable index) under
``PREFIX/quorum-pos/…``, and the one with the longest log campaigns once a majority's
positions are in (``candidacy.py``: never over a longer member still running, so the
winner holds everything confirmed; the others look again every ``LOOK_AGAIN`` seconds).
A restarted member keeps its copy and position (``rejoining.adopt_copies``); one whose
record is lost neither writes nor campaigns until it has a whole snapshot (``forgot``);
an old leader succeeded while down votes with a bound (``rejoining.vote_bounded``).
The winner turns its copy into the queue (its stand-in's bindings and local consumers
move over), ships a snapshot to the other members under its new term, and moves the
queue's home in etcd with a fenced transaction; every node's definitions watch then
points its stand-in at it.

Step-down (``stepdown.py``): a leader that hears from no majority of its members
resigns, which starts the failover above among the members that still reach each other.
A leader deposed follows at once, its copy in its queue's directory (``deposed.py``)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from roost.cluster.coordinator import Compare, Delete, Put
from roost.cluster.errors import ClusterError
from roost.cluster.link import frames as f
from roost.cluster.quorum import deposed
from roost.cluster.quorum.follower import Follower
from roost.cluster.quorum.groupbase import GroupBase, Key
from roost.cluster.quorum.leader import Replicator
from roost.cluster.quorum.members import MemberControl
from roost.cluster.quorum.regroup import Regroup
from roost.cluster.quorum.rejoining import Rejoining, adopt_copies, hold_recovered
from roost.cluster.quorum.standin import QuorumGroup, QuorumStandIn
from roost.cluster.quorum.stepdown import StepDown
from roost.cluster.remote_changes import take_place
from roost.core.events import QueueDeclared, QueueDeleted
from roost.core.queues.entry import Entry
from roost.core.queues.quorum import QuorumQueue

if TYPE_CHECKING:
    from roost.cluster.election import Election
    from roost.cluster.link.transport import Link
    from roost.cluster.node import ClusterNode
    from roost.cluster.remote import DataPlane
    from roost.core.broker import Broker
    from roost.core.events import Event
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.quorum")

FALLBACK = 3.0  # seconds the members may take to elect one of them (stepdown.py)
LOOK_AGAIN = 0.5  # seconds between a member's looks at the positions while it may not run
REJOIN_RETRY = 1.0  # seconds between a restarted node's tries while etcd does not answer


class QuorumManager(GroupBase):
    def __init__(self, node: ClusterNode, broker: Broker, plane: DataPlane, defs: Any) -> None:
        self.node = node
        self.broker = broker
        self.plane = plane
        self.defs = defs
        self.prefix = node.prefix
        self.leading: dict[Key, Replicator] = {}
        self.following: dict[Key, Follower] = {}
        self.groups: dict[Key, QuorumGroup] = {}
        self.tasks: dict[Key, asyncio.Task[None]] = {}
        self.elections: dict[Key, Election] = {}  # won here, for fenced writes
        self.regroup = Regroup(self)
        self.stepdown = StepDown(self, FALLBACK)  # a leader without a majority resigns
        self.control = MemberControl(self)  # what the management API calls
        self._free: set[asyncio.Task[None]] = set()
        self._promoting = False
        self.recovered = hold_recovered(self)  # before the data plane's first await
        self.member_dirs = set(broker.message_store.member_copies())  # copies kept here
        node.frame_handlers.append(self.frame)
        node.link_up.append(self._link_up)
        broker.catalog.on_change.append(self._broker_changed)
        for vhost in broker.catalog.vhosts.values():
            vhost.on_change.append(self._changed)

    def _drain_key(self, node: str) -> str:
        return f"{self.prefix}/quorum-drain/{quote(node, safe='')}"

    def _record(self, key: Key, rep: Replicator, term: int) -> bytes:
        target = max(self.regroup.target(key, rep.queue.arguments), len(rep.members))
        record = {"members": rep.members, "leader": self.name, "term": term, "target": target}
        self.regroup.records[key] = record
        return json.dumps(record).encode()

    # -- stand-ins and events

    def make_queue(self, vhost: VHost, item: dict[str, Any], home: str) -> Queue:
        if (item.get("arguments") or {}).get("x-queue-type") != "quorum":
            return self.plane.make_queue(vhost, item, home)
        queue = QuorumStandIn(self.plane, vhost, item, home)
        key = (vhost.name, queue.name)
        deposed.name_successor(vhost.queues.get(queue.name), queue)
        queue.group = self._group_at(key, home)
        return queue

    def _changed(self, event: Event) -> None:
        match event:
            case QueueDeclared(queue=QuorumQueue() as queue) if not self._promoting:
                self._lead_new(queue)
            case QueueDeleted(queue=queue):
                key = (queue.vhost.name, queue.name)
                kept = self._promoting or deposed.replaced_by_stand_in(queue)  # not deleted
                follower = None if kept else self.following.pop(key, None)
                if follower is not None:  # deleted everywhere: our copy goes too
                    follower.store.destroy()
                    task = self.tasks.pop(key, None)
                    if task is not None:
                        task.cancel()
                rep = self.leading.pop(key, None)
                if rep is not None and rep.queue is queue:
                    rep.close()
                    if not self._promoting and not queue.remote:
                        self._spawn(key, self._forget_queue(key, rep.term), replace=False)
            case _:
                pass

    def start(self) -> None:
        """After the definitions: a quorum queue this node recovered from its own disk
        (it led it before a restart) is not served unreplicated. It campaigns again: won,
        it leads with what it kept and resends it to the members; lost, it refuses
        publishes until etcd turns it into a stand-in for the new leader. One whose
        directory holds a member copy was deposed: it waits for that stand-in."""
        for vhost in self.broker.catalog.vhosts.values():
            for queue in list(vhost.queues.values()):
                if isinstance(queue, QuorumQueue) and isinstance(queue.replication, Rejoining):
                    key = (vhost.name, queue.name)
                    if key not in self.member_dirs:  # else its directory is a member copy's
                        self._spawn(key, self._rejoin(queue))  # (store/member_copies.py)
        adopt_copies(self)
        self._spawn_free(self._started())

    async def _started(self) -> None:
        # a node started again is a candidate for groups again (it ends a drain)
        await self.node.coordinator.delete(self._drain_key(self.name))
        self._spawn_free(self.regroup.follow())
        self._spawn_free(self.regroup.reconcile())

    def _spawn_free(self, work: Any) -> None:
        """A task tied to no one queue (the group watch, a request, growing back)."""
        task = asyncio.get_running_loop().create_task(work)
        self._free.add(task)
        task.add_done_callback(self._free.discard)
        task.add_done_callback(self._report)

    async def _rejoin(self, queue: QuorumQueue) -> None:
        """Held until etcd answers: asked again every ``REJOIN_RETRY`` seconds."""
        key = (queue.vhost.name, queue.name)
        while True:
            try:
                kv = await self.node.coordinator.get(self._key("quorum", key))
                break
            except ClusterError as exc:
                if not isinstance(queue.replication, Rejoining):
                    return
                log.warning("queue %s: held until etcd answers (%s)", key, exc)
                await asyncio.sleep(REJOIN_RETRY)
        members = json.loads(kv.value)["members"] if kv is not None else [self.name]
        if not isinstance(queue.replication, Rejoining):
            return  # replaced or deleted meanwhile
        if len(members) == 1:  # a one-member queue: served here as it was
            queue.replication = None
            queue.group = QuorumGroup(self.name, members, self._running)
            return
        rep = Replicator(self.broker, self.node.links, queue, self.name, members)
        for entry in queue.ready:
            rep.live[entry.seq] = entry
        queue.replication = rep
        queue.group = rep
        self.leading[key] = rep
        while True:  # publishes wait for the election meanwhile
            try:
                await self._elect(key, rep, write_home=True)
                return
            except ClusterError as exc:
                if rep.deposed or self.leading.get(key) is not rep:
                    return
                log.warning("queue %s: campaigning again once etcd answers (%s)", key, exc)
                await asyncio.sleep(REJOIN_RETRY)

    # -- leading a new queue

    def _lead_new(self, queue: QuorumQueue) -> None:
        key = (queue.vhost.name, queue.name)
        running = sorted(self._running(), key=lambda n: (n != self.name, n))
        size = queue.arguments.get("x-quorum-initial-group-size")
        size = min(int(size) if size else 3, len(running)) or 1
        members = running[:size] or [self.name]
        if len(members) == 1:  # one member: the single node's quorum queue, as it was
            queue.group = QuorumGroup(self.name, members, self._running)
            return
        rep = Replicator(self.broker, self.node.links, queue, self.name, members)
        queue.replication = rep
        queue.group = rep
        self.leading[key] = rep
        self._spawn(key, self._elect(key, rep, write_home=False))

    async def _elect(self, key: Key, rep: Replicator, *, write_home: bool) -> None:
        election = self._election(key)
        leader = await election.campaign_once()
        if not election.term:
            log.warning("queue %s: %s leads it already", key, leader.node)
            rep.close("another node leads this queue")
            return
        rep.elected = election.term  # older leaders' batches are refused from now on
        ops = [Put(self._key("quorum", key), self._record(key, rep, election.term))]
        if write_home:  # the definition's node is the queue's home: here now
            await self._home_here(key, ops)
        result = await election.fenced_txn([], ops)
        if not result.succeeded:
            rep.close("leadership lost")
            return
        self.elections[key] = election
        self.stepdown.arm(key, rep)
        rep.started(election.term)
        log.info(
            "queue %s: leader %s, term %d, members %s", key, self.name, election.term, rep.members
        )

    async def _forget_queue(self, key: Key, term: int) -> None:
        """The queue was deleted while led here: its election key and group go, but only
        if this node still leads it with ``term`` (a leader paused past its lease and
        resumed sees its queue replaced by a stand-in: the new leader's keys stay)."""
        leader_key = self._key("leaders", key)
        await self.node.coordinator.txn(
            [Compare(leader_key, "create", term)],
            [Delete(leader_key), Delete(self._key("quorum", key))],
        )

    # -- frames

    def frame(self, link: Link, frame: f.Frame) -> None:
        match frame:
            case f.Replicate():
                key = (frame.vhost, frame.queue)
                if self.regroup.excluded(key):  # sent before we left the group
                    return
                follower = self.following.get(key)
                rep = self.leading.get(key)
                if rep is not None:
                    if deposed.fenced_off(rep, link, frame):  # an older leader's batch
                        return
                    deposed.stand_down(self.leading.pop(key))  # we were deposed
                (follower or self.follow(key)).receive(link, frame)
            case f.ReplicateAck():
                rep = self.leading.get((frame.vhost, frame.queue))
                if rep is not None:
                    rep.acknowledged(link.peer, frame)
            case _:
                pass

    # -- failover

    def follow(self, key: Key) -> Follower:
        """A copy of the queue here, watching its leader (a first frame, or added)."""
        vhost = self.broker.catalog.vhosts.get(key[0])
        bound = deposed.release(vhost, key[1])  # one store a dir; the log it led here
        follower = self.following[key] = Follower(self.broker.message_store, *key)
        follower.bound = bound  # voted for (never campaigned on) until made whole
        self._spawn(key, self._watch_leader(key, follower))
        return follower

    async def _follow_leader(self, key: Key, follower: Follower) -> None:
        election = self._election(key)  # under this node's current lease
        while self.following.get(key) is follower:
            leader = await election.leader()
            if leader is not None:
                await election._wait_for_vacancy(leader)
                follower.fence = max(follower.fence, leader.term)  # that leader is done
            if not await self._may_campaign(key, follower):
                # a longer member campaigns, or positions are still coming in: look again
                await asyncio.sleep(LOOK_AGAIN)
                continue
            if not election.lease_id:  # re-registering: a key without a lease never goes
                raise ClusterError("this node has no lease yet")
            await election.campaign_once()
            if election.term:
                await self._promote(key, follower, election)
                return

    async def _may_campaign(self, key: Key, follower: Follower) -> bool:
        """True when a majority's positions are in and no running member is ahead
        (``groupbase._positions_allow``, ``candidacy.py``)."""
        bounded = follower.bound is not None  # an old leader without its copy: votes only
        if not bounded and self.regroup.forgot(key, follower.marked):
            return False  # restarted, not caught up: it neither runs nor counts
        await follower.persist()  # the fence it saw, before its position counts
        mine = follower.position  # a snapshot under way: the copy it kept
        prefix = self._key("quorum-pos", key) + "/"
        group = self._key("quorum", key)
        return await self._positions_allow(prefix, group, mine, follower.fence) and not bounded

    async def _promote(self, key: Key, follower: Follower, election: Election) -> None:
        kv = await self.node.coordinator.get(self._key("quorum", key))
        members = json.loads(kv.value)["members"] if kv is not None else [self.name]
        vhost = self.broker.catalog.vhosts.get(key[0])
        stand_in = None if vhost is None else vhost.queues.get(key[1])
        if vhost is None or stand_in is None or not stand_in.remote:
            await election.resign()
            return
        del self.following[key]
        follower.restore_kept()  # elected on the kept copy's position: it serves that one
        queue, inherited = self._swap(vhost, stand_in, follower)
        rep = Replicator(self.broker, self.node.links, queue, self.name, members)
        rep.elected = election.term  # the old leader's late batches depose it no more
        queue.replication = rep
        rep.inherit(inherited, follower.sure_seq)  # what it knows uncommitted waits
        queue.group = rep
        self.leading[key] = rep
        # the first batch of the new term is a snapshot to every member
        ops = [Put(self._key("quorum", key), self._record(key, rep, election.term))]
        await self._home_here(key, ops)
        result = await election.fenced_txn([], ops)
        if not result.succeeded:
            rep.close("leadership lost")
            return
        self.elections[key] = election
        self.stepdown.arm(key, rep)
        rep.started(election.term)
        log.warning(
            "queue %s: now led here (term %d, %d messages)", key, election.term, len(rep.live)
        )

    def _swap(
        self, vhost: VHost, stand_in: Queue, follower: Follower
    ) -> tuple[QuorumQueue, list[Entry]]:
        """The follower's copy becomes the queue here; its messages go to ``inherit``."""
        queue = QuorumQueue(vhost, stand_in.name, durable=True, arguments=dict(stand_in.arguments))
        queue.attach_store(follower.store)  # so persistence opens no second store
        if follower.member is not None:
            follower.member.drop()  # a queue now, recovered from its definition
        if follower.numbering:  # the copy's numbers are its leader's: so is their run
            queue.numbering = follower.numbering
        # acks this node's clients sent to the old leader that it never replicated, if
        # they name messages by the copy's run of numbers
        acked: set[int] = set()
        if isinstance(stand_in, QuorumStandIn) and stand_in.numbering == queue.numbering:
            acked = stand_in.acked
        queue._seq = follower.max_seq  # numbers are never given twice (acks name them)
        inherited: list[Entry] = []
        for seq, (slot, _size, delivered) in list(follower.held.items()):
            queue._seq = max(queue._seq, seq)
            if delivered and seq & 0xFFFFFFFF in acked:
                del follower.held[seq]
                follower.store.remove(slot)
                continue
            _s, _r, exchange, routing_key, props, body = follower.store.read(slot)
            from roost.core.message import Message, Properties

            entry = Entry(seq, Message(exchange, routing_key, Properties(*props), body))
            entry.slot = slot
            if delivered:  # redelivered, its x-delivery-count kept
                entry.redelivered = True
                entry.deliveries = delivered
            inherited.append(entry)
        consumers = list(stand_in.consumers)
        stand_in.consumers.clear()
        if isinstance(stand_in, QuorumStandIn):  # its clients' acks from now on settle here
            stand_in.successor = queue
            stand_in.retire()  # its subscription at the old leader ends, quietly
        self._promoting = True
        try:
            with self.defs._apply():
                take_place(vhost, stand_in, queue)
        finally:
            self._promoting = False
        for consumer in consumers:
            consumer.queue = queue
            queue.add_consumer(consumer)
        return queue, inherited

    async def stop(self) -> None:
        await self._cancel([*self.tasks.values(), *self._free])
