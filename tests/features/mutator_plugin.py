"""Mutators for the tests, found by the server through ``ROOST_MUTATORS``."""

from __future__ import annotations

import sys
from typing import Any

from roost.core.message import Message


def boom(message: Message, args: dict[str, Any]) -> Message:
    raise RuntimeError("boom")


def drop_marked(message: Message, args: dict[str, Any]) -> Message | None:
    return None if (message.properties.headers or {}).get("drop") else message


def shout(message: Message, args: dict[str, Any]) -> Message:
    return Message(message.exchange, message.routing_key, message.properties,
                   message.body.upper() + args.get("suffix", "").encode())


def bail_out(message: Message, args: dict[str, Any]) -> Message:
    sys.exit(3)  # a plugin that tries to stop the process
