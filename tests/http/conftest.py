"""Fixtures for the management API tests: one broker with a fast rate sampler, an
authenticated HTTP client, pika connections, and users with each management tag."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote as _quote

import httpx
import pika
import pytest

from tests.support import RoostProcess

T = TypeVar("T")
SAMPLE = "0.2"  # seconds between rate samples, so rate tests finish quickly


@pytest.fixture(scope="session")
def mgmt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    server = RoostProcess(tmp_path_factory.mktemp("roost-mgmt"), "--stats-interval", SAMPLE).start()
    yield server
    code = server.stop()
    assert code == 0, f"graceful shutdown failed ({code}):\n{server.log}"
    assert "Traceback" not in server.log, server.log


def client(server: RoostProcess, user: str = "guest", password: str = "guest") -> httpx.Client:
    return httpx.Client(base_url=server.http_url, auth=(user, password), timeout=10.0)


@pytest.fixture
def http(mgmt: RoostProcess) -> Iterator[httpx.Client]:
    with client(mgmt) as c:
        yield c


@pytest.fixture
def amqp(mgmt: RoostProcess) -> Iterator[pika.BlockingConnection]:
    conn = pika.BlockingConnection(pika.URLParameters(mgmt.url))
    yield conn
    if conn.is_open:
        conn.close()


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A name unique to the test (queues, exchanges, users, vhosts)."""
    module = request.node.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    return f"t.{module}." + request.node.name.replace("[", ".").replace("]", "").replace("/", "_")


@pytest.fixture
def make_user(http: httpx.Client) -> Iterator[Callable[..., tuple[str, str]]]:
    """Create a user with tags (and, by default, full permissions on '/'); removed after."""
    made: list[str] = []

    def make(tags: str, *, vhost: str | None = "/", suffix: str = "") -> tuple[str, str]:
        user = f"u.{tags.replace(',', '-') or 'none'}{suffix}.{len(made)}.{time.monotonic_ns()}"
        password = "pw-" + user
        assert (
            http.put(f"/api/users/{user}", json={"password": password, "tags": tags}).status_code
            == 201
        )
        if vhost is not None:
            r = http.put(
                f"/api/permissions/{quote(vhost)}/{user}",
                json={"configure": ".*", "write": ".*", "read": ".*"},
            )
            assert r.status_code == 201
        made.append(user)
        return user, password

    yield make
    for user in made:
        http.delete(f"/api/users/{user}")


def quote(segment: str) -> str:
    """One path segment: vhost '/' is %2F."""
    return _quote(segment, safe="")


def json_of(response: httpx.Response) -> Any:
    assert response.status_code == 200, (response.status_code, response.text)
    return response.json()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where the browser tests' screenshots go: a temporary directory, or docs/screenshots/
    with ROOST_UPDATE_SCREENSHOTS=1."""
    if os.environ.get("ROOST_UPDATE_SCREENSHOTS") == "1":
        docs = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        return docs
    return tmp_path
