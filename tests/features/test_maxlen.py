"""Queue length limits with pika: x-max-length, x-max-length-bytes and x-overflow
(drop-head, reject-publish, reject-publish-dlx), as RabbitMQ 3.10 behaves."""

from __future__ import annotations

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.features.conftest import count, dead_letter_queue, drain, wait_get
from tests.support import RoostProcess


def test_drop_head_dead_letters_the_oldest(ch: BlockingChannel, qname: str) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-max-length": 2, "x-dead-letter-exchange": dlq})
    for i in range(4):
        ch.basic_publish("", qname, b"%d" % i)
    _, props, body = wait_get(ch, dlq)
    assert body == b"0" and props.headers["x-death"][0]["reason"] == "maxlen"
    assert wait_get(ch, dlq)[2] == b"1"
    assert drain(ch, qname) == [b"2", b"3"]


def test_max_length_bytes_counts_bodies(ch: BlockingChannel, qname: str) -> None:
    ch.queue_declare(qname, arguments={"x-max-length-bytes": 10})
    for body in (b"aaaaa", b"bbbbb", b"ccccc"):
        ch.basic_publish("", qname, body)
    assert drain(ch, qname) == [b"bbbbb", b"ccccc"]


def test_unacknowledged_messages_do_not_count(ch: BlockingChannel, qname: str) -> None:
    ch.queue_declare(qname, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", qname, b"held")
    method, _, _ = ch.basic_get(qname)
    ch.basic_publish("", qname, b"accepted")  # no NackError: only ready messages count
    ch.basic_ack(method.delivery_tag)
    assert drain(ch, qname) == [b"accepted"]


@pytest.mark.parametrize("overflow", ["reject-publish", "reject-publish-dlx"])
def test_reject_publish_nacks_the_publisher(
    ch: BlockingChannel, qname: str, overflow: str
) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(
        qname,
        arguments={"x-max-length": 1, "x-overflow": overflow, "x-dead-letter-exchange": dlq},
    )
    ch.confirm_delivery()
    outcome = []
    for i in range(3):
        try:
            ch.basic_publish("", qname, b"%d" % i, mandatory=True)
            outcome.append("ack")
        except pika.exceptions.NackError:
            outcome.append("nack")  # routed, so not returned: refused by the queue
    assert outcome == ["ack", "nack", "nack"]
    assert drain(ch, qname) == [b"0"]
    dead = drain(ch, dlq)
    assert dead == ([b"1", b"2"] if overflow == "reject-publish-dlx" else [])


def test_zero_max_length_rejects_even_with_a_consumer(
    ch: BlockingChannel, qname: str
) -> None:
    """RabbitMQ checks the limit before trying a consumer."""
    ch.queue_declare(qname, arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    got: list[bytes] = []
    ch.basic_consume(qname, lambda c, m, p, b: got.append(b), auto_ack=True)
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", qname, b"never")
    ch.connection.process_data_events(time_limit=0.05)
    assert got == [] and count(ch, qname) == 0


def test_max_length_argument_errors(conn: pika.BlockingConnection, qname: str) -> None:
    for args, why in (
        ({"x-max-length": -1}, "{value_negative,-1}"),
        ({"x-max-length-bytes": -1}, "{value_negative,-1}"),
        ({"x-overflow": "drop-tail"}, "invalid_overflow"),
    ):
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
            ch.queue_declare(qname, arguments=args)
        (key,) = args
        assert err.value.reply_text == (
            f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{qname}' in vhost '/': {why}"
        )


@pytest.mark.parametrize("kill", [False, True], ids=["graceful stop", "kill -9"])
def test_durable_queue_limits_survive_restart(fresh_roost: RoostProcess, kill: bool) -> None:
    """Dropped and refused persistent messages leave the store: after a restart (a
    crash included: a drop is on disk with the confirm of the publish that caused it)
    only the kept ones come back, and a refused one was nacked without waiting for the
    disk."""
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    ch.queue_declare("dropping", durable=True, arguments={"x-max-length": 2})
    ch.queue_declare(
        "refusing", durable=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
    )
    ch.confirm_delivery()
    persistent = pika.BasicProperties(delivery_mode=2)
    for i in range(5):
        ch.basic_publish("", "dropping", b"%d" % i, persistent)
    ch.basic_publish("", "refusing", b"in", persistent)
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", "refusing", b"out", persistent)
    conn.close()
    if kill:
        fresh_roost.kill()
    else:
        fresh_roost.stop()
    fresh_roost.start()
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    assert drain(ch, "dropping") == [b"3", b"4"]
    assert drain(ch, "refusing") == [b"in"]
    for i in range(3):  # the limit is still in force after recovery
        ch.basic_publish("", "dropping", b"again%d" % i, persistent)
    assert drain(ch, "dropping") == [b"again1", b"again2"]
    conn.close()
