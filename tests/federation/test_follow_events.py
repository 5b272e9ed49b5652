"""Federation follows the management port's change events (issue 23's leftover): a
policy, an upstream or a federated exchange coming or going starts or stops links at
once, a binding change pokes only its exchange's links, and nothing is looked at while
nothing changes. In process, on the core's in-memory twin; the links' upstream is a
closed port, so they only try to connect (the AMQP side is tested in test_federation)."""

from __future__ import annotations

import asyncio
from typing import Any

from roost.core.events import BindingAdded, Event, VHostChanged
from roost.federation import Federation
from tests.brokers import memory_broker
from tests.support import free_port

UPSTREAM = {"uri": "amqp://127.0.0.1:{port}", "reconnect-delay": 60}


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def _policy(broker: Any, pattern: str) -> None:
    broker.management.definitions.put_policy(
        "/",
        "fed",
        pattern=pattern,
        definition={"federation-upstream": "up"},
        apply_to="exchanges",
    )


def test_follow_tells_changes_in_vhosts_added_later() -> None:
    broker = memory_broker()
    seen: list[Event] = []
    broker.management.queries.follow(seen.append)
    broker.management.definitions.put_vhost("later")
    client = broker.connect(
        broker.authenticate("guest", "guest", peer_host="127.0.0.1"), "/", protocol="t", peer="p"
    )
    broker.declare_exchange(client, "x", "direct")
    broker.declare_queue(client, "q")
    broker.bind_queue(client, "q", "x", "k", {})
    assert any(isinstance(e, VHostChanged) and e.vhost.name == "later" for e in seen)
    assert [e.binding.routing_key for e in seen if isinstance(e, BindingAdded)] == ["k"]
    broker.management.definitions.put_permission(
        "guest", "later", configure=".*", write=".*", read=".*"
    )
    other = broker.connect(
        broker.authenticate("guest", "guest", peer_host="127.0.0.1"), "later", protocol="t",
        peer="p",
    )
    before = len(seen)
    broker.declare_queue(other, "q2")
    assert len(seen) == before + 1  # the vhost made after follow() is followed too


def test_links_start_and_stop_on_events_and_nothing_is_polled() -> None:
    asyncio.run(_links_start_and_stop())


async def _links_start_and_stop() -> None:
    broker = memory_broker()
    m = broker.management
    fed = Federation(m.parameters, m.queries, local_port=free_port(), node="n", cluster_name=str)
    fed.start()
    try:
        await _turns()
        assert fed.looks == 1 and fed.links == {}  # the look at start
        client = broker.connect(
            broker.authenticate("guest", "guest", peer_host="127.0.0.1"), "/", protocol="t",
            peer="p",
        )
        broker.declare_exchange(client, "fed.x", "direct")
        m.parameters.put_parameter(
            "/", "federation-upstream", "up", {**UPSTREAM, "uri": f"amqp://127.0.0.1:{free_port()}"}
        )
        _policy(broker, "^fed\\.")
        await _turns()
        assert [k[2] for k in fed.links] == ["fed.x"]  # no wait for a poll

        looks = fed.looks
        await asyncio.sleep(1.2)  # the old runtime looked every 0.5 s
        assert fed.looks == looks

        broker.declare_exchange(client, "fed.y", "topic")
        await _turns()
        assert sorted(k[2] for k in fed.links) == ["fed.x", "fed.y"]

        link_x = next(v for k, v in fed.links.items() if k[2] == "fed.x")
        link_y = next(v for k, v in fed.links.items() if k[2] == "fed.y")
        link_x._poked.clear()
        link_y._poked.clear()
        broker.declare_queue(client, "q")
        broker.bind_queue(client, "q", "fed.x", "k", {})
        assert link_x._poked.is_set() and not link_y._poked.is_set()

        broker.delete_exchange(client, "fed.y")
        await _turns()
        assert [k[2] for k in fed.links] == ["fed.x"]
        m.definitions.delete_policy("/", "fed")
        await _turns()
        assert fed.links == {}
    finally:
        await fed.stop()
