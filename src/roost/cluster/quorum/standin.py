"""A member's (or any other node's) stand-in for a replicated quorum queue: the data
plane's ``RemoteQueue`` pointed at the queue's leader, which survives the leader's loss:
its consumers are not cancelled, and when another member is elected the stand-in is
pointed at it (``rehome``) and subscribes there again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.cluster.stand_in import RemoteQueue

if TYPE_CHECKING:
    from roost.cluster.remote import DataPlane
    from roost.core.vhost import VHost


class QuorumGroup:
    """What management shows of a queue led elsewhere (RabbitMQ's leader / members /
    online); ``online`` is the members the leader last said were in sync (in the group
    record, ``regroup.py``) whose node is running."""

    def __init__(self, leader: str, members: list[str], running: Any) -> None:
        self.leader = leader
        self.members = members
        self.in_sync: list[str] | None = None  # None: the leader has not said yet
        self._running = running

    def online(self) -> list[str]:
        up = set(self._running())
        return [m for m in self.members if m in up and (self.in_sync is None or m in self.in_sync)]


class QuorumStandIn(RemoteQueue):
    kind = "quorum"
    survives_home = True  # remote.DataPlane: not cancelled when the leader's node goes

    def __init__(self, plane: DataPlane, vhost: VHost, item: dict[str, Any], home: str) -> None:
        super().__init__(plane, vhost, item, home)
        self.group: QuorumGroup | None = None

    def lost_home(self) -> None:
        """What this node's clients hold from the old leader can no longer be settled
        there: their acks are dropped (the new leader redelivers those messages, marked
        redelivered) instead of settling other messages under reused delivery ids."""
        for consumer in self.consumers:
            for queue, entry, _c in consumer.session._unacked.values():
                if queue is self:
                    entry.delivery_id = 0  # type: ignore[attr-defined]
        super().lost_home()

    def rehome(self, home: str) -> None:
        """Another member was elected leader: publishes and consumers go there now."""
        if home == self.home:
            return
        self.lost_home()
        self.plane._subscriptions.pop(self.consumer_id, None)
        self.consumer_id = 0
        self.home = home
        if self.group is not None:
            self.group.leader = home
        if self.consumers:
            self.plane.subscribe(self)
