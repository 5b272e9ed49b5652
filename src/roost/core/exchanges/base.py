"""What every exchange type shares: identity, flags and the set of its bindings.

Compiled with mypyc (docs/compiled.md): routing (core/router.py, compiled) reads an
exchange's flags and counters on every message, which a native ``Exchange`` holds as
native fields. The exchange types stay interpreted subclasses (``DefaultExchange`` is
compiled too); bindings are core/exchanges/binding.py's, interpreted.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, ClassVar

from mypy_extensions import mypyc_attr

from roost.core.exchanges.binding import Binding as Binding
from roost.core.exchanges.binding import Destination as Destination
from roost.core.exchanges.binding import freeze, new_binding

if TYPE_CHECKING:
    from roost.core.message import Message
    from roost.core.mutators import Chain
    from roost.core.vhost import VHost


@mypyc_attr(allow_interpreted_subclasses=True)
class Exchange:
    """Base class. Subclasses keep their own lookup structure in step with ``bindings``."""

    kind: ClassVar[str] = ""
    is_exchange: ClassVar[bool] = True  # lets routing tell exchanges from queues cheaply

    def __init__(
        self,
        vhost: str,
        name: str,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: dict[str, Any],
    ) -> None:
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = arguments
        self.bindings: dict[object, Binding] = {}  # a key tuple finds its binding
        self.deleted = False
        # lifetime counters for management and metrics (RabbitMQ's publish_in/publish_out)
        self.stat_in = 0
        self.stat_out = 0
        # message mutators from a policy that applies to this exchange (core.mutators),
        # run on what is published to it before routing; None: no work per message
        self.mutators: Chain | None = None

    # -- bindings -----------------------------------------------------------------------

    def bind(
        self, destination: Destination, routing_key: str, arguments: dict[str, Any]
    ) -> Binding | None:
        """Add a binding; None when an identical one exists (binding is idempotent)."""
        self.validate_binding(routing_key, arguments)
        binding = new_binding(self, destination, routing_key, arguments)
        if binding in self.bindings:
            return None
        self.bindings[binding] = binding
        self._add(binding)
        return binding

    def unbind(
        self, destination: Destination, routing_key: str, arguments: dict[str, Any]
    ) -> Binding | None:
        binding = self.bindings.pop((destination, routing_key, freeze(arguments)), None)
        if binding is not None:
            self._remove(binding)
        return binding

    def bindings_to(self, destination: Destination) -> list[Binding]:
        return [b for b in self.bindings.values() if b.destination is destination]

    def validate_binding(self, routing_key: str, arguments: dict[str, Any]) -> None:
        """Raise PreconditionFailed for a binding this type refuses, before it exists."""

    def attach(self, vhost: VHost) -> None:
        """Called once the vhost holds the exchange (types that route later need it)."""

    def detach(self) -> None:
        """Called when the exchange is deleted: let go of timers and held messages."""

    def _add(self, binding: Binding) -> None:
        raise NotImplementedError  # each type defines its index

    def _remove(self, binding: Binding) -> None:
        raise NotImplementedError

    # -- routing ------------------------------------------------------------------------

    def route(self, message: Message) -> Collection[Destination]:
        """Destinations (queues or exchanges) bound for this message. Callers must not
        mutate the returned collection: it may be the exchange's own index."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} vhost={self.vhost!r}>"


class CountedDestinations:
    """Destinations with a reference count: several bindings may lead to one destination."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[Destination, int] = {}

    def add(self, destination: Destination) -> None:
        self.counts[destination] = self.counts.get(destination, 0) + 1

    def remove(self, destination: Destination) -> bool:
        """Drop one reference; True when the destination is gone entirely."""
        left = self.counts[destination] - 1
        if left:
            self.counts[destination] = left
            return False
        del self.counts[destination]
        return True
