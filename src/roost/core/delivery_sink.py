"""What a session delivers to: the protocol adapter's ``DeliverySink``, and the sink a
closed session swaps in so that nothing reaches the adapter any more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from roost.core.errors import BrokerError
    from roost.core.message import Message


class DeliverySink(Protocol):
    """Implemented by a protocol adapter; called synchronously by the core."""

    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None: ...

    def consumer_cancelled(self, consumer_tag: str) -> None:
        """The broker cancelled the consumer (its queue was deleted)."""

    def close_with(self, error: BrokerError) -> None:
        """The broker ends the session with an error (a delivery not acked in time)."""


class _ClosedSink:
    """A closed session's sink: nothing reaches the adapter any more."""

    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        pass

    def consumer_cancelled(self, consumer_tag: str) -> None:
        pass

    def close_with(self, error: BrokerError) -> None:
        pass


CLOSED_SINK: DeliverySink = _ClosedSink()
