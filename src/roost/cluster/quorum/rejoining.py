"""The replication of a quorum queue recovered from this node's own disk (it led it
before a restart) until ``QuorumManager._rejoin`` knows its group; and the copies this
node kept as a member (``adopt_copies``)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from roost.cluster.quorum.follower import Follower
from roost.cluster.quorum.standin import QuorumStandIn
from roost.core.queues.quorum import QuorumQueue

if TYPE_CHECKING:
    from roost.cluster.quorum.groupbase import Key
    from roost.cluster.quorum.manager import QuorumManager
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


log = logging.getLogger("roost.cluster.quorum")

UNBOUNDED = 1 << 62  # a log index above any real one


def hold_recovered(manager: QuorumManager) -> set[Key]:
    """A quorum queue this node recovered from its own disk refuses publishes until
    ``_rejoin`` knows its group: the links are up before the definitions are read,
    and a publish forwarded here meanwhile was taken by the unreplicated queue and
    confirmed; lost when another member won the election (a restarted leader)."""
    held: set[Key] = set()
    for vhost in manager.broker.catalog.vhosts.values():
        for queue in vhost.queues.values():
            if isinstance(queue, QuorumQueue) and queue.replication is None:
                queue.replication = Rejoining(queue)
                held.add((vhost.name, queue.name))
    return held


def adopt_copies(manager: QuorumManager) -> None:
    """After the definitions: each member copy kept on disk (``store/member_log.py``)
    follows its leader again, with the position its record holds, so it writes that
    position and may campaign on it when the leader goes (``Regroup.forgot`` is false
    for it). A copy whose queue is gone goes; one without a usable record is dropped by
    the store, and the member waits for a snapshot as one that forgot. A group that no
    longer lists this node drops the copy when its record is read (``Regroup._seen``)."""
    store = manager.broker.message_store
    for key in manager.recovered - manager.member_dirs:
        vhost = manager.broker.catalog.vhosts.get(key[0])
        if vhost is not None and isinstance(vhost.queues.get(key[1]), QuorumStandIn):
            manager._spawn(key, vote_bounded(manager, key))
    for key in store.member_copies():
        vhost = manager.broker.catalog.vhosts.get(key[0])
        here = None if vhost is None else vhost.queues.get(key[1])
        if key in manager.following or key in manager.leading:
            continue
        if here is None:  # deleted while this node was down
            store.drop_member(*key)
            log.info("queue %s: deleted while down, its member copy goes", key)
            continue
        if not isinstance(here, QuorumStandIn):
            continue  # led here: the directory is the queue's own store
        copy = store.recover_member(*key)
        if copy is None:
            log.warning("queue %s: member copy unusable, waiting for a snapshot", key)
            continue
        follower = manager.following[key] = Follower(store, key[0], key[1], copy)
        log.info(
            "queue %s: member copy kept (%d messages, position %s)",
            key, len(follower.held), follower.position,
        )  # fmt: skip
        manager._spawn(key, manager._watch_leader(key, follower))


async def vote_bounded(manager: QuorumManager, key: Key) -> None:
    """This node led the queue before its restart, and another member has led it since
    (its definition made the queue a stand-in here, dropping the copy): a member again,
    with an empty copy, that writes a position bounding the log it had and never
    campaigns until a snapshot makes it whole. It led no later term than the one before
    the group record's (a member since, it would have kept a member record), so
    ``(term - 1, UNBOUNDED)`` is at least its true position: a member with a newer term
    may still win, and one holding less than it does never does."""
    kv = await manager.node.coordinator.get(manager._key("quorum", key))
    record = json.loads(kv.value) if kv is not None else {}
    if manager.name not in record.get("members", ()) or record.get("leader") == manager.name:
        return
    if key in manager.following or key in manager.leading:
        return
    follower = manager.following[key] = Follower(manager.broker.message_store, *key)
    follower.bound = (int(record["term"]) - 1, UNBOUNDED)
    log.info("queue %s: led here before %s, a member again (position up to %s)",
             key, record.get("leader"), follower.bound)  # fmt: skip
    await manager._watch_leader(key, follower)
