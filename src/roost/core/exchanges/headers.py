"""Headers exchange: bindings match on message headers (x-match all/any/all-with-x/any-with-x)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from roost.core.errors import PreconditionFailed
from roost.core.exchanges.base import Binding, Destination, Exchange

if TYPE_CHECKING:
    from roost.core.message import Message

MATCH_MODES = ("all", "any", "all-with-x", "any-with-x")


def _rule(arguments: dict[str, Any]) -> tuple[bool, list[tuple[str, Any]]]:
    """(match all?, [(header, wanted value)]). A None value (AMQP void) matches presence."""
    mode = arguments.get("x-match", "all")
    if isinstance(mode, bytes):
        mode = mode.decode("utf-8", "replace")
    if mode not in MATCH_MODES:
        raise PreconditionFailed(
            f"Invalid x-match field value {mode!r}; expected all, any, all-with-x, or any-with-x"
        )
    with_x = mode.endswith("-with-x")
    pairs = [
        (k, v)
        for k, v in arguments.items()
        if k != "x-match" and (with_x or not k.startswith("x-"))
    ]
    return mode.startswith("all"), pairs


def headers_match(
    match_all: bool, pairs: list[tuple[str, Any]], headers: dict[str, Any] | None
) -> bool:
    headers = headers or {}
    missing = object()
    if match_all:
        for k, want in pairs:
            got = headers.get(k, missing)
            if got is missing or (want is not None and got != want):
                return False
        return True
    for k, want in pairs:
        got = headers.get(k, missing)
        if got is not missing and (want is None or got == want):
            return True
    return False


class HeadersExchange(Exchange):
    kind = "headers"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._rules: dict[tuple[Any, ...], tuple[Destination, bool, list[tuple[str, Any]]]] = {}

    def validate_binding(self, routing_key: str, arguments: dict[str, Any]) -> None:
        _rule(arguments)

    def _add(self, binding: Binding) -> None:
        match_all, pairs = _rule(binding.arguments)
        self._rules[binding.key] = (binding.destination, match_all, pairs)

    def _remove(self, binding: Binding) -> None:
        del self._rules[binding.key]

    def route(self, message: Message) -> Collection[Destination]:
        headers = message.properties.headers
        return {
            dest
            for dest, match_all, pairs in self._rules.values()
            if headers_match(match_all, pairs, headers)
        }
