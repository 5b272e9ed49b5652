"""``remote_changes.take_place``: a queue replaced under its name (a stand-in by the
promoted copy, ``manager._swap`` and ``stream_swap``; a queue by the stand-in of the one
that won a race, ``_put_remote_queue``) keeps every binding the old one had."""

from __future__ import annotations

from roost.cluster.remote_changes import take_place
from roost.core.message import Message, Properties
from roost.core.queues.quorum import QuorumQueue
from tests.brokers import memory_broker

QUORUM = {"x-queue-type": "quorum"}


def test_the_queue_taking_the_place_keeps_the_bindings_and_gets_the_messages() -> None:
    vhost = memory_broker().catalog.vhosts["/"]
    vhost.declare_exchange("topics", "topic")
    vhost.declare_exchange("by-headers", "headers")
    old = QuorumQueue(vhost, "work", durable=True, arguments=dict(QUORUM))
    vhost.adopt_queue(old)
    vhost.bind("topics", old, "a.#", {})
    vhost.bind("by-headers", old, "", {"x-match": "all", "k": "v"})
    new = QuorumQueue(vhost, "work", durable=True, arguments=dict(QUORUM))

    take_place(vhost, old, new)

    assert vhost.queues["work"] is new and old.deleted
    kept = sorted(
        (b.source.name, b.routing_key, b.arguments)
        for ex in vhost.exchanges.values()
        for b in ex.bindings_to(new)
        if ex.name  # the default exchange's is implicit
    )
    assert kept == [("by-headers", "", {"x-match": "all", "k": "v"}), ("topics", "a.#", {})]
    assert not [b for ex in vhost.exchanges.values() for b in ex.bindings_to(old)]
    assert vhost.publish("topics", Message("topics", "a.b", Properties(), b"x"))[0] == 1
    assert new.message_count == 1 and old.message_count == 0
