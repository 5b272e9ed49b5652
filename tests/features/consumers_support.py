"""Helpers for the consumer-feature tests (plain functions, so no conftest is needed):
pika channels that record their deliveries, waiting on events, expected channel errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pika
import pytest

from tests.support import RoostProcess


def connect(server: RoostProcess) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(server.url))


class Recorder:
    """Collects (body, redelivered, delivery tag) per consumer."""

    def __init__(self) -> None:
        self.got: dict[str, list[tuple[str, bool, int]]] = {}

    def callback(self, name: str) -> Callable[..., None]:
        def on_message(ch: Any, method: Any, props: Any, body: bytes) -> None:
            self.got.setdefault(name, []).append(
                (body.decode(), method.redelivered, method.delivery_tag)
            )

        return on_message

    def bodies(self, name: str) -> list[str]:
        return [b for b, _, _ in self.got.get(name, [])]

    def total(self) -> int:
        return sum(len(v) for v in self.got.values())


def closed_with(code: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """Call ``fn``; it must close its channel with ``code``. The reply text."""
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        fn(*args, **kwargs)
    assert info.value.reply_code == code, info.value
    return str(info.value.reply_text)
