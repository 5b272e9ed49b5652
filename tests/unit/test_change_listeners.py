"""A definition change reaches every listener even when one of them fails, so what the
store saves (its listener) never falls behind what the broker holds in memory."""

from __future__ import annotations

import pytest

from roost.core.events import Event, PolicyChanged, QueueDeclared
from tests.brokers import memory_broker


def _failing(event: Event) -> None:
    raise RuntimeError(f"listener broke on {type(event).__name__}")


def test_broker_change_reaches_the_listeners_after_a_failing_one() -> None:
    broker = memory_broker(defaults=False)
    broker.catalog.add_vhost("/")
    heard: list[Event] = []
    broker.catalog.on_change.insert(0, _failing)
    broker.catalog.on_change.append(heard.append)
    with pytest.raises(RuntimeError, match="listener broke on PolicyChanged"):
        broker.catalog.put_policy("/", "p", pattern=".*", definition={"max-length": 1})
    assert [type(e) for e in heard] == [PolicyChanged] and ("/", "p") in broker.catalog.policies


def test_vhost_change_reaches_the_listeners_after_a_failing_one() -> None:
    broker = memory_broker(defaults=False)
    vhost = broker.catalog.add_vhost("/")
    heard: list[Event] = []
    vhost.on_change.insert(0, _failing)
    vhost.on_change.append(heard.append)
    with pytest.raises(RuntimeError):
        vhost.declare_queue("q")
    assert heard == [QueueDeclared(vhost.queues["q"])]
