"""Ranged reads of a replicated stream, as the Spark data source makes them: on a node
that does not lead the stream (the relayed consumer ends with basic.cancel after its
``x-stream-end-offset``, as on the leader's node), and through kill -9 of the leader in
the middle of a read (it goes on at another node from where it was, nothing twice)."""

from __future__ import annotations

from pathlib import Path

from roost.cluster.etcd_server import EtcdServer
from roost.pipeline.amqp import Client, properties
from roost.pipeline.chunks import records
from roost.pipeline.reading import RoostPartition, read_partition
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.streams import online
from tests.support import RoostProcess, eventually


def fill(server: RoostProcess, count: int) -> None:
    """Stream ``s`` declared with ``count`` messages, all confirmed (a window of them)."""
    with Client(server.url) as client:
        client.declare_stream("s")
        client.confirm_select()
        for i in range(count):
            client.publish("", "s", properties(), f"m{i:06d}".encode())
        client.flush_confirmed()


def test_a_ranged_read_through_a_non_leader_ends_at_its_end_offset(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1, n2, n3 = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    try:
        fill(n1, 1000)
        eventually(lambda: online(n1, "s") == ["n1", "n2", "n3"], 10)
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


def test_a_partition_read_cut_off_by_kill_9_of_the_leader_resumes_at_another_node(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, _n3 = nodes
    try:
        fill(n1, 3000)
        eventually(lambda: online(n1, "s") == ["n1", "n2", "n3"], 10)
        url = ",".join(n.url for n in nodes)  # the leader first: the read starts there
        # small chunks and batches: most of the range is still to come at the kill
        batches = read_partition(
            url, RoostPartition("s", 500, 2800), batch_rows=100, chunk_bytes=1024
        )
        got = list(next(batches).column("offset").to_pylist())
        assert got == list(range(500, 500 + len(got))) and len(got) < 1000
        n1.kill()  # the read's connection goes; the stream is between leaders a while
        for batch in batches:
            offsets = batch.column("offset").to_pylist()
            bodies = batch.column("body").to_pylist()
            assert bodies == [f"m{o:06d}".encode() for o in offsets]
            got += offsets
        assert got == list(range(500, 2800)), "a gap or a record twice"
        assert queue_json(n2, "s")["leader"] in ("n2", "n3")
    finally:
        for n in nodes:
            n.kill()


def test_a_slow_consumer_on_a_non_leader_misses_nothing_through_kill_9_of_the_leader(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    """The leader sends a relayed consumer more than its prefetch (credit is 8 per unit of
    prefetch); what waits on the consumer's node when the leader dies is asked for again
    from the new leader, not skipped."""
    import pika

    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    try:
        fill(n1, 2000)
        eventually(lambda: online(n1, "s") == ["n1", "n2", "n3"], 10)
        got: list[int] = []
        with pika.BlockingConnection(pika.URLParameters(n3.url)) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=10)
            for method, props, _raw in ch.consume(
                "s", arguments={"x-stream-offset": 0}, inactivity_timeout=20
            ):
                assert method is not None, f"stalled after offset {got[-1] if got else None}"
                got.append(props.headers["x-stream-offset"])
                if len(got) == 50:  # 10 unacked here; the node holds what was sent ahead
                    n1.kill()
                    eventually(lambda: queue_json(n2, "s")["leader"] != "n1", 30, "no failover")
                ch.basic_ack(method.delivery_tag)
                if len(got) >= 2000 or got[-1] >= 1999:
                    break
            ch.cancel()
        assert got == list(range(2000)), "a gap or a record twice"
    finally:
        for n in nodes:
            n.kill()
