from __future__ import annotations

from collections.abc import Iterator

import pika
import pytest

from tests.support import RoostProcess


def pika_params(server: RoostProcess, **kw: object) -> pika.URLParameters:
    params = pika.URLParameters(server.url)
    for key, value in kw.items():
        setattr(params, key, value)
    return params


@pytest.fixture
def conn(roost: RoostProcess) -> Iterator[pika.BlockingConnection]:
    connection = pika.BlockingConnection(pika_params(roost))
    yield connection
    if connection.is_open:
        connection.close()


@pytest.fixture
def ch(conn: pika.BlockingConnection):  # type: ignore[no-untyped-def]
    return conn.channel()
