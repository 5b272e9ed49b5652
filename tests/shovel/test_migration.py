"""The migration guide (docs/migrate-from-rabbitmq.md) end to end against a real
RabbitMQ 3.10: definitions exported with rabbitmqctl and imported with ``roost ctl``
(a RabbitMQ user logs in to Roost with its own password afterwards), then one
``on-confirm`` shovel per queue with ``src-delete-after: queue-length``; every message
is counted by id in Roost: none lost, none twice, RabbitMQ's queues empty. The same
steps with 100,000 messages: ``bench/migrate_from_rabbitmq.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from bench.migrate_from_rabbitmq import (
    check,
    declare_source,
    depths,
    drain,
    fill,
    migrate,
    queue_names,
)
from tests.rabbitmq import RabbitMQ
from tests.support import RoostProcess

COUNT = 10_000  # the suite's budget; 100,000: bench/migrate_from_rabbitmq.py


@pytest.fixture
def rabbit(tmp_path: Path) -> Iterator[RabbitMQ]:
    node = RabbitMQ(tmp_path / "rabbit").start()
    try:
        yield node
    finally:
        node.stop()


def test_the_guide_moves_every_message_once(tmp_path: Path, rabbit: RabbitMQ) -> None:
    queues = queue_names(10)
    declare_source(rabbit.url, queues)
    rabbit.ctl("add_user", "orders-app", "s3cret")
    rabbit.ctl("set_permissions", "-p", "/", "orders-app", ".*", ".*", ".*")
    fill(rabbit.url, queues, COUNT)
    assert sum(depths(rabbit.url, queues).values()) == COUNT

    defs = tmp_path / "definitions.json"
    rabbit.ctl("export_definitions", str(defs))
    roost = RoostProcess(tmp_path / "roost").start()
    try:
        migrate(defs, rabbit.url, roost.http_url, timeout=120)
        assert depths(rabbit.url, queues) == dict.fromkeys(queues, 0)
        # the application's user came across with its password hash
        app = f"amqp://orders-app:s3cret@127.0.0.1:{roost.amqp_port}/%2F"
        with pika.BlockingConnection(pika.URLParameters(app)) as conn:
            ch = conn.channel()
            ch.basic_publish("orders", "orders.3.new", b"after")  # the bindings came too
            assert ch.queue_declare("orders.3", passive=True).method.message_count \
                == COUNT // 10 + 1
        seen = drain(roost.url, queues, COUNT + 1)
        assert seen.pop("after") == 1  # not an id: left out of the count
        assert check(seen, COUNT) == {"lost": 0, "duplicated": 0, "unknown": 0,
                                      "received": COUNT}
    finally:
        roost.kill()
