"""What the client raises. A broker's close carries its reply code, text and the method
that caused it, as the broker sent them; the caller decides what to retry.

- ``ChannelClosed``: the broker closed one channel (404 no queue, 406 inequivalent
  arguments, 403 access refused…); the connection lives on.
- ``ConnectionClosed``: the broker closed the connection (320 shutdown, 403 login
  refused, 530 vhost not found, 501…).
- ``ConnectionLost``: the socket ended without a close (a reset, a killed broker, two
  heartbeats missed).
- ``ConnectError``: no URI of the list could be connected to; ``errors`` holds each one's
  failure, in the order tried.
- ``ProtocolError``: the broker sent something AMQP does not allow at that point.
"""

from __future__ import annotations

from roost.amqp.errors import AMQPError


class ClientError(Exception):
    """Base of everything the client raises."""


class Closed(ClientError, AMQPError):
    """The broker closed the channel or the connection with this reply (``reply_code``,
    ``reply_text``, ``class_id``, ``method_id``: the codec's ``AMQPError``)."""

    scope = "connection"

    def __str__(self) -> str:
        return f"{self.scope} closed by the broker: {self.reply_code} {self.reply_text}"


class ChannelClosed(Closed):
    scope = "channel"


class ConnectionClosed(Closed):
    scope = "connection"


class ConnectionLost(ClientError):
    """The connection ended without a close from either side."""


class ProtocolError(ClientError):
    """The broker broke the protocol; the client closes the connection with ``reply_code``."""

    def __init__(self, reply_code: int, text: str) -> None:
        super().__init__(f"{reply_code} {text}")
        self.reply_code = reply_code
        self.text = text


class ConnectError(ClientError):
    """Every URI failed; ``errors`` pairs each (password-free) URI with its failure."""

    def __init__(self, errors: list[tuple[str, BaseException]]) -> None:
        self.errors = errors
        detail = "; ".join(f"{uri}: {exc or type(exc).__name__}" for uri, exc in errors)
        super().__init__(f"cannot connect: {detail}")

    @property
    def last(self) -> BaseException:
        return self.errors[-1][1]
