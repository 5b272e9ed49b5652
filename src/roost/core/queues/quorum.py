"""``x-queue-type: quorum`` on a single node: quorum-queue semantics without replication.

A quorum queue here is a durable classic queue that behaves as RabbitMQ 3.10's quorum
queues do where a client can tell: it refuses what they refuse (with their codes and
words), writes every message to disk, persistent or not (a Raft log does), so confirms
follow the fsync, and counts deliveries (``x-delivery-count`` on each one,
``x-delivery-limit`` drops or dead-letters past it). Management shows ``type: quorum``.

It is one node's store, not a replicated log: a lost disk loses it. Replicated quorum
queues, on a cluster, replace this class; everything quorum-specific is in this module.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from roost.core.errors import PreconditionFailed
from roost.core.queues.base import Queue

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.consumer import Consumer
    from roost.core.message import Message
    from roost.core.queues.entry import Entry
    from roost.core.vhost import VHost


class Replication(Protocol):
    """A cluster's replication of one quorum queue (roost.cluster.quorum), led here: it
    takes the publishes (they join the queue once a majority holds them) and hears of
    deliveries (each with its count) and of messages leaving for good."""

    def push(self, message: Message) -> bool: ...
    def delivered(self, entry: Entry) -> None: ...
    def forgotten(self, entry: Entry) -> None: ...
    def close(self, why: str = ...) -> None: ...

# arguments of other queue types that RabbitMQ 3.10 refuses on a quorum queue (others,
# its own and unknown x- ones, pass)
REFUSED_ARGUMENTS = (
    "x-max-priority",
    "x-queue-mode",
    "x-queue-master-locator",
    "x-queue-version",
    "x-max-age",
    "x-stream-max-segment-size-bytes",
    "x-initial-cluster-size",
)


class QuorumQueue(Queue):
    kind = "quorum"
    stores_all = True  # transient messages go to disk too
    counts_deliveries = True  # x-delivery-count on every delivery

    def __init__(
        self,
        vhost: VHost,
        name: str,
        *,
        durable: bool = False,
        exclusive_owner: Client | None = None,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            vhost,
            name,
            durable=durable,
            exclusive_owner=exclusive_owner,
            auto_delete=auto_delete,
            arguments=arguments,
        )
        self._attach_features()  # where deliveries are counted
        self.replication: Replication | None = None  # set on a cluster's leader
        # a cluster's view for management: (leader, members, online); None: one node
        self.group: Any = None
        # a cluster's leader: may it hand messages out now (not when deposed, or cut off
        # from etcd past its lease's margin: another may lead already); None: always
        self.serving: Callable[[], bool] | None = None
        self._plain_dispatch = True  # dispatch below only adds that gate
        # names this run of message numbers: a queue recovered from its own disk numbers
        # its messages afresh from 1, so a number acked before may name another message
        # now; a cluster member promoted from a copy keeps its leader's run (set then)
        self.numbering = random.getrandbits(63) + 1

    def dispatch(self) -> None:
        serving = self.serving
        if serving is None or serving():
            super().dispatch()

    def dispatch_to(self, consumer: Consumer) -> None:
        serving = self.serving
        if serving is None or serving():
            super().dispatch_to(consumer)

    def take(self) -> Entry | None:
        serving = self.serving
        if serving is not None and not serving():
            return None  # basic.get finds it empty while its leader may not serve
        return super().take()

    def push(self, message: Message) -> bool:
        replication = self.replication
        if replication is None:
            return super().push(message)
        return replication.push(message)

    def _delivered(self, entry: Entry) -> None:
        super()._delivered(entry)
        if self.replication is not None:  # each one: the count survives a failover
            self.replication.delivered(entry)

    def _forget(self, entry: Entry) -> None:
        super()._forget(entry)
        if self.replication is not None:
            self.replication.forgotten(entry)


def check_declare(
    name: str,
    vhost: str,
    *,
    server_named: bool,
    durable: bool,
    exclusive: bool,
    auto_delete: bool,
    arguments: dict[str, Any],
) -> None:
    """RabbitMQ 3.10's refusals of a quorum queue declaration, in its order (all 406)."""
    if server_named:
        raise PreconditionFailed("Cannot declare a server-named queue for type rabbit_quorum_queue")
    where = f"for queue '{name}' in vhost '{vhost}'"
    for key in REFUSED_ARGUMENTS:
        if key in arguments:
            raise PreconditionFailed(
                f"invalid arg '{key}' {where} of queue type rabbit_quorum_queue"
            )
    for refused, why in (
        (auto_delete, "auto-delete"),
        (exclusive, "exclusive-owner"),
        (not durable, "non-durable"),
    ):
        if refused:
            raise PreconditionFailed(f"invalid property '{why}' {where}")
