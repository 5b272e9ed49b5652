"""Message deduplication with the community plugin's names (noxdafox/
rabbitmq-message-deduplication): the ``x-message-deduplication`` exchange type, and the
``x-message-deduplication: true`` argument on any exchange or queue."""

from __future__ import annotations

import time
from typing import Any

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker

from tests.features.conftest import Returns, drain, settle


def _dedup(key: str, **headers: Any) -> pika.BasicProperties:
    return pika.BasicProperties(headers={"x-deduplication-header": key, **headers})


def _fanout_queue(ch: BlockingChannel, exchange: str, queue: str) -> str:
    ch.queue_declare(queue)
    ch.queue_bind(queue, exchange)
    return queue


def test_the_plugin_exchange_type_drops_duplicates(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    ch.exchange_declare(name, "x-message-deduplication", arguments={"x-cache-size": 100})
    q1 = _fanout_queue(ch, name, f"{name}.1")
    q2 = _fanout_queue(ch, name, f"{name}.2")  # fanout routing, as the plugin's
    returns = Returns(ch)
    ch.basic_publish(name, "", b"first", _dedup("order-1"))
    ch.basic_publish(name, "", b"again", _dedup("order-1"), mandatory=True)
    ch.basic_publish(name, "", b"other", _dedup("order-2"))
    ch.basic_publish(name, "", b"no key")
    ch.basic_publish(name, "", b"no key")
    settle(conn, 0.1)
    expected = [b"first", b"other", b"no key", b"no key"]
    assert drain(ch, q1) == expected and drain(ch, q2) == expected
    assert [r[3] for r in returns.items] == [b"again"]  # routed nowhere, as the plugin


def test_the_argument_works_on_any_exchange_and_falls_back_to_message_id(
    ch: BlockingChannel, name: str
) -> None:
    ch.exchange_declare(name, "direct", arguments={"x-message-deduplication": True})
    ch.queue_declare(f"{name}.q")
    ch.queue_bind(f"{name}.q", name, "k")
    ch.basic_publish(name, "k", b"m1", pika.BasicProperties(message_id="id-1"))
    ch.basic_publish(name, "k", b"m1 again", pika.BasicProperties(message_id="id-1"))
    ch.basic_publish(
        name,
        "k",
        b"header wins",
        _dedup(
            "h",
        ),
    )
    ch.basic_publish(
        name,
        "k",
        b"same header, new id",
        pika.BasicProperties(message_id="id-2", headers={"x-deduplication-header": "h"}),
    )
    assert drain(ch, f"{name}.q") == [b"m1", b"header wins"]


def test_entries_expire_after_the_cache_ttl(ch: BlockingChannel, name: str) -> None:
    args = {"x-cache-size": 10, "x-cache-ttl": 200}
    ch.exchange_declare(name, "x-message-deduplication", arguments=args)
    q = _fanout_queue(ch, name, f"{name}.q")
    ch.basic_publish(name, "", b"a1", _dedup("a"))
    ch.basic_publish(name, "", b"b1", _dedup("b", **{"x-cache-ttl": 5000}))  # its own TTL
    ch.basic_publish(name, "", b"a2", _dedup("a"))
    assert drain(ch, q) == [b"a1", b"b1"]
    time.sleep(0.3)  # the window is the behaviour under test: let it pass
    ch.basic_publish(name, "", b"a3", _dedup("a"))
    ch.basic_publish(name, "", b"b2", _dedup("b"))
    assert drain(ch, q) == [b"a3"]


def test_the_cache_size_bounds_what_is_remembered(ch: BlockingChannel, name: str) -> None:
    ch.exchange_declare(name, "x-message-deduplication", arguments={"x-cache-size": 2})
    q = _fanout_queue(ch, name, f"{name}.q")
    for key in ("a", "b", "c", "a", "c"):  # "a" was pushed out by "c"; "c" is still there
        ch.basic_publish(name, "", key.encode(), _dedup(key))
    assert drain(ch, q) == [b"a", b"b", b"c", b"a"]


def test_a_queue_with_the_argument_drops_what_it_has_seen(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    ch.exchange_declare(name, "fanout")
    plain = _fanout_queue(ch, name, f"{name}.plain")
    ch.queue_declare(f"{name}.dedup", arguments={"x-message-deduplication": True})
    ch.queue_bind(f"{name}.dedup", name)
    ch.confirm_delivery()
    returns = Returns(ch)
    for body in (b"1", b"2"):
        ch.basic_publish(name, "", body, _dedup("same"), mandatory=True)  # confirmed both
    settle(conn, 0.1)
    assert returns.items == []  # routed, so not returned; the queue just did not take it
    assert drain(ch, plain) == [b"1", b"2"]
    assert drain(ch, f"{name}.dedup") == [b"1"]


def test_a_refused_message_is_not_remembered(ch: BlockingChannel, name: str) -> None:
    """A full reject-publish queue nacks the message: the publisher's retry of it must not
    then be dropped as a duplicate (and confirmed) once the queue has room."""
    q = f"{name}.q"
    ch.queue_declare(q, arguments={"x-message-deduplication": True, "x-max-length": 1,
                                   "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", q, b"first", _dedup("first"))
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", q, b"second", _dedup("second"))
    assert drain(ch, q) == [b"first"]
    ch.basic_publish("", q, b"second", _dedup("second"))  # the retry: confirmed...
    assert drain(ch, q) == [b"second"]  # ...and delivered
    ch.basic_publish("", q, b"second again", _dedup("second"))  # now it is a duplicate
    assert drain(ch, q) == []


def test_an_exchange_remembers_only_what_was_taken(ch: BlockingChannel, name: str) -> None:
    """The same on a deduplicating exchange: a key counts once the message was routed and
    no queue refused it (the plugin records it before routing, so a retry is lost)."""
    ch.exchange_declare(name, "x-message-deduplication", arguments={"x-cache-size": 10})
    ch.confirm_delivery()
    ch.basic_publish(name, "", b"unroutable", _dedup("a"))  # no queue yet: not remembered
    q = f"{name}.q"
    ch.queue_declare(q, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.queue_bind(q, name)
    ch.basic_publish(name, "", b"a", _dedup("a"))
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish(name, "", b"b", _dedup("b"))
    assert drain(ch, q) == [b"a"]
    ch.basic_publish(name, "", b"b retried", _dedup("b"))
    ch.basic_publish(name, "", b"a again", _dedup("a"))
    assert drain(ch, q) == [b"b retried"]


@pytest.mark.parametrize(
    ("kind", "args", "text"),
    [
        ("x-message-deduplication", {}, "missing arg 'x-cache-size'"),
        ("x-message-deduplication", {"x-cache-size": 0}, "invalid arg 'x-cache-size'"),
        (
            "direct",
            {"x-message-deduplication": True, "x-cache-ttl": -1},
            "invalid arg 'x-cache-ttl'",
        ),
        ("direct", {"x-message-deduplication": "yes"}, "invalid arg 'x-message-deduplication'"),
    ],
)
def test_bad_arguments_are_refused(
    conn: pika.BlockingConnection, name: str, kind: str, args: dict[str, Any], text: str
) -> None:
    with pytest.raises(ChannelClosedByBroker) as err:
        conn.channel().exchange_declare(name, kind, arguments=args)
    code, reply = err.value.args
    assert code == 406 and text in reply
    with pytest.raises(ChannelClosedByBroker) as err:
        conn.channel().queue_declare(
            name, arguments={"x-message-deduplication": True, "x-cache-size": "big"}
        )
    assert err.value.args[0] == 406
