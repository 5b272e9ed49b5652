"""Routing rules of each exchange type, checked against the core alone."""

from __future__ import annotations

import pytest

from roost.core.errors import CommandInvalid, PreconditionFailed
from roost.core.exchanges import make_exchange
from roost.core.exchanges.topic import TopicTrie
from roost.core.message import Message, Properties


def msg(key: str = "", headers: dict | None = None) -> Message:
    return Message("x", key, Properties(headers=headers), b"")


TOPIC_CASES = [
    ("a.b.c", "a.b.c", True),
    ("a.*.c", "a.b.c", True),
    ("a.*.c", "a.c", False),
    ("a.#", "a", True),
    ("a.#", "a.b.c.d", True),
    ("#", "", True),
    ("#", "anything.at.all", True),
    ("#.c", "c", True),
    ("#.c", "a.b.c", True),
    ("#.c", "a.b.c.d", False),
    ("a.#.c", "a.c", True),
    ("a.#.c", "a.x.y.c", True),
    ("a.#.c", "a.x.y.d", False),
    ("*", "a", True),
    ("*", "a.b", False),
    ("*", "", True),  # RabbitMQ: the empty key is one empty word
    ("*.*", "a", False),
    ("#.#", "a.b", True),
    ("a.*.#", "a", False),
    ("a.*.#", "a.b", True),
    ("", "", True),
    ("", "a", False),
    ("a..b", "a..b", True),
]


@pytest.mark.parametrize(("pattern", "key", "hit"), TOPIC_CASES)
def test_topic_patterns(pattern: str, key: str, hit: bool) -> None:
    trie = TopicTrie()
    trie.add(pattern, "dest")
    assert (trie.match(key) == {"dest"}) is hit


def test_topic_remove_prunes_and_stops_matching() -> None:
    ex = make_exchange("/", "t", "topic")
    ex.bind("q1", "a.*", {})
    ex.bind("q2", "a.#", {})
    assert set(ex.route(msg("a.b"))) == {"q1", "q2"}
    ex.unbind("q1", "a.*", {})
    assert set(ex.route(msg("a.b"))) == {"q2"}  # the memo was dropped
    ex.unbind("q2", "a.#", {})
    assert set(ex.route(msg("a.b"))) == set()
    assert ex._trie._root.children == {}


def test_topic_many_bindings_route_exactly() -> None:
    ex = make_exchange("/", "t", "topic")
    for i in range(2000):
        ex.bind(f"q{i}", f"orders.{i}.*", {})
    ex.bind("all", "orders.#", {})
    assert set(ex.route(msg("orders.1234.created"))) == {"q1234", "all"}
    assert set(ex.route(msg("orders.99999.created"))) == {"all"}


PREFIX = {"x-key-prefix": True}


def test_topic_prefix_bindings_match_by_characters() -> None:
    """A prefix binding matches every key that starts with its key, across word
    boundaries, beside the word patterns; a pattern's wildcards mean nothing in it."""
    ex = make_exchange("/", "t", "topic")
    ex.bind("foo", "foo", PREFIX)
    ex.bind("foo.b", "foo.b", PREFIX)
    ex.bind("star", "a.*", PREFIX)  # literal: keys starting with "a.*"
    ex.bind("word", "foo", {})  # the same key as a pattern is another binding
    assert set(ex.route(msg("foo"))) == {"foo", "word"}
    assert set(ex.route(msg("foobar"))) == {"foo"}
    assert set(ex.route(msg("foo.bar"))) == {"foo", "foo.b"}
    assert set(ex.route(msg("fo"))) == set()
    assert set(ex.route(msg("a.b"))) == set()
    assert set(ex.route(msg("a.*x"))) == {"star"}
    ex.unbind("foo", "foo", PREFIX)
    assert set(ex.route(msg("foo.bar"))) == {"foo.b"}  # the memo was dropped
    ex.unbind("foo.b", "foo.b", PREFIX)
    ex.unbind("star", "a.*", PREFIX)
    assert set(ex.route(msg("foo.bar"))) == set()
    assert ex._trie._prefixes == {} and ex._trie._lengths == []


def test_topic_prefix_bindings_many_distinct() -> None:
    ex = make_exchange("/", "t", "topic")
    for i in range(1000):
        ex.bind(f"q{i}", f"sensor{i:04d}.", PREFIX)
    ex.bind("short", "sensor00", PREFIX)
    assert set(ex.route(msg("sensor0042.temp"))) == {"q42", "short"}
    assert set(ex.route(msg("sensor1042.temp"))) == set()


def test_topic_prefix_argument_must_be_boolean() -> None:
    ex = make_exchange("/", "t", "topic")
    with pytest.raises(PreconditionFailed, match="x-key-prefix"):
        ex.bind("q", "a", {"x-key-prefix": "yes"})
    assert ex.bindings == {}


def test_direct_counts_duplicate_bindings() -> None:
    ex = make_exchange("/", "d", "direct")
    ex.bind("q", "k", {})
    ex.bind("q", "k", {"x": 1})  # a second binding with other arguments
    assert list(ex.route(msg("k"))) == ["q"]
    ex.unbind("q", "k", {})
    assert list(ex.route(msg("k"))) == ["q"]
    ex.unbind("q", "k", {"x": 1})
    assert list(ex.route(msg("k"))) == []


def test_binding_is_idempotent() -> None:
    ex = make_exchange("/", "f", "fanout")
    assert ex.bind("q", "", {}) is not None
    assert ex.bind("q", "", {}) is None
    assert len(ex.bindings) == 1


HEADER_CASES = [
    ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "x", "c": 0}, True),
    ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1}, False),
    ({"x-match": "any", "a": 1, "b": "x"}, {"a": 2, "b": "x"}, True),
    ({"x-match": "any", "a": 1, "b": "x"}, {"a": 2}, False),
    ({"a": 1}, {"a": 1}, True),  # all is the default
    ({"x-match": "all", "a": None}, {"a": "whatever"}, True),  # void matches presence
    ({"x-match": "all", "x-k": 1}, {}, True),  # x- keys ignored without -with-x
    ({"x-match": "all-with-x", "x-k": 1}, {}, False),
    ({"x-match": "all-with-x", "x-k": 1}, {"x-k": 1}, True),
    ({"x-match": "any-with-x", "x-k": 1, "a": 5}, {"x-k": 1}, True),
    ({"x-match": "any", "x-k": 1}, {"x-k": 1}, False),
    ({"x-match": "any"}, {"a": 1}, False),
    ({"x-match": "all"}, None, True),
]


@pytest.mark.parametrize(("args", "headers", "hit"), HEADER_CASES)
def test_headers_matching(args: dict, headers: dict | None, hit: bool) -> None:
    ex = make_exchange("/", "h", "headers")
    ex.bind("q", "", args)
    assert (set(ex.route(msg(headers=headers))) == {"q"}) is hit


def test_headers_rejects_bad_x_match() -> None:
    ex = make_exchange("/", "h", "headers")
    with pytest.raises(PreconditionFailed, match="x-match"):
        ex.bind("q", "", {"x-match": "some"})
    assert not ex.bindings


def test_unknown_exchange_type() -> None:
    with pytest.raises(CommandInvalid, match="invalid exchange type 'nope'"):
        make_exchange("/", "x", "nope")


def test_a_binding_is_its_own_key_in_its_exchange() -> None:
    # no key tuple kept per binding (64 bytes at 100,000 STOMP topic subscriptions): the
    # binding hashes and compares as (destination, routing key, frozen arguments)
    first = make_exchange("/", "x1", "topic")
    second = make_exchange("/", "x2", "topic")
    queue = object()
    binding = first.bind(queue, "a.b", {"k": [1]})  # type: ignore[arg-type]
    assert binding is not None and not hasattr(binding, "__dict__")
    assert first.bindings[(queue, "a.b", (("k", (1,)),))] is binding
    assert first.bind(queue, "a.b", {"k": [1]}) is None  # idempotent  # type: ignore[arg-type]
    other = second.bind(queue, "a.b", {"k": [1]})  # type: ignore[arg-type]
    assert other is not None and other != binding and binding in [binding]
    assert first.unbind(queue, "a.b", {"k": [1]}) is binding  # type: ignore[arg-type]
    assert first.bindings == {} and list(second.bindings.values()) == [other]
