"""Application keys and accessors shared by the handlers."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from roost.core.broker import Broker
from roost.core.info import UserInfo


@dataclass(frozen=True)
class HttpSettings:
    stats_interval: float = 5.0  # seconds between rate samples
    statsd: str | None = None  # HOST:PORT to push counters to, or None
    statsd_prefix: str = "roost"
    max_body_size: int = 64 * 1024 * 1024  # larger request bodies get 413
    body_timeout: float = 10.0  # seconds a request body may take to arrive (408 after)


BROKER = web.AppKey("broker", Broker)
SETTINGS = web.AppKey("settings", HttpSettings)
USER_KEY = "roost.user"  # request key of the authenticated UserInfo


def broker(request: web.Request) -> Broker:
    return request.app[BROKER]


def user(request: web.Request) -> UserInfo:
    found: UserInfo = request[USER_KEY]
    return found
