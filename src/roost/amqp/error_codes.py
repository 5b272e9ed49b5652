"""The one table that turns a core error into an AMQP reply code, and decides whether it
closes the channel (soft) or the connection (hard)."""

from __future__ import annotations

from roost.amqp import codec_methods as m
from roost.amqp.errors import AMQPError, ChannelError, ConnectionError, reply_text
from roost.core.errors import (
    AccessRefused,
    BrokerError,
    CommandInvalid,
    InternalError,
    NotAllowed,
    NotFound,
    NotImplementedFeature,
    PreconditionFailed,
    ResourceError,
    ResourceLocked,
)

# core error -> (reply code, hard?)
ERROR_CODES: dict[type[BrokerError], tuple[int, bool]] = {
    NotFound: (m.NOT_FOUND, False),
    AccessRefused: (m.ACCESS_REFUSED, False),
    ResourceLocked: (m.RESOURCE_LOCKED, False),
    PreconditionFailed: (m.PRECONDITION_FAILED, False),
    NotAllowed: (m.NOT_ALLOWED, True),
    CommandInvalid: (m.COMMAND_INVALID, True),
    NotImplementedFeature: (m.NOT_IMPLEMENTED, True),
    ResourceError: (m.RESOURCE_ERROR, True),
    InternalError: (m.INTERNAL_ERROR, True),
}

EMPTY_PROPERTY_BYTES = b"\x00\x00"


def to_amqp_error(exc: BrokerError, method: m.Method) -> AMQPError:
    code, hard = ERROR_CODES.get(type(exc), (m.INTERNAL_ERROR, True))
    cls = ConnectionError if hard else ChannelError
    return cls(code, reply_text(code, exc.text), method.CLASS_ID, method.METHOD_ID)
