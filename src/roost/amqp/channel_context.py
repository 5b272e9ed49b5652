"""What an AMQP channel (amqp/handlers.py) needs from its connection, which
amqp/session.py implements; ``roost.amqp.handlers`` re-exports it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from roost.amqp.errors import ChannelError

if TYPE_CHECKING:
    from roost.amqp.handlers import AMQPChannel
    from roost.backpressure import ReadGate
    from roost.core.ports.adapter import AdapterPort, Client


class ConnectionContext(Protocol):
    """What a channel needs from its connection (implemented by amqp/session.py)."""

    broker: AdapterPort
    client: Client
    frame_max: int
    cancel_notify: bool

    def write(self, data: bytes) -> None: ...

    def confirms_pending(self, channel: AMQPChannel) -> None: ...

    # when the socket is read (roost/backpressure.py): a congested queue holds the
    # channel's publisher, which may pause the connection
    gate: ReadGate

    def channel_failed(self, channel: AMQPChannel, error: ChannelError) -> None:
        """Close the channel with an error the core raised outside any method."""
