"""A replicated stream's leader drops a retried publish (same producer and publishing id)
as a duplicate, and confirms it only once the record it repeats is committed: the
publisher retried because that record had no confirm yet (inherited from an old leader,
or short of a majority), and a confirm promises it survives. Sans-IO: a real stream
queue and the real ``StreamReplicator`` over the memory broker, links that record what
is sent; the members' acks are given by hand."""

from __future__ import annotations

import asyncio
from pathlib import Path

from roost.cluster.link import frames as f
from roost.cluster.quorum.stream_leader import StreamReplicator
from roost.core.errors import BrokerError
from roost.core.message import Message, Properties
from roost.core.queues.stream import PRODUCER_HEADER, PUBLISHING_ID_HEADER
from roost.store.stream_store import StreamFiles
from tests.brokers import memory_broker
from tests.quorum_links import Links


def record(publishing_id: int) -> Message:
    headers = {PRODUCER_HEADER: "app", PUBLISHING_ID_HEADER: publishing_id}
    return Message("", "s", Properties(headers=headers), b"m%d" % publishing_id)


async def retried(data: Path) -> None:
    broker = memory_broker(stream_storage=StreamFiles(data))
    vhost = broker.vhosts["/"]
    vhost.declare_queue("s", durable=True, arguments={"x-queue-type": "stream"})
    queue = vhost.queues["s"]
    rep = StreamReplicator(broker, Links(("n2", "n3")), queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
    queue.replication = rep
    rep.started(5)
    for _ in range(5):
        await asyncio.sleep(0)

    def confirms_of(message: Message) -> list[BrokerError | None]:
        got: list[BrokerError | None] = []
        completion = broker.durable_from_here()
        assert queue.push(message)
        if not completion.then(got.append):
            got.append(None)  # nothing to wait for: confirmed at once
        return got

    first = confirms_of(record(1))
    again = confirms_of(record(1))  # retried before its confirm
    assert queue.log.next_offset == 1  # the retry was dropped as a duplicate
    await asyncio.sleep(0.05)  # this node's own writes are durable
    assert first == [] and again == []  # no majority holds it yet: neither confirmed
    rep.acknowledged("n2", f.ReplicateAck("/", "s", 5, 1, True))
    assert first == [None] and again == [None]  # committed: both
    assert confirms_of(record(1)) == [None]  # committed already: at once
    rep.close()


def test_a_retried_publish_is_confirmed_only_once_its_record_is_committed(
    tmp_path: Path,
) -> None:
    asyncio.run(retried(tmp_path))
