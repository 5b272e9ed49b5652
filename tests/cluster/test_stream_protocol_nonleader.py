"""The RabbitMQ stream protocol's offset commands on a node that does not lead a
replicated stream: 3 real nodes, a real etcd, rstream and the codec's frames.

StoreOffset there goes to the leader (as RabbitMQ writes a stored offset to the
stream's leader), which keeps it on every member, so it is read back on every node and
survives kill -9 of the leader; QueryOffset on the node that stored it sees it at once;
StreamStats and ResolveOffsetSpec answer from the node's copy, as far as it knows the
records committed. Several subscriptions to the stream on one such node each read
exactly their records, through the failover too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pika
from rstream import OffsetNotFound, OffsetType, Producer, schema
from rstream.amqp import amqp_decoder
from rstream.recovery import BackOffRecoveryStrategy

from roost.cluster.etcd_server import EtcdServer
from roost.stream_protocol import constants as c
from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import (
    OffsetSpec,
    QueryOffset,
    QueryOffsetResponse,
    ResolveOffsetSpec,
    StoreOffset,
    StreamStats,
)
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.streams import ask
from tests.stream_protocol.clients import _raw_session
from tests.support import RoostProcess, eventually

STREAM = "s"
RECORDS = 100  # before the offsets are checked
TOTAL = 200  # 150 before the kill, 50 after


def _client(node: RoostProcess) -> Producer:
    """rstream's connection to ``node`` itself (no Metadata asked)."""
    return Producer("127.0.0.1", node.stream_port, username="guest", password="guest",
                    recovery_strategy=BackOffRecoveryStrategy(enable=False))  # fmt: skip


async def _query(node: RoostProcess, reference: str) -> int | None:
    producer = _client(node)
    try:
        client = await producer.default_client
        try:
            offset: int = await client.query_offset(STREAM, reference)
        except OffsetNotFound:  # NO_OFFSET
            return None
        return offset
    finally:
        await producer.close()


async def _query_until(node: RoostProcess, reference: str, wanted: int, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            got = await _query(node, reference)
        except Exception:  # a failover under way: asked again
            got = None
        if got == wanted:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: QueryOffset answered {got}, not {wanted}")
        await asyncio.sleep(0.1)


async def _offsets(nodes: list[RoostProcess]) -> None:
    n1, n2, n3 = nodes
    # StoreOffset on n2 (n1 leads), then QueryOffset on n2 at once: the offset it stored
    producer = _client(n2)
    client = await producer.default_client
    await client.store_offset(STREAM, "reader", 41)
    assert await _query(n2, "reader") == 41
    await producer.close()
    # StoreOffset and QueryOffset in one write: n2 answers before the leader could have
    # sent the offset back to n2's copy, so only n2's memory of its own write answers
    raw = await _raw_session(n2.stream_port)
    try:
        raw.writer.write(
            encode(StoreOffset("piped", STREAM, 55)) + encode(QueryOffset(9, "piped", STREAM))
        )
        answer = await raw.next()
        while not isinstance(answer, QueryOffsetResponse):
            answer = await raw.next()
    finally:
        await raw.close()
    assert (answer.response_code, answer.offset) == (c.OK, 55), answer
    # it reached the leader, and through it the other member
    await _query_until(n1, "reader", 41, "the leader n1")
    await _query_until(n3, "reader", 41, "the member n3")
    # a rewind is stored as said (RabbitMQ stores backwards too), from n3 this time
    producer = _client(n3)
    client = await producer.default_client
    await client.store_offset(STREAM, "rewound", 90)
    await client.store_offset(STREAM, "rewound", 12)
    await producer.close()
    await _query_until(n1, "rewound", 12, "the leader n1 after a rewind")
    # an AMQP client's commit through amq.roost.offsets on n3 goes the same way (before,
    # a node that does not lead refused it: 406 not a stream)
    await asyncio.to_thread(_commit_over_amqp, n3, "amqp-reader", 33)
    await _query_until(n1, "amqp-reader", 33, "the leader n1, committed over AMQP on n3")
    # n2's copy has it too: the leader's frame carrying it told n2 its commit (all 100
    # records were confirmed, so committed, before these offsets were stored)
    await _query_until(n2, "rewound", 12, "the member n2 after a rewind")

    # StreamStats and ResolveOffsetSpec on n2: its copy's committed records
    stats = await ask(n2, StreamStats(7, STREAM))
    assert stats.response_code == c.OK, stats
    assert stats.stats == {"first_chunk_id": 0, "committed_chunk_id": RECORDS - 1}, stats
    for spec, offset in ((OffsetSpec(c.OFFSET_FIRST), 0), (OffsetSpec(c.OFFSET_NEXT), RECORDS),
                         (OffsetSpec(c.OFFSET_OFFSET, 30), 30)):  # fmt: skip
        resolved = await ask(n3, ResolveOffsetSpec(8, STREAM, spec))
        assert (resolved.response_code, resolved.offset) == (c.OK, offset), (spec, resolved)

    # two rstream clients connected to n2 itself (n1 leads), each subscribed to the
    # stream from its own offset, and two to n3: each reads through a subscription of
    # its own at the leader, and keeps reading through the failover (on the member that
    # takes over, its consumers move onto the stream there; on the other, they follow
    # the new leader: both ways are taken whichever wins)
    reads: dict[tuple[int, int], list[tuple[int, bytes]]] = {
        (2, 0): [], (2, 60): [], (3, 30): [], (3, 90): []
    }  # fmt: skip
    readers = [await _subscribed(nodes[n - 1], start, got) for (n, start), got in reads.items()]
    await asyncio.to_thread(_publish, n1, range(RECORDS, 150))
    await _until(lambda: all(len(got) >= 150 - s for (_n, s), got in reads.items()),
                 "each subscription to read up to 150", detail=lambda: _seen(reads))  # fmt: skip

    # kill -9 of the leader: the offsets stored through n2 and n3 are the new leader's
    n1.kill()
    await _query_until(n2, "reader", 41, "n2 after the failover")
    await _query_until(n3, "reader", 41, "n3 after the failover")
    leader = await _new_leader(n2)
    other = n3 if leader is n2 else n2
    await _query_until(leader, "rewound", 12, "the new leader")
    # and a StoreOffset on the member that does not lead reaches the new leader
    producer = _client(other)
    client = await producer.default_client
    await client.store_offset(STREAM, "reader", 77)
    await producer.close()
    await _query_until(leader, "reader", 77, "the new leader, stored on its member")

    # every subscription reads what the new leader commits, each exactly its records
    await asyncio.to_thread(_publish, leader, range(150, TOTAL))
    await _until(lambda: all(len(got) >= TOTAL - s for (_n, s), got in reads.items()),
                 "each to read to the end", detail=lambda: _seen(reads))  # fmt: skip
    await asyncio.sleep(0.3)  # anything read twice would come now
    for reader in readers:
        await reader.close()
    for (n, start), got in reads.items():
        assert [o for o, _ in got] == list(range(start, TOTAL)), f"offsets from {start} on n{n}"
        assert [b for _, b in got] == [f"m{i}".encode() for i in range(start, TOTAL)]


async def _subscribed(node: RoostProcess, start: int, got: list[tuple[int, bytes]]) -> Producer:
    """A connection to ``node`` itself (no Metadata asked) subscribed from ``start``: each
    delivered record's (offset, body) goes to ``got``, one credit back per chunk."""
    producer = _client(node)
    client = await producer.default_client

    async def delivered(frame: schema.Deliver) -> None:
        offset = frame.chunk_first_offset
        for raw in frame.get_messages():
            if offset >= start:  # a chunk may begin before the offset asked for
                got.append((offset, bytes(amqp_decoder(raw).body)))
            offset += 1
        await client.credit(frame.subscription_id, 1)

    client.add_handler(schema.Deliver, delivered, name="1")  # the subscription id
    await client.run_queue_listener_task(1, delivered)  # rstream's delivery task
    await client.subscribe(STREAM, 1, schema.OffsetSpec.from_params(OffsetType.OFFSET, start), 2)
    return producer


def _seen(reads: dict[tuple[int, int], list[tuple[int, bytes]]]) -> str:
    return ": " + ", ".join(
        f"n{n} from {s}: {len(got)} read, last {got[-1][0] if got else None}"
        for (n, s), got in reads.items()
    )


def _commit_over_amqp(node: RoostProcess, name: str, offset: int) -> None:
    headers = {"x-stream": STREAM, "x-stream-consumer-name": name, "x-stream-offset": offset}
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("amq.roost.offsets", STREAM, b"", pika.BasicProperties(headers=headers))


def _publish(node: RoostProcess, numbers: range) -> None:
    """Records ``m<offset>``, one publisher with confirms on ``node``."""
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for i in numbers:
            ch.basic_publish("", STREAM, f"m{i}".encode())


async def _until(
    predicate: Callable[[], bool],
    what: str,
    timeout: float = 30,
    detail: Callable[[], str] = lambda: "",
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}{detail()}")
        await asyncio.sleep(0.02)


async def _new_leader(node: RoostProcess) -> RoostProcess:
    deadline = time.monotonic() + 30
    while True:
        shown = queue_json(node, STREAM).get("leader")
        if shown in ("n2", "n3"):
            return _NODES[str(shown)]
        if time.monotonic() > deadline:
            raise AssertionError(f"no new leader: {shown}")
        await asyncio.sleep(0.1)


_NODES: dict[str, RoostProcess] = {}


def test_stored_offsets_on_a_node_that_does_not_lead_reach_the_leader_and_survive_kill_9(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    _NODES.update({f"n{i}": n for i, n in enumerate(nodes, 1)})
    try:
        with pika.BlockingConnection(pika.URLParameters(nodes[0].url)) as conn:
            conn.channel().queue_declare(STREAM, durable=True,
                                         arguments={"x-queue-type": "stream"})  # fmt: skip
        _publish(nodes[0], range(RECORDS))
        for n in nodes:  # the leader has synced both members, and each node knows it
            eventually(
                lambda n=n: sorted(queue_json(n, STREAM)["online"]) == ["n1", "n2", "n3"],  # type: ignore[misc]
                10,
            )
        asyncio.run(asyncio.wait_for(_offsets(nodes), 90))
    finally:
        _NODES.clear()
        for n in nodes:
            n.kill()
