"""Neutral failures raised by the core.

Each protocol adapter owns one table that maps these to its wire codes (AMQP reply
codes, STOMP ERROR frames, HTTP statuses). The text reads like RabbitMQ's reason,
without the code-name prefix, e.g. ``no queue 'q' in vhost '/'``.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base class; ``text`` is the human-readable reason."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class NotFound(BrokerError):
    """A named object does not exist."""


class AccessRefused(BrokerError):
    """The user may not do this, or the name is reserved."""


class ResourceLocked(BrokerError):
    """An exclusive queue is owned by another connection."""


class PreconditionFailed(BrokerError):
    """Inequivalent redeclare, if-unused/if-empty, unknown delivery tag, bad argument."""


class NotAllowed(BrokerError):
    """Connection-level refusal: unknown vhost, reused consumer tag."""


class CommandInvalid(BrokerError):
    """A request that makes no sense, such as an unknown exchange type."""


class NotImplementedFeature(BrokerError):
    """A feature Roost does not support, such as basic.publish with immediate=true."""


class ResourceError(BrokerError):
    """A limit was hit (too many channels, queues, consumers)."""


class InternalError(BrokerError):
    """The broker failed; the client did nothing wrong."""
