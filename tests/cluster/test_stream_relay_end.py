"""A replicated stream read with ``x-stream-end-offset`` on a node that does not lead
it: the relayed consumer ends with basic.cancel after the last record, as on the
leader's node (the pipeline's ranged reads, which wait for that cancel, rely on it)."""

from __future__ import annotations

from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from roost.pipeline.amqp import Client
from roost.pipeline.chunks import records
from tests.cluster.test_quorum import queue_json, three_nodes
from tests.support import eventually


def test_a_ranged_read_through_a_non_leader_ends_at_its_end_offset(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1, n2, n3 = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            ch = conn.channel()
            ch.queue_declare("s", durable=True, arguments={"x-queue-type": "stream"})
            ch.confirm_delivery()
            for i in range(1000):
                ch.basic_publish("", "s", f"m{i:06d}".encode())
        eventually(lambda: sorted(queue_json(n1, "s")["online"]) == ["n1", "n2", "n3"], 10)  # type: ignore[arg-type]
        assert queue_json(n2, "s")["leader"] == "n1"
        with Client(n2.url) as client:  # one delivery per record
            got = [
                (d.properties[2]["x-stream-offset"], d.body)
                for d in client.read_range("s", 100, 600, prefetch=50)
            ]
        assert got == [(o, f"m{o:06d}".encode()) for o in range(100, 600)]
        with Client(n3.url) as client:  # chunked, as the Spark data source reads
            offsets = [
                r[0]
                for d in client.read_range("s", 250, 900, prefetch=4, chunk_bytes=2048)
                for r in records(d.body)
            ]
        assert offsets == list(range(250, 900))
        with Client(n2.url) as client:  # and the node takes the next consumer
            assert len(list(client.read_range("s", 990, 1000))) == 10
    finally:
        for n in (n1, n2, n3):
            n.kill()
    for n in (n1, n2, n3):
        assert "Traceback" not in n.log, n.log
