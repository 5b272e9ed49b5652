"""Core messages as the quorum unit tests build them."""

from __future__ import annotations

from roost.core.message import Message, Properties


def message(body: bytes) -> Message:
    return Message("", "work", Properties(), body)
