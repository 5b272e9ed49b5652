"""The replication of a quorum queue recovered from this node's own disk (it led it
before a restart) until ``QuorumManager._rejoin`` knows its group; and the copies this
node kept as a member (``adopt_copies``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from roost.cluster.quorum.follower import Follower
from roost.cluster.quorum.standin import QuorumStandIn

if TYPE_CHECKING:
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


def adopt_copies(manager: QuorumManager) -> None:
    """After the definitions: each member copy kept on disk (``store/member_log.py``)
    follows its leader again, with the position its record holds, so it writes that
    position and may campaign on it when the leader goes (``Regroup.forgot`` is false
    for it). A copy whose queue is gone goes; one without a usable record is dropped by
    the store, and the member waits for a snapshot as one that forgot. A group that no
    longer lists this node drops the copy when its record is read (``Regroup._seen``)."""
    store = manager.broker.message_store
    for key in store.member_copies():
        vhost = manager.broker.catalog.vhosts.get(key[0])
        here = None if vhost is None else vhost.queues.get(key[1])
        if key in manager.following or key in manager.leading:
            continue
        if here is None:  # deleted while this node was down
            store.open_queue(*key).destroy()
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
