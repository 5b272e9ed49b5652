"""The error answers a stream connection gives, by the names of RabbitMQ's global
counters (``rabbitmq_global_stream_error_<name>_total``): counted through the adapter
port as each frame goes out (``StreamSession.send``).

What counts: a response whose code is an error, each publishing id of a PublishError,
a MetadataUpdate (the stream went away), and a Close for a frame the codec or the state
table refused (unknown or too large: the errors that have no response of their own). A
Close after another error answer (a failed authentication) is not counted again.
"""

from __future__ import annotations

from typing import Any, Final

from roost.stream_protocol import constants as c
from roost.stream_protocol.frames import Close, MetadataUpdate, PublishError

NAMES: Final = {
    c.STREAM_DOES_NOT_EXIST: "stream_does_not_exist",
    c.SUBSCRIPTION_ID_ALREADY_EXISTS: "subscription_id_already_exists",
    c.SUBSCRIPTION_ID_DOES_NOT_EXIST: "subscription_id_does_not_exist",
    c.STREAM_ALREADY_EXISTS: "stream_already_exists",
    c.STREAM_NOT_AVAILABLE: "stream_not_available",
    c.SASL_MECHANISM_NOT_SUPPORTED: "sasl_mechanism_not_supported",
    c.AUTHENTICATION_FAILURE: "authentication_failure",
    c.SASL_ERROR: "sasl_error",
    c.SASL_CHALLENGE: "sasl_challenge",
    c.SASL_AUTHENTICATION_FAILURE_LOOPBACK: "sasl_authentication_failure_loopback",
    c.VIRTUAL_HOST_ACCESS_FAILURE: "vhost_access_failure",
    c.UNKNOWN_FRAME: "unknown_frame",
    c.FRAME_TOO_LARGE: "frame_too_large",
    c.INTERNAL_ERROR: "internal_error",
    c.ACCESS_REFUSED: "access_refused",
    c.PRECONDITION_FAILED: "precondition_failed",
    c.PUBLISHER_DOES_NOT_EXIST: "publisher_does_not_exist",
}
_CLOSE_COUNTED: Final = frozenset({c.UNKNOWN_FRAME, c.FRAME_TOO_LARGE})


def error_codes(frame: Any) -> list[int]:
    """The error codes ``frame`` (one the server sends) answers with; [] for most."""
    code = getattr(frame, "response_code", None)
    if code is not None:
        return [code] if code in NAMES else []
    if isinstance(frame, PublishError):
        return [code for _, code in frame.errors if code in NAMES]
    if isinstance(frame, MetadataUpdate):
        return [c.STREAM_NOT_AVAILABLE]
    if isinstance(frame, Close) and frame.code in _CLOSE_COUNTED:
        return [frame.code]
    return []
