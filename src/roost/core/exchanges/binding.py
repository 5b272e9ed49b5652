"""A binding of an exchange to a queue or an exchange, the key it is filed under.

Interpreted, beside the compiled ``Exchange`` (core/exchanges/base.py): a binding reads
its arguments from its class when it has none, which a native class does not allow, and
it is touched when bindings change, not per message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roost.core.exchanges.base import Exchange

# A binding's destination is a queue or an exchange; both are plain hashable objects.
Destination = Any


def freeze(value: Any) -> Any:
    """A hashable stand-in for a binding's arguments (tables nest dicts and lists)."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


# the arguments of a binding declared without any: one shared dict (nothing adds to it)
NO_ARGUMENTS: dict[str, Any] = {}


class Binding:
    """A binding is its own key in ``Exchange.bindings``: hashed as, and equal to, the
    tuple ``key`` (a tuple kept in each was 64 bytes a STOMP topic subscription).

    A binding without arguments (most of them: every STOMP topic subscription has one)
    reads them from the class, 16 bytes less each; one with arguments is a
    ``BindingWithArguments``. ``Exchange.bind`` makes the right one."""

    __slots__ = ("destination", "routing_key", "source")
    arguments: dict[str, Any] = NO_ARGUMENTS
    frozen: Any = ()  # freeze(arguments)

    def __init__(self, source: Exchange, destination: Destination, routing_key: str) -> None:
        self.source = source
        self.destination = destination
        self.routing_key = routing_key

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.destination, self.routing_key, self.frozen)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Binding):  # (the same key on another exchange is another)
            return self is other or (self.source is other.source and self.key == other.key)
        return self.key == other

    def __repr__(self) -> str:
        return f"Binding({self.source.name!r} -> {self.destination.name!r}, {self.routing_key!r})"


class BindingWithArguments(Binding):
    __slots__ = ("arguments", "frozen")

    def __init__(
        self,
        source: Exchange,
        destination: Destination,
        routing_key: str,
        arguments: dict[str, Any],
    ) -> None:
        super().__init__(source, destination, routing_key)
        self.arguments = arguments
        self.frozen = freeze(arguments)


def new_binding(
    source: Exchange, destination: Destination, routing_key: str, arguments: dict[str, Any]
) -> Binding:
    """A ``Binding``, or a ``BindingWithArguments`` when it has any."""
    if arguments:
        return BindingWithArguments(source, destination, routing_key, arguments)
    return Binding(source, destination, routing_key)
