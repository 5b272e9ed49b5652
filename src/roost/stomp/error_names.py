"""A core error as the STOMP ERROR frame's message header names it (RabbitMQ's words);
any other error is an internal_error (stomp/handler.py)."""

from __future__ import annotations

from roost.core.errors import (
    AccessRefused,
    BrokerError,
    NotAllowed,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
)

# core error -> ERROR frame message header (RabbitMQ's words)
ERROR_NAMES: dict[type[BrokerError], str] = {
    NotFound: "not_found",
    AccessRefused: "access_refused",
    ResourceLocked: "resource_locked",
    PreconditionFailed: "precondition_failed",
    NotAllowed: "not_allowed",
}
