"""The RabbitMQ stream protocol on a replicated stream: 3 real nodes, a real etcd, rstream.

rstream asks Metadata where the stream's leader and replicas are (each node's advertised
stream address), publishes on the leader's node and consumes from a replica's; after
kill -9 of the leader it asks again and re-sends what it has no confirm for under the
same publishing ids, which the new leader must drop, since each member keeps the
producers' ids the leader shipped with the records (the history is checked offset by
offset, not eyeballed)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pika
from rstream import Consumer, ConsumerOffsetSpecification, OffsetType, Producer, RawMessage, schema
from rstream.exceptions import LeaderNotAvailable
from rstream.recovery import BackOffRecoveryStrategy

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.nodes import queue_json, three_nodes
from tests.support import RoostProcess, eventually

STREAM = "s"
PRODUCER = "orders"  # the publisher reference: its publishing ids are deduplicated
FIRST = 300  # confirmed before the kill
TOTAL = 400  # 301..400 are in flight when the leader dies
RESENT_CONFIRMED = 50  # confirms lost with the connection: re-sent under the same ids
AFTER = 20  # new ones published after the failover (the reader must get them too)


DIRECT = "direct"  # a publisher declared on a node that does not lead
DIRECT_IDS = range(1, 11)


def body(pid: int) -> bytes:
    return f"m{pid:05d}".encode()


def direct(pid: int) -> bytes:
    return f"d{pid:05d}".encode()


def _producer(node: RoostProcess) -> Producer:
    # the test re-sends itself after a failover, as an application whose confirms failed
    return Producer("127.0.0.1", node.stream_port, username="guest", password="guest",
                    recovery_strategy=BackOffRecoveryStrategy(enable=False))  # fmt: skip


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def _leader_and_replicas(node: RoostProcess, replicas: int) -> tuple[int, list[int]]:
    """Metadata asked on ``node``: the leader's and replicas' stream ports, once a leader
    is known (rstream raises LeaderNotAvailable during a failover) and ``replicas`` of
    them are in sync (a new leader lists a member once it has synced it)."""
    deadline = time.monotonic() + 30
    while True:
        producer = _producer(node)
        try:
            client = await producer.default_client
            leader, found = await client.query_leader_and_replicas(STREAM)
            if len(found) == replicas or time.monotonic() > deadline:
                return leader.port, sorted(r.port for r in found)
        except LeaderNotAvailable:
            if time.monotonic() > deadline:
                raise
        finally:
            await producer.close()
        await asyncio.sleep(0.2)


async def _publish(
    node: RoostProcess, ids: range, confirmed: set[int], wait: bool
) -> Producer | None:
    """Publish ``ids`` as producer ``PRODUCER`` through rstream connected to ``node``'s
    address (rstream goes to the leader it finds in Metadata); ``wait``: until all are
    confirmed, else leave them in flight (the caller kills the leader)."""
    producer = _producer(node)
    await producer.start()

    def noted(status: Any) -> None:
        if status.is_confirmed:
            confirmed.add(status.message_id)

    messages = [RawMessage(body(pid), publishing_id=pid) for pid in ids]
    for at in range(0, len(messages), 25):
        await producer.send_batch(STREAM, messages[at : at + 25], publisher_name=PRODUCER,
                                  on_publish_confirm=noted)  # fmt: skip
    if not wait:
        return producer  # in flight: the caller kills the leader under it
    await _until(lambda: confirmed >= set(ids), f"confirms of {ids}")
    await producer.close()
    return None


async def _publish_directly(node: RoostProcess, confirmed: set[int]) -> int:
    """DeclarePublisher and Publish on a node that does not lead, as a client that never
    asks Metadata does: forwarded to the leader, as RabbitMQ's reader writes to the
    leader wherever it runs; each id sent twice, stored once. Returns the publisher's
    last id as this node answers QueryPublisherSequence (from its copy)."""
    producer = _producer(node)
    try:
        client = await producer.default_client  # a connection to ``node`` itself

        async def noted(frame: schema.PublishConfirm) -> None:
            confirmed.update(frame.publishing_ids)

        client.add_handler(schema.PublishConfirm, noted, name="direct")
        await client.declare_publisher(STREAM, DIRECT, 7)
        for _ in range(2):  # the second time: every id a duplicate, confirmed, dropped
            messages = [schema.Message(pid, None, direct(pid)) for pid in DIRECT_IDS]
            await client.publish(messages, 7)
            await _until(lambda: confirmed >= set(DIRECT_IDS), "the direct confirms")
            confirmed.clear()
        await client.delete_publisher(7)
        # a majority confirmed it: this node's copy may take a moment longer
        deadline = time.monotonic() + 10
        while True:
            last: int = await client.query_publisher_sequence(STREAM, DIRECT)
            if last == DIRECT_IDS[-1] or time.monotonic() > deadline:
                return last
            await asyncio.sleep(0.05)
    finally:
        await producer.close()


async def _watching_publisher(node: RoostProcess, updates: list[str]) -> Producer:
    """A publisher declared on ``node`` (no Metadata asked) that notes MetadataUpdates."""
    producer = _producer(node)
    client = await producer.default_client

    async def noted(frame: schema.MetadataUpdate) -> None:
        updates.append(frame.metadata_info.stream)

    client.add_handler(schema.MetadataUpdate, noted, name="watch")
    await client.declare_publisher(STREAM, None, 9)
    return producer


async def _read_all(node: RoostProcess, at_least: int) -> list[tuple[int, bytes]]:
    """Every message of the stream, from offset 0, through rstream connected to
    ``node``'s address (rstream consumes from a replica it finds in Metadata)."""
    got: list[tuple[int, bytes]] = []
    consumer = Consumer("127.0.0.1", node.stream_port, username="guest", password="guest")
    await consumer.start()
    await consumer.subscribe(
        STREAM,
        lambda m, ctx: got.append((ctx.offset, bytes(m))),
        offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
    )
    await _until(lambda: len(got) >= at_least, f"{at_least} messages read")
    await asyncio.sleep(0.5)  # anything stored twice would come now
    await consumer.close()
    return got


def check(log: list[tuple[int, bytes]], confirmed: set[int]) -> None:
    """Offsets from 0 without a gap or repeat, no body twice, every confirmed body (and
    the directly published ones, ``_publish_directly``)."""
    offsets = [offset for offset, _ in log]
    assert offsets == list(range(len(log))), "offsets with a gap or delivered twice"
    bodies = [raw for _, raw in log]
    twice = sorted({b for b in bodies if bodies.count(b) > 1})
    assert not twice, f"{len(twice)} messages stored twice: {twice[:5]}"
    missing = {body(pid) for pid in confirmed} - set(bodies)
    missing |= {direct(pid) for pid in DIRECT_IDS} - set(bodies)
    assert not missing, f"{len(missing)} confirmed messages lost: {sorted(missing)[:5]}"


async def _scenario(nodes: list[RoostProcess]) -> None:
    n1, n2, n3 = nodes
    port_of = {n.stream_port: n for n in nodes}
    # the stream protocol's Metadata asked on a member that does not lead: the leader
    # n1's address and the in-sync replicas n2, n3
    leader, replicas = await _leader_and_replicas(n2, 2)
    assert leader == n1.stream_port, (leader, [n.stream_port for n in nodes])
    assert replicas == sorted([n2.stream_port, n3.stream_port])

    # a publisher declared on n3 (not the leader): forwarded, deduplicated, and n3's
    # copy answers QueryPublisherSequence with its last id
    assert await _publish_directly(n3, set()) == DIRECT_IDS[-1]

    confirmed: set[int] = set()
    await _publish(n2, range(1, FIRST + 1), confirmed, wait=True)
    # a reader on a replica's node (Metadata sends it there), reading what is committed
    early = await _read_all(n3, FIRST + len(DIRECT_IDS))
    check(early, confirmed)

    # a subscription on a replica's node that stays through the failover
    through: list[tuple[int, bytes]] = []
    reader = Consumer("127.0.0.1", n3.stream_port, username="guest", password="guest")
    await reader.start()
    await reader.subscribe(
        STREAM,
        lambda m, ctx: through.append((ctx.offset, bytes(m))),
        offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
    )
    updates: list[str] = []
    watching = await _watching_publisher(n3, updates)
    in_flight = await _publish(n2, range(FIRST + 1, TOTAL + 1), confirmed, wait=False)
    n1.kill()  # kill -9 of the leader with publishes in flight
    assert in_flight is not None
    with contextlib.suppress(Exception):  # its connection was the dead leader's
        await asyncio.wait_for(in_flight.close(), 5)

    # the client asks Metadata again (on a surviving node) until a new leader is named
    leader, replicas = await _leader_and_replicas(n3, 1)
    assert leader in (n2.stream_port, n3.stream_port), leader
    new_leader = port_of[leader]
    assert replicas == [m.stream_port for m in (n2, n3) if m is not new_leader]
    # a publisher on n3 is told the leader moved (whether n3 leads now or follows n2)
    await _until(lambda: updates[:1] == [STREAM], "a MetadataUpdate to n3's publisher")
    await watching.close()
    # the new leader knows the producer's last id: every confirmed one, from the copy
    producer = _producer(new_leader)
    try:
        client = await producer.default_client
        last = await client.query_publisher_sequence(stream=STREAM, reference=PRODUCER)
    finally:
        await producer.close()
    assert last >= max(confirmed), f"QueryPublisherSequence {last} < {max(confirmed)}"

    # re-sent with the same ids: what it holds no confirm for, and the last confirmed
    # ones too (their confirms might have been lost with the connection)
    resend = range(min(set(range(1, TOTAL + 1)) - confirmed, default=TOTAL + 1)
                   - RESENT_CONFIRMED, TOTAL + AFTER + 1)  # fmt: skip
    await _publish(n2, resend, confirmed, wait=True)
    assert confirmed == set(range(1, TOTAL + AFTER + 1))
    # the subscription kept reading through the new leader: no gap, nothing twice, the
    # same body at each offset as the final read shows
    everything = TOTAL + AFTER + len(DIRECT_IDS)
    await _until(lambda: len(through) >= everything, "the reader to catch up")
    await reader.close()  # one subscription per stream per node that does not lead
    final = await _read_all(n2, everything)
    check(final, confirmed)
    assert [o for o, _ in through] == list(range(len(through))), "the reader's offsets"
    assert through == final[: len(through)], "the reader saw other bodies"


def test_rstream_through_metadata_survives_kill_9_of_the_leader_without_duplicates(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1 = nodes[0]
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare(STREAM, durable=True,
                                         arguments={"x-queue-type": "stream"})  # fmt: skip
        for n in nodes:  # the leader has synced both members, and each node knows it
            eventually(
                lambda n=n: sorted(queue_json(n, STREAM)["online"]) == ["n1", "n2", "n3"],  # type: ignore[misc]
                10,
            )
        asyncio.run(asyncio.wait_for(_scenario(nodes), 90))
    finally:
        for n in nodes:
            n.kill()
