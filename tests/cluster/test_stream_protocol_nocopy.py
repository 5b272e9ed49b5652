"""The RabbitMQ stream protocol's queries on a cluster node that holds no copy of a
replicated stream: 3 real nodes, a real etcd, rstream and the codec's frames. Streams of
one replica (n1) and two (n1, n2); asked on a node outside the group, QueryOffset,
QueryPublisherSequence, StreamStats and ResolveOffsetSpec are answered by the leader
over the node link, as RabbitMQ answers them on any node (before: PRECONDITION_FAILED)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pika
import pytest
from rstream import OffsetNotFound, Producer, RawMessage
from rstream.recovery import BackOffRecoveryStrategy

from roost.cluster.etcd_server import EtcdServer
from roost.stream_protocol import constants as c
from roost.stream_protocol.frames import (
    OffsetSpec,
    ResolveOffsetSpec,
    StreamStats,
)
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.streams import ask
from tests.support import RoostProcess, eventually

RECORDS = 10


def _client(node: RoostProcess) -> Producer:
    """rstream's connection to ``node`` itself (no Metadata asked)."""
    return Producer("127.0.0.1", node.stream_port, username="guest", password="guest",
                    recovery_strategy=BackOffRecoveryStrategy(enable=False))  # fmt: skip


def _known(node: RoostProcess, name: str) -> bool:
    shown = httpx.get(f"{node.http_url}/api/queues/%2F/{name}", auth=("guest", "guest"))
    return shown.status_code == 200


async def _fill(leader: RoostProcess, stream: str, member: RoostProcess | None = None) -> None:
    """RECORDS records from the producer "app" (publishing ids 1…), and the offset 4
    stored for the consumer "reader", on the leader's node. ``member``: its copy's
    figures reach the leader's commit while the stream is idle (the leader's heartbeat
    carries its commit), before anything else is sent."""
    producer = _client(leader)
    try:
        for pid in range(1, RECORDS + 1):
            await producer.send_wait(
                stream, RawMessage(f"m{pid}".encode(), publishing_id=pid), publisher_name="app"
            )
        if member is not None:
            for _ in range(100):
                stats = await ask(member, StreamStats(7, stream))
                if stats.stats.get("committed_chunk_id") == RECORDS - 1:
                    break
                await asyncio.sleep(0.05)
            assert stats.stats == {"first_chunk_id": 0, "committed_chunk_id": RECORDS - 1}
        client = await producer.default_client
        await client.store_offset(stream, "reader", 4)
        assert await client.query_offset(stream, "reader") == 4
    finally:
        await producer.close()


async def _asked_where_no_copy(node: RoostProcess, stream: str) -> None:
    producer = _client(node)
    try:
        client = await producer.default_client
        assert await client.query_offset(stream, "reader") == 4
        with pytest.raises(OffsetNotFound):  # NO_OFFSET, as on the leader
            await client.query_offset(stream, "nobody")
        assert await client.query_publisher_sequence(stream, "app") == RECORDS
        assert await client.query_publisher_sequence(stream, "nobody") == 0
    finally:
        await producer.close()
    stats = await ask(node, StreamStats(7, stream))
    assert stats.response_code == c.OK, stats
    assert stats.stats == {"first_chunk_id": 0, "committed_chunk_id": RECORDS - 1}, stats
    for spec, offset in ((OffsetSpec(c.OFFSET_FIRST), 0), (OffsetSpec(c.OFFSET_NEXT), RECORDS),
                         (OffsetSpec(c.OFFSET_OFFSET, 3), 3)):  # fmt: skip
        resolved = await ask(node, ResolveOffsetSpec(8, stream, spec))
        assert (resolved.response_code, resolved.offset) == (c.OK, offset), (spec, resolved)


def test_a_node_without_a_copy_asks_the_leader(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1, n2, n3 = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            ch = conn.channel()
            for name, size in (("one", 1), ("two", 2)):
                ch.queue_declare(
                    name, durable=True,
                    arguments={"x-queue-type": "stream", "x-initial-cluster-size": size},
                )  # fmt: skip
        eventually(lambda: sorted(queue_json(n1, "two")["members"]) == ["n1", "n2"], 10)  # type: ignore[arg-type]
        for name in ("one", "two"):  # the definitions reached every node
            for n in (n2, n3):
                eventually(lambda: _known(n, name), 10)  # noqa: B023

        async def main() -> None:
            await _fill(n1, "one")
            await _fill(n1, "two", member=n2)
            await _asked_where_no_copy(n2, "one")  # one replica: n2 and n3 have none
            await _asked_where_no_copy(n3, "one")
            await _asked_where_no_copy(n3, "two")  # two replicas: n3 has none

        asyncio.run(main())
    finally:
        for n in (n1, n2, n3):
            n.kill()
    for n in (n1, n2, n3):
        assert "Traceback" not in n.log, n.log
