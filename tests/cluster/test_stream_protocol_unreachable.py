"""The stream protocol's queries on a node with no copy of a replicated stream, while the
stream's only replica is out of reach: 3 real nodes, a real etcd, raw stream-protocol
frames. Paused (SIGSTOP: nothing closed, the link just falls silent) and then killed
(kill -9), the leader's node cannot answer, and each of QueryOffset,
QueryPublisherSequence and StreamStats gets STREAM_NOT_AVAILABLE on the asking node, as
RabbitMQ answers while a stream has no leader. The session goes on answering, and the
node's other clients are not held."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pika

from roost.cluster.etcd_server import EtcdServer
from roost.stream_protocol import constants as c
from roost.stream_protocol.frames import (
    QueryOffset,
    QueryOffsetResponse,
    QueryPublisherSequence,
    QueryPublisherSequenceResponse,
    StreamStats,
    StreamStatsResponse,
)
from tests.cluster.nodes import three_nodes
from tests.stream_protocol.clients import _raw_session
from tests.support import RoostProcess, eventually

QUESTIONS = (
    (QueryOffset(11, "reader", "one"), QueryOffsetResponse),
    (QueryPublisherSequence(12, "app", "one"), QueryPublisherSequenceResponse),
    (StreamStats(13, "one"), StreamStatsResponse),
)


def _known(node: RoostProcess, name: str) -> bool:
    shown = httpx.get(f"{node.http_url}/api/queues/%2F/{name}", auth=("guest", "guest"))
    return shown.status_code == 200


async def _codes(node: RoostProcess) -> list[int]:
    """Asks the three questions in turn on one session and returns each answer's code."""
    raw = await _raw_session(node.stream_port)
    codes = []
    try:
        for question, answer_type in QUESTIONS:
            await raw.send(question)
            while True:
                # generous: the silence check (6 s) or the ask's own timeout ends a wait
                answer: Any = await raw.next(timeout=90)
                if isinstance(answer, answer_type):
                    assert answer.correlation_id == question.correlation_id
                    codes.append(answer.response_code)
                    break
    finally:
        await raw.close()
    return codes


def _other_client_works(node: RoostProcess) -> None:
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        ch.queue_declare("side", durable=False, exclusive=True)
        ch.basic_publish("", "side", b"still here")
        method, _props, body = ch.basic_get("side", auto_ack=True)
        assert method is not None and body == b"still here"


def test_a_paused_then_killed_leader_answers_stream_not_available(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1, n2, n3 = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    assert n1.proc is not None
    paused = False
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare(
                "one", durable=True,
                arguments={"x-queue-type": "stream", "x-initial-cluster-size": 1},
            )  # fmt: skip
        eventually(lambda: _known(n3, "one"), 10)
        # reachable: n3 has no copy, and n1 answers through the link (no offset stored)
        assert asyncio.run(_codes(n3)) == [c.NO_OFFSET, c.OK, c.OK]

        os.kill(n1.proc.pid, signal.SIGSTOP)
        paused = True
        assert asyncio.run(_codes(n3)) == [c.STREAM_NOT_AVAILABLE] * 3
        _other_client_works(n3)
        os.kill(n1.proc.pid, signal.SIGCONT)
        paused = False

        n1.kill()
        assert asyncio.run(_codes(n3)) == [c.STREAM_NOT_AVAILABLE] * 3
        _other_client_works(n3)
    finally:
        if paused:
            os.kill(n1.proc.pid, signal.SIGCONT)
        for n in (n1, n2, n3):
            n.kill()
    for n in (n2, n3):
        assert "Traceback" not in n.log, n.log
