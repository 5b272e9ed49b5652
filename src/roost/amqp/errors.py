"""Typed AMQP errors that carry their reply code from where they are raised.

A ``ChannelError`` (soft) closes one channel with channel.close; a ``ConnectionError``
(hard) closes the whole connection with connection.close. The codec raises
``FrameError`` for malformed input. The connection turns any of them into a close
frame and never picks the code itself.
"""

from __future__ import annotations

__all__ = [
    "AMQPConnectionError",
    "AMQPError",
    "ChannelError",
    "ConnectionError",
    "FrameError",
    "reply_text",
]


class AMQPError(Exception):
    """An AMQP failure with the reply code and text for the close frame."""

    def __init__(
        self, reply_code: int, reply_text: str, class_id: int = 0, method_id: int = 0
    ) -> None:
        super().__init__(reply_code, reply_text, class_id, method_id)
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.class_id = class_id
        self.method_id = method_id

    def __str__(self) -> str:
        return f"{self.reply_code} {self.reply_text}"


class ChannelError(AMQPError):
    """Soft error: the channel is closed (channel.close), the connection lives on."""


class ConnectionError(AMQPError):  # shadows the builtin on purpose: AMQP's own name
    """Hard error: the connection is closed (connection.close)."""


AMQPConnectionError = ConnectionError
"""Alias for modules that also use the builtin ``ConnectionError``."""


class FrameError(ConnectionError):
    """Malformed input found by the codec (bad frame, bad arguments, bad field table)."""


def reply_text(code: int, detail: str) -> str:
    """RabbitMQ-style text: ``reply_text(404, "no queue 'q'")`` → ``NOT_FOUND - no queue 'q'``."""
    # Imported here because the generated module imports this one (FrameError).
    from roost.amqp.codec_methods import REPLY_NAMES

    name = REPLY_NAMES.get(code)
    if name is None:
        return detail
    return f"{name} - {detail}" if detail else name

