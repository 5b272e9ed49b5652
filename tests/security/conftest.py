"""Helpers for the access-control and limits tests: users made through the management
API of the shared broker, and pika connections as those users."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pika
import pytest

from tests.support import RoostProcess

_ids = itertools.count(1)


@pytest.fixture
def admin(roost: RoostProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=roost.http_url + "/api", auth=("guest", "guest")) as client:
        yield client


def put(client: httpx.Client, path: str, body: dict[str, Any]) -> None:
    reply = client.put(path, json=body)
    assert reply.status_code in (201, 204), (path, reply.status_code, reply.text)


MakeUser = Callable[..., str]


@pytest.fixture
def make_user(admin: httpx.Client, request: pytest.FixtureRequest) -> MakeUser:
    """``make_user(configure, write, read, tags="", vhost="/")`` -> a new user's name; the
    password is "pw". Names are unique per test."""

    def _make(
        configure: str = ".*",
        write: str = ".*",
        read: str = ".*",
        *,
        tags: str = "",
        vhost: str = "/",
    ) -> str:
        safe = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.originalname)[:40]
        name = f"u{next(_ids)}-{os.getpid()}-{safe}"
        put(admin, f"/users/{name}", {"password": "pw", "tags": tags})
        quoted = vhost.replace("/", "%2F")
        put(admin, f"/permissions/{quoted}/{name}", {"configure": configure, "write": write,
                                                     "read": read})
        return name

    return _make


def amqp_as(server: RoostProcess, user: str, password: str = "pw",
            vhost: str = "%2F") -> pika.BlockingConnection:
    return pika.BlockingConnection(
        pika.URLParameters(f"amqp://{user}:{password}@127.0.0.1:{server.amqp_port}/{vhost}")
    )


def sync(ch: Any) -> None:
    """A round trip, so that an asynchronous refusal (basic.publish) has arrived."""
    ch.basic_qos(prefetch_count=0)
