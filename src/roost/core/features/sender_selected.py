"""Sender-selected distribution: the ``CC`` and ``BCC`` headers add routing keys.

As RabbitMQ does it: each header, when present, must be an array, else the publish fails
with 406 ``invalid message``; its string elements are routing keys used next to the
message's own, on the exchange published to and at every exchange-to-exchange hop (other
elements are ignored). A queue reached by several keys gets the message once. ``BCC`` is
removed before the message reaches a queue; ``CC`` stays, and the delivered routing key
is the original one.
"""

from __future__ import annotations

from typing import Any

from roost.core.errors import PreconditionFailed
from roost.core.field_types import field_type
from roost.core.message import Message

HEADERS = ("CC", "BCC")




def has_extra_keys(headers: dict[str, Any] | None) -> bool:
    return headers is not None and ("CC" in headers or "BCC" in headers)


def extra_keys(headers: dict[str, Any]) -> list[str]:
    """The routing keys of ``CC`` and ``BCC``; PreconditionFailed when one is no array."""
    keys: list[str] = []
    for name in HEADERS:
        if name not in headers:
            continue
        value = headers[name]
        if not isinstance(value, list):
            raise PreconditionFailed(
                f'invalid message: {{unacceptable_type_in_header,"{name}",{field_type(value)}}}'
            )
        keys.extend(k for k in value if isinstance(k, str))
    return keys


def strip_bcc(message: Message) -> Message:
    """The message as queues get it: without ``BCC`` (an empty table may remain)."""
    headers = message.properties.headers
    if not headers or "BCC" not in headers:
        return message
    kept = {k: v for k, v in headers.items() if k != "BCC"}
    props = message.properties.replace(headers=kept)
    return Message(message.exchange, message.routing_key, props, message.body)
