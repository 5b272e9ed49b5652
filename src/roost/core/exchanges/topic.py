"""Topic exchange: a trie over dot-separated words, ``*`` = one word, ``#`` = zero or more.

A binding with the argument ``x-key-prefix: true`` is a prefix binding instead (Roost's
extension, what a STOMP ``/topic/prefix*`` subscription makes): it matches every routing
key that starts with its key, character by character (``foo`` matches ``foo``,
``foobar`` and ``foo.bar``). Prefixes sit beside the trie in a dict keyed by the prefix,
with the set of prefix lengths in use, so a routing key costs one dict look-up per
distinct length and a prefix that does not match costs nothing: a prefix subscriber sees
only its own messages (formerly it was bound with ``#`` and filtered afterwards, so
every topic message was queued for every prefix subscriber).

A pattern without wildcards is kept in a dict by its whole key, not as trie nodes, and
a key with one destination holds that destination itself rather than a counted set:
100,000 STOMP subscriptions to distinct topics cost a dict entry each here (about 450
bytes each as a trie path with a counted set).

Matching walks the trie once per message; results are memoized per routing key (most
traffic reuses a few keys) and the memo is dropped whenever a binding changes.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from roost.core.errors import PreconditionFailed
from roost.core.exchanges.base import Binding, CountedDestinations, Destination, Exchange

if TYPE_CHECKING:
    from roost.core.message import Message

_CACHE_LIMIT = 4096
PREFIX_ARGUMENT = "x-key-prefix"


def is_prefix_binding(arguments: dict[str, Any]) -> bool:
    """Whether a binding's arguments make it a prefix binding (see the module doc)."""
    flag = arguments.get(PREFIX_ARGUMENT, False)
    if not isinstance(flag, bool):
        raise PreconditionFailed(f"{PREFIX_ARGUMENT} must be a boolean, not {flag!r}")
    return flag


class _Node:
    __slots__ = ("children", "destinations")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.destinations = CountedDestinations()

    def empty(self) -> bool:
        return not self.children and not self.destinations.counts


# A key's destinations in the exact and prefix dicts: the destination itself while it is
# the only one (bound once), else a CountedDestinations.
Held = Any


def _put(index: dict[str, Held], key: str, destination: Destination) -> bool:
    """Add a reference; True when ``key`` is new to ``index``."""
    held = index.get(key)
    if held is None:
        index[key] = destination
        return True
    if not isinstance(held, CountedDestinations):
        index[key] = held = _counted(held)
    held.add(destination)
    return False


def _take(index: dict[str, Held], key: str, destination: Destination) -> bool:
    """Drop a reference; True when ``key`` left ``index``."""
    held = index[key]
    if not isinstance(held, CountedDestinations):
        del index[key]
        return True
    held.remove(destination)
    if not held.counts:
        del index[key]
        return True
    if len(held.counts) == 1:
        (only, count), = held.counts.items()
        if count == 1:
            index[key] = only
    return False


def _counted(destination: Destination) -> CountedDestinations:
    counted = CountedDestinations()
    counted.add(destination)
    return counted


def _collect(found: set[Destination], held: Held) -> None:
    if isinstance(held, CountedDestinations):
        found.update(held.counts)
    else:
        found.add(held)


class TopicTrie:
    """Binding patterns → destinations, matched against routing keys."""

    def __init__(self) -> None:
        self._root = _Node()
        self._exact: dict[str, Held] = {}  # patterns without wildcards
        self._prefixes: dict[str, Held] = {}
        self._lengths: list[int] = []  # the distinct lengths of _prefixes' keys, ascending
        self._per_length: dict[int, int] = {}  # how many prefixes have each length

    def add_prefix(self, prefix: str, destination: Destination) -> None:
        if _put(self._prefixes, prefix, destination):
            n = len(prefix)
            if n not in self._per_length:
                self._per_length[n] = 0
                insort(self._lengths, n)
            self._per_length[n] += 1

    def remove_prefix(self, prefix: str, destination: Destination) -> None:
        if _take(self._prefixes, prefix, destination):
            n = len(prefix)
            self._per_length[n] -= 1
            if not self._per_length[n]:
                del self._per_length[n]
                self._lengths.remove(n)

    def add(self, pattern: str, destination: Destination) -> None:
        words = pattern.split(".")
        if "*" not in words and "#" not in words:
            _put(self._exact, pattern, destination)
            return
        node = self._root
        for word in words:
            node = node.children.setdefault(word, _Node())
        node.destinations.add(destination)

    def remove(self, pattern: str, destination: Destination) -> None:
        words = pattern.split(".")
        if "*" not in words and "#" not in words:
            _take(self._exact, pattern, destination)
            return
        path = [self._root]
        for word in pattern.split("."):
            path.append(path[-1].children[word])
        path[-1].destinations.remove(destination)
        # prune empty branches so a churn of bindings does not leave a growing trie
        words = pattern.split(".")
        for depth in range(len(words), 0, -1):
            if not path[depth].empty():
                break
            del path[depth - 1].children[words[depth - 1]]

    def match(self, routing_key: str) -> set[Destination]:
        found: set[Destination] = set()
        hit = self._exact.get(routing_key)
        if hit is not None:
            _collect(found, hit)
        root = self._root
        if root.children or root.destinations.counts:
            self._walk(root, routing_key.split("."), 0, found)
        if self._lengths:
            prefixes = self._prefixes
            for length in self._lengths:
                if length > len(routing_key):
                    break
                hit = prefixes.get(routing_key[:length])
                if hit is not None:
                    _collect(found, hit)
        return found

    def _walk(self, node: _Node, words: list[str], i: int, found: set[Destination]) -> None:
        children = node.children
        hashed = children.get("#")
        if hashed is not None:
            # '#' swallows zero or more words: try every remaining suffix
            for j in range(i, len(words) + 1):
                self._walk(hashed, words, j, found)
        if i == len(words):
            found.update(node.destinations.counts)
            return
        child = children.get(words[i])
        if child is not None:
            self._walk(child, words, i + 1, found)
        star = children.get("*")
        if star is not None:
            self._walk(star, words, i + 1, found)


class TopicExchange(Exchange):
    kind = "topic"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._trie = TopicTrie()
        self._cache: dict[str, set[Destination]] = {}

    def validate_binding(self, routing_key: str, arguments: dict[str, Any]) -> None:
        is_prefix_binding(arguments)

    def _add(self, binding: Binding) -> None:
        if is_prefix_binding(binding.arguments):
            self._trie.add_prefix(binding.routing_key, binding.destination)
        else:
            self._trie.add(binding.routing_key, binding.destination)
        self._cache.clear()

    def _remove(self, binding: Binding) -> None:
        if is_prefix_binding(binding.arguments):
            self._trie.remove_prefix(binding.routing_key, binding.destination)
        else:
            self._trie.remove(binding.routing_key, binding.destination)
        self._cache.clear()

    def route(self, message: Message) -> Collection[Destination]:
        key = message.routing_key
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            hit = self._cache[key] = self._trie.match(key)
        return hit
