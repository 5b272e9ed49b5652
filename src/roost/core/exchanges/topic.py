"""Topic exchange: a trie over dot-separated words, ``*`` = one word, ``#`` = zero or more.

Matching walks the trie once per message; results are memoized per routing key (most
traffic reuses a few keys) and the memo is dropped whenever a binding changes.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from roost.core.exchanges.base import Binding, CountedDestinations, Destination, Exchange

if TYPE_CHECKING:
    from roost.core.message import Message

_CACHE_LIMIT = 4096


class _Node:
    __slots__ = ("children", "destinations")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.destinations = CountedDestinations()

    def empty(self) -> bool:
        return not self.children and not self.destinations.counts


class TopicTrie:
    """Binding patterns → destinations, matched against routing keys."""

    def __init__(self) -> None:
        self._root = _Node()

    def add(self, pattern: str, destination: Destination) -> None:
        node = self._root
        for word in pattern.split("."):
            node = node.children.setdefault(word, _Node())
        node.destinations.add(destination)

    def remove(self, pattern: str, destination: Destination) -> None:
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
        self._walk(self._root, routing_key.split("."), 0, found)
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

    def _add(self, binding: Binding) -> None:
        self._trie.add(binding.routing_key, binding.destination)
        self._cache.clear()

    def _remove(self, binding: Binding) -> None:
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
