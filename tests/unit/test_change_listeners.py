"""A definition change reaches every listener even when one of them fails, so what the
store saves (its listener) never falls behind what the broker holds in memory."""

from __future__ import annotations

from typing import Any

import pytest

from roost.core.broker import Broker


def _failing(kind: str, obj: Any) -> None:
    raise RuntimeError(f"listener broke on {kind}")


def test_broker_change_reaches_the_listeners_after_a_failing_one() -> None:
    broker = Broker()
    broker.add_vhost("/")
    heard: list[str] = []
    broker.on_change.insert(0, _failing)
    broker.on_change.append(lambda kind, obj: heard.append(kind))
    with pytest.raises(RuntimeError, match="listener broke on policy"):
        broker.put_policy("/", "p", pattern=".*", definition={"max-length": 1})
    assert heard == ["policy"] and ("/", "p") in broker.policies


def test_vhost_change_reaches_the_listeners_after_a_failing_one() -> None:
    broker = Broker()
    vhost = broker.add_vhost("/")
    heard: list[str] = []
    vhost.on_change.insert(0, _failing)
    vhost.on_change.append(lambda kind, obj: heard.append(kind))
    with pytest.raises(RuntimeError):
        vhost.declare_queue("q")
    assert heard == ["queue"] and "q" in vhost.queues
