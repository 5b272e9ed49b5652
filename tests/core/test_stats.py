"""core/stats.py on its own: it follows the catalog's events, counting queue churn and
keeping what deleted queues and exchanges had counted, so totals never go down."""

from __future__ import annotations

from roost.core.client import ClientCounts
from roost.core.message import Message, Properties
from tests.core.components import parts


def test_queue_churn_and_retired_counts_follow_the_events() -> None:
    p = parts()
    vhost = p.catalog.vhosts["/"]
    queue = vhost.declare_queue("q")
    exchange = vhost.declare_exchange("x", "fanout")
    vhost.bind("x", queue, "", {})
    for _ in range(3):
        vhost.publish("x", Message("x", "", Properties(), b"m"))
    queue.stat_delivered, queue.stat_acked = 2, 1  # as deliveries and acks count them
    vhost.delete_queue(queue)
    vhost.delete_exchange("x")
    c = p.stats.counters
    assert (c.queue_created, c.queue_deleted) == (1, 1)
    assert (c.retired_delivered, c.retired_acked) == (2, 1)
    assert (c.retired_published_in, c.retired_published_out) == (exchange.stat_in, 3) == (3, 3)


def test_a_vhost_added_later_is_followed_too() -> None:
    p = parts()
    p.catalog.put_vhost("later")
    p.catalog.vhosts["later"].declare_queue("q")
    assert p.stats.counters.queue_created == 1


def test_a_closed_connections_counts_add_up_field_by_field() -> None:
    # ClientCounts.add names its fields (a compiled class): every one of them is summed
    retired, closing = ClientCounts(), ClientCounts()
    fresh = ClientCounts()  # its fields, on both builds (a native class has no __slots__)
    names = [n for n in dir(fresh) if not n.startswith("_") and isinstance(getattr(fresh, n), int)]
    for n, name in enumerate(names, 1):
        setattr(retired, name, n)
        setattr(closing, name, 100 * n)
    closing.sizes[0], closing.sizes[-1] = 5, 7
    retired.add(closing)
    assert {name: getattr(retired, name) for name in names} == {
        name: 101 * n for n, name in enumerate(names, 1)
    }
    assert retired.sizes[0] == 5 and retired.sizes[-1] == 7 and sum(retired.sizes) == 12
