"""This node's stand-in for a queue homed on another node (``RemoteQueue``): routing,
consumers and basic.get use it like any queue, and ``roost.cluster.remote.DataPlane``
carries what it does to and from the home node."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.cluster.link import frames as f
from roost.cluster.wire import link_properties_cache
from roost.core.auth import User
from roost.core.client import Client
from roost.core.errors import NotFound
from roost.core.flow import QueueFlow
from roost.core.queues.base import Queue
from roost.core.queues.entry import Entry

if TYPE_CHECKING:
    from roost.cluster.remote import DataPlane
    from roost.core.consumer import Consumer
    from roost.core.message import Message
    from roost.core.vhost import VHost


class RemoteEntry(Entry):
    """An entry the home node delivered: settling it settles ``delivery_id`` there;
    ``home_seq`` is the home queue's number for it (modulo 2**32)."""

    __slots__ = ("delivery_id", "home_seq")

    def __init__(self, seq: int, message: Message, delivery_id: int, home_seq: int = 0) -> None:
        super().__init__(seq, message)
        self.delivery_id = delivery_id
        self.home_seq = home_seq


class RemoteFlow(QueueFlow):
    """A stand-in is congested while its publish window to the home node is full; its own
    backlog (what the home node sent ahead) never holds anyone."""

    __slots__ = ()

    def after_push(self) -> None:
        pass

    def after_drain(self) -> None:
        pass

    def check_progress(self, socket_wait_cap: float = 0.0) -> None:
        pass  # the window moves with the home node's answers, not with deliveries here

    def set_congested(self, congested: bool) -> None:
        self.congested = congested
        if not congested:
            self.release_all()


class RemoteQueue(Queue):
    """This node's stand-in for a queue homed on ``home``."""

    remote = True
    # sent with the subscription (a replicated stream's consumer: where it reads from)
    subscribe_arguments: dict[str, Any] | None = None

    def __init__(self, plane: DataPlane, vhost: VHost, item: dict[str, Any], home: str) -> None:
        super().__init__(
            vhost,
            item["name"],
            durable=bool(item.get("durable")),
            auto_delete=bool(item.get("auto_delete")),
            arguments=dict(item.get("arguments") or {}),
        )
        self.plane = plane
        self.home = home
        if item.get("exclusive"):  # another node's connection owns it: 405 here
            self.exclusive_owner = Client(
                protocol="cluster", peer=home, user=User("rmq-internal", ""), vhost=vhost
            )
        self.consumer_id = 0  # our subscription at the home node; 0: none
        self.credit = 0  # its credit there (home.credit_for)
        # the home node's figures, as of its last answer (refresh, fetch, purge)
        self.home_ready = 0
        self.home_consumers = 0
        self.home_purged = -1  # the home node's count of the last purge (-1: none yet)
        self.held_purged = 0  # what this node held of it (sent ahead, not handed out)
        self.window = RemoteFlow(self)
        self.in_flight = 0  # publishes forwarded to the home node, not yet answered
        self.properties = link_properties_cache()  # of the deliveries the home node relays
        self.flow = self.window

    # -- publishing: to the home node

    def push(self, message: Message) -> bool:
        return self.plane.forward(self, message)

    # -- deliveries from the home node

    def subscribed(self, numbering: int) -> None:
        """The home node took the subscription (``ConsumeOk``), before any delivery;
        ``numbering``: a replicated queue's run of message numbers (``quorum.standin``)."""

    def arrived(
        self, delivery_id: int, redelivered: bool, message: Message, home_seq: int = 0
    ) -> None:
        self._seq += 1
        entry = RemoteEntry(self._seq, message, delivery_id, home_seq)
        entry.redelivered = redelivered
        if self.ready or not self._offer(entry):
            self._own_ready().append(entry)
            self.ready_bytes += entry.size

    def settle(self, entry: Entry) -> None:
        self.unacked -= 1
        self.stat_acked += 1
        self.plane.settle(self, entry, f.SettleOp.ACK, requeue=False)

    def discard(self, entry: Entry) -> None:
        self.unacked -= 1
        self.plane.settle(self, entry, f.SettleOp.REJECT, requeue=False)

    def requeue(self, entries: Any) -> None:
        for entry in entries:  # the home node puts them back in their place
            self.unacked -= 1
            self.plane.settle(self, entry, f.SettleOp.REJECT, requeue=True)

    @property
    def message_count(self) -> int:
        """Ready at home, and what the home node sent ahead here not yet handed out."""
        return self.home_ready + len(self.ready)

    @property
    def consumer_count(self) -> int:
        """The home node's consumers, with this node's own in place of its subscription."""
        theirs = max(0, self.home_consumers - (1 if self.consumer_id else 0))
        return theirs + len(self.consumers)

    def refresh(self) -> None:
        self.plane.queue_op(self, f.QueueOpKind.COUNT)

    def fetch(self) -> None:
        if not self.ready:
            self.plane.get(self)

    def fetched(self, delivery_id: int, redelivered: bool, message: Message) -> None:
        """basic.get's message from the home node, kept for ``take`` (the next get)."""
        self._seq += 1
        entry = RemoteEntry(self._seq, message, delivery_id)
        entry.redelivered = redelivered
        self._own_ready().append(entry)
        self.ready_bytes += entry.size

    def purge(self) -> int:
        """Purged at home too. The count returned is what this node knew of the home's
        figures (refreshed by every declare) and what it held itself; ``purged`` gives
        the home node's answer once it came (the reply waits for it)."""
        count = self.message_count
        self.held_purged = len(self.ready)
        self.home_purged = -1
        self._give_back(requeue=False)
        self.plane.queue_op(self, f.QueueOpKind.PURGE)
        self.home_ready = 0
        return count

    def purged(self, count: int) -> int:
        if self.home_purged < 0:
            return count  # no answer (the link went down): the estimate
        return self.home_purged + self.held_purged

    def _give_back(self, *, requeue: bool) -> None:
        for entry in self.ready:
            self.plane.settle(self, entry, f.SettleOp.REJECT, requeue=requeue)
        self.ready.clear()
        self.ready_bytes = 0

    def lost_home(self) -> None:
        """The link to the home node went down: what it sent ahead is requeued there."""
        self.consumer_id = 0
        self.ready.clear()
        self.ready_bytes = 0

    # -- consumers

    def check_available(self) -> None:
        if not self.plane.reachable(self.home):
            kind = "durable queue" if self.durable else "queue"  # RabbitMQ's words
            raise NotFound(
                f"home node '{self.home}' of {kind} '{self.name}' in vhost "
                f"'{self.vhost.name}' is down or inaccessible"
            )

    def add_consumer(self, consumer: Consumer) -> None:
        super().add_consumer(consumer)
        if not self.consumer_id:
            self.plane.subscribe(self)
        else:
            self.plane.resize(self)

    def remove_consumer(self, consumer: Consumer) -> None:
        """No auto-delete here: the home node counts this node as one consumer."""
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        if not self.consumers and self.consumer_id:
            self._give_back(requeue=True)
            self.plane.unsubscribe(self)
        elif self.consumers:
            self.plane.resize(self)
            self.dispatch()
