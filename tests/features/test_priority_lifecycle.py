"""Priority queues (x-max-priority) with TTL, length limits and dead-lettering, with pika.

Orders were recorded from RabbitMQ 3.10.8 with the same calls, except the first test:
there RabbitMQ 3.10 never arms the new head's deadline and hands the expired message to
basic.get; Roost dead-letters it when it expires, as a queue without priorities does.
"""

from __future__ import annotations

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.features.conftest import count, dead_letter_queue, drain, settle, wait_get


def _props(priority: int, expiration: str | None = None) -> pika.BasicProperties:
    return pika.BasicProperties(priority=priority, expiration=expiration)


def _bodies(got: list[bytes]) -> list[str]:
    return [b.decode() for b in got]


def _priority_queue(ch: BlockingChannel, qname: str, **arguments: object) -> str:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(
        qname, arguments={"x-max-priority": 10, "x-dead-letter-exchange": dlq, **arguments}
    )
    return dlq


def test_a_new_higher_priority_head_expires_on_time(ch: BlockingChannel, qname: str) -> None:
    """The short-lived message goes in front of one that waits: its own deadline is armed."""
    dlq = _priority_queue(ch, qname)
    ch.basic_publish("", qname, b"low-long", _props(0, "60000"))
    ch.basic_publish("", qname, b"high-short", _props(5, "100"))
    _, props, body = wait_get(ch, dlq)  # the timer, not a basic.get on the queue
    assert body == b"high-short" and props.headers["x-death"][0]["reason"] == "expired"
    assert _bodies(drain(ch, qname)) == ["low-long"]


def test_queue_ttl_expires_in_priority_order(ch: BlockingChannel, qname: str) -> None:
    dlq = _priority_queue(ch, qname, **{"x-message-ttl": 100})
    for body, priority in (("a0", 0), ("b5", 5), ("c2", 2)):
        ch.basic_publish("", qname, body.encode(), _props(priority))
    got = [wait_get(ch, dlq)[2] for _ in range(3)]
    assert _bodies(got) == ["b5", "c2", "a0"]
    assert count(ch, qname) == 0


def test_a_long_lived_head_holds_back_a_lower_priority_one(
    conn: pika.BlockingConnection, ch: BlockingChannel, qname: str
) -> None:
    """Expiry happens at the head only, in priority order (RabbitMQ's rule)."""
    dlq = _priority_queue(ch, qname)
    ch.basic_publish("", qname, b"head-long", _props(5, "60000"))
    ch.basic_publish("", qname, b"low-short", _props(0, "50"))
    settle(conn, 0.3)  # past low-short's deadline: it waits behind the head
    assert count(ch, qname) == 2 and count(ch, dlq) == 0
    assert _bodies(drain(ch, qname)) == ["head-long"]  # low-short is never delivered...
    assert wait_get(ch, dlq)[2] == b"low-short"  # ...but dead-lettered


@pytest.mark.parametrize(
    ("limit", "published", "dead", "left"),
    [
        # drop-head drops the head: the highest priorities go first (as RabbitMQ)
        ({"x-max-length": 2}, [("a0", 0), ("b5", 5), ("c1", 1), ("d5", 5)],
         ["b5", "d5"], ["c1", "a0"]),
        ({"x-max-length-bytes": 4}, [("aa", 0), ("bb", 5), ("cc", 1)], ["bb"], ["cc", "aa"]),
    ],
)
def test_drop_head_on_a_priority_queue(
    ch: BlockingChannel, qname: str, limit: dict[str, int],
    published: list[tuple[str, int]], dead: list[str], left: list[str],
) -> None:
    dlq = _priority_queue(ch, qname, **limit)
    for body, priority in published:
        ch.basic_publish("", qname, body.encode(), _props(priority))
    got = [wait_get(ch, dlq) for _ in dead]
    assert _bodies([body for *_, body in got]) == dead
    assert {p.headers["x-death"][0]["reason"] for _, p, _ in got} == {"maxlen"}
    assert _bodies(drain(ch, qname)) == left


def test_reject_publish_dlx_on_a_priority_queue(ch: BlockingChannel, qname: str) -> None:
    """A full queue refuses even the highest priority: nacked and dead-lettered."""
    dlq = _priority_queue(ch, qname, **{"x-max-length": 2, "x-overflow": "reject-publish-dlx"})
    ch.confirm_delivery()
    ch.basic_publish("", qname, b"a0", _props(0))
    ch.basic_publish("", qname, b"b5", _props(5))
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", qname, b"c9", _props(9))
    _, props, body = wait_get(ch, dlq)
    assert body == b"c9" and props.headers["x-death"][0]["reason"] == "maxlen"
    assert _bodies(drain(ch, qname)) == ["b5", "a0"]
