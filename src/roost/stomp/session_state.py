"""What the parts of a STOMP session (stomp/handler.py and the modules it is made of:
sending, subscribing, delivering, transactions, heartbeats) share: the session's state,
declared once for the type checker, and the helpers every part calls. Each part is a
class the session inherits from; none does I/O (the session is sans-IO)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mypy_extensions import trait

from roost.stomp import destinations
from roost.stomp.destinations import Destination, DestinationError
from roost.stomp.errors import StompError
from roost.stomp.frames import Frame

if TYPE_CHECKING:
    from roost.backpressure import ReadGate
    from roost.core import AdapterPort, Traffic
    from roost.core.ports.adapter import Client, Publisher, Queue, Session
    from roost.stomp.effects import Effect
    from roost.stomp.settings import StompSettings
    from roost.stomp.subscription import Kept, Subscription, SubscriptionWithOptions
    from roost.stomp.transport import Clock, Endpoint

CACHE_SIZE = 1024  # destinations remembered per connection


@trait  # a part of the compiled StompHandler (docs/compiled.md)
class SessionState:
    # set by StompHandler.__init__ (stomp/handler.py), which says what each one is
    broker: AdapterPort
    settings: StompSettings
    endpoint: Endpoint
    effects: list[Effect]
    _effect_bytes: int
    _wake: Callable[[bool], None]
    traffic: Traffic
    registry: set[Any]
    version: str
    client: Client | None
    session: Session | None
    subscriptions: dict[str, Kept]
    tag_subscription: dict[int, SubscriptionWithOptions]
    _heads: dict[str, bytes]
    transactions: dict[str, list[Callable[[], None]]]
    temp_queues: dict[str, str]
    _destinations: dict[str, Destination]
    _sent_to: dict[str, Queue]
    _destination_lines: dict[tuple[str, str], bytes]
    _ack_key: str
    close_reason: str
    closed: bool
    _clock: Clock
    _max_tag: int
    _heard: float
    _wrote: bool
    _silent_ticks: int
    _beat_tick: float
    _check_interval: float
    gate: ReadGate
    publisher: Publisher

    # defined by the session or one of its parts, which come before this class in the
    # session's MRO (real methods, not TYPE_CHECKING stubs: the compiled trait needs them)

    def write_frame(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        raise NotImplementedError

    def data_received(self, data: bytes) -> None:
        raise NotImplementedError

    def heard(self) -> None:
        raise NotImplementedError

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def write_frame_parts(self, head: bytes, tail: bytes) -> None:
        raise NotImplementedError

    def _effect(self, effect: Effect) -> None:
        raise NotImplementedError

    def _error(
        self,
        message: str,
        detail: str = "",
        frame: Frame | None = None,
        *,
        receipt: str | None = None,
    ) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    def _consume(
        self, sub: Subscription, queue: str, prefetch: int, arguments: dict[str, Any]
    ) -> None:
        raise NotImplementedError

    def _settle(self, sub: Subscription, tags: list[int], *, requeue: bool | None) -> None:
        raise NotImplementedError

    @staticmethod
    def _require(frame: Frame, name: str) -> str:
        value = frame.get(name)
        if value is None:
            raise StompError(f"missing '{name}' header", f"{frame.command} needs '{name}'")
        return value

    def _parse(self, text: str, *, cache: bool = True) -> Destination:
        dest = self._destinations.get(text)
        if dest is not None:
            return dest
        try:
            dest = destinations.parse(text)
        except DestinationError as exc:
            raise StompError("invalid destination", str(exc)) from exc
        if not cache:
            return dest
        if len(self._destinations) >= CACHE_SIZE:
            self._destinations.clear()
        self._destinations[text] = dest
        return dest
