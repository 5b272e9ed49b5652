"""Committing a named consumer's stream offset over the management HTTP API."""

from __future__ import annotations

from typing import Any

import httpx
import pika

from tests.stream.conftest import declare_stream, publish, read
from tests.support import RoostProcess

COMMIT = "/api/exchanges/%2F/amq.roost.offsets/publish"


def _commit(roost: RoostProcess, stream: str, name: str, offset: Any) -> httpx.Response:
    return httpx.post(
        roost.http_url + COMMIT,
        auth=("guest", "guest"),
        json={
            "routing_key": stream,
            "payload": "",
            "payload_encoding": "string",
            "properties": {
                "headers": {"x-stream-consumer-name": name, "x-stream-offset": offset}
            },
        },
    )


def test_http_commit_moves_the_stored_offset(
    roost: RoostProcess, conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [f"m{i}".encode() for i in range(6)])
    response = _commit(roost, qname, "etl", 3)
    assert response.status_code == 200, response.text
    assert response.json() == {"routed": False}  # a commit is stored, not routed
    got = read(conn, ch, qname, 2, {"x-stream-offset": "stored", "x-stream-consumer-name": "etl"})
    assert got == [(4, b"m4"), (5, b"m5")]


def test_http_commit_errors(roost: RoostProcess, conn: pika.BlockingConnection, qname: str) -> None:
    missing = _commit(roost, qname + ".missing", "etl", 1)
    assert missing.status_code == 404, missing.text
    conn.channel().queue_declare(qname)  # a classic queue: no offsets to commit
    classic = _commit(roost, qname, "etl", 1)
    assert classic.status_code == 400, classic.text
    assert "stream" in classic.text
