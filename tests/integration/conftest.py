from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pika
import pytest

from tests.support import RoostProcess


def pika_params(server: RoostProcess, **kw: object) -> pika.URLParameters:
    params = pika.URLParameters(server.url)
    for key, value in kw.items():
        setattr(params, key, value)
    return params


def pump(conn: pika.BlockingConnection, until: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Process pika events until ``until()`` holds or ``timeout`` passes; the final check."""
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    return until()


def settle(conn: pika.BlockingConnection, seconds: float = 0.3) -> None:
    """Process events for a while, for asserting that nothing (more) arrives."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)


@pytest.fixture
def conn(roost: RoostProcess) -> Iterator[pika.BlockingConnection]:
    connection = pika.BlockingConnection(pika_params(roost))
    yield connection
    if connection.is_open:
        connection.close()


@pytest.fixture
def ch(conn: pika.BlockingConnection):  # type: ignore[no-untyped-def]
    return conn.channel()
