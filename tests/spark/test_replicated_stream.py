"""A streaming query reading a replicated stream on 3 real nodes and a real etcd keeps
exactly-once output through kill -9 of the stream's leader: the data source, given every
node in option ``url``, moves to another node and resumes at the offset it had reached.
The output is checked against every confirmed publish (a history check, not eyeballed)."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from roost.cluster.etcd_server import EtcdServer
from roost.pipeline.amqp import Client
from tests.cluster.conftest import started_etcd
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.streams import online
from tests.confirming import publish_confirmed
from tests.support import RoostProcess, eventually

STREAM = {"x-queue-type": "stream", "x-initial-cluster-size": 3}


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    server = started_etcd(tmp_path / "etcd")
    yield server
    server.kill()


def publisher(server: RoostProcess, confirmed: list[int], stop: threading.Event) -> None:
    """Publishes numbered bodies one at a time with confirms (about 100 a second); a
    nacked or unanswered one is given up and the next gets a new number."""

    def settled(n: int, ok: bool, _began: float) -> None:
        if ok:
            confirmed.append(n)

    publish_confirmed(
        server.url, "orders", stop, lambda n: json.dumps({"n": n}).encode(), settled, pause=0.01
    )


def connected_at(port: int) -> int:
    """Open connections to local ``port``: with the server stopped, each is a client that
    called it and waits for an answer, or holds a connection it will find cut off. (Unread
    bytes alone miss a call the server had read just before it stopped.)"""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01":  # ESTABLISHED
                count += 1
    return count


def next_offset(server: RoostProcess) -> int:
    with Client(server.url) as client:
        return int(client.stream_info("orders")["x-stream-next-offset"])


def check_history(out: list[Any], confirmed: list[int], log_size: int) -> None:
    """Every offset of the stream once, in order, and every confirmed publish there."""
    offsets = sorted(r.offset for r in out)
    assert len(offsets) == len(set(offsets)), "an offset written twice"
    assert offsets == list(range(log_size)), "a gap in the output's offsets"
    numbers = [json.loads(r.body)["n"] for r in sorted(out, key=lambda r: r.offset)]
    assert len(numbers) == len(set(numbers)), "a message written twice"
    assert numbers == sorted(numbers), "the output is not in publish order"
    missing = set(confirmed) - set(numbers)
    assert not missing, f"{len(missing)} confirmed messages missing: {sorted(missing)[:5]}"


@pytest.mark.timeout(180)
def test_stream_query_keeps_exactly_once_output_through_kill_9_of_the_leader(
    spark: Any, etcd: EtcdServer, tmp_path: Path
) -> None:
    nodes = three_nodes(etcd, "/spark", tmp_path)
    n1, n2, n3 = nodes
    confirmed: list[int] = []
    stop = threading.Event()
    query: Any = None
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("orders", durable=True, arguments=STREAM)
        eventually(lambda: online(n1, "orders") == ["n1", "n2", "n3"], 10)
        # published on n2 (forwarded to the leader n1) from start to end
        thread = threading.Thread(target=publisher, args=(n2, confirmed, stop))
        thread.start()
        eventually(lambda: len(confirmed) > 100, 30, "publishing never got going")

        def start(**trigger: Any) -> Any:
            return (
                spark.readStream.format("roost")
                .option("url", ",".join(n.url for n in nodes))  # the leader first
                .option("stream", "orders")
                .option("startingOffsets", "earliest")
                .load()
                .selectExpr("offset", "CAST(body AS STRING) AS body")
                .writeStream.format("parquet")
                .option("path", str(tmp_path / "out"))
                .option("checkpointLocation", str(tmp_path / "ckpt"))
                .trigger(**trigger)
                .start()
            )

        query = start(processingTime="500 milliseconds")

        def rows_read() -> int:
            failure = query.exception()
            assert failure is None, str(failure)[-3000:]
            return sum(p["numInputRows"] for p in query.recentProgress)

        eventually(lambda: rows_read() > 100, 90, "the query read nothing")
        # the leader paused, then killed while the query talks to it: a planning call or
        # a partition read is cut off mid-way, not merely refused at its next connect
        os.kill(n1.proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
        eventually(lambda: connected_at(n1.amqp_port) > 0, 30, "the query never called n1")
        n1.kill()
        count = len(confirmed)
        eventually(lambda: len(confirmed) > count + 200, 30, "publishing did not go on")
        # stopped and started again from its checkpoint while publishes go on
        eventually(lambda: queue_json(n2, "orders")["leader"] != "n1", 30, "no failover")
        leader = str(queue_json(n2, "orders")["leader"])
        survivor = n2 if leader == "n2" else n3
        eventually(lambda: rows_read() > next_offset(survivor) - 100, 60, "the query stalled")
        query.stop()
        assert query.exception() is None, str(query.exception())[-3000:]
        count = len(confirmed)
        eventually(lambda: len(confirmed) > count + 50, 30, "publishing did not go on")
        stop.set()
        thread.join(30)
        query = start(availableNow=True)
        assert query.awaitTermination(120), "the restarted query did not end"
        assert query.exception() is None, str(query.exception())[-3000:]
        log_size = next_offset(survivor)
        out = spark.read.parquet(str(tmp_path / "out")).collect()
        check_history(out, confirmed, log_size)
        print(f"\n{len(out)} rows, {len(confirmed)} confirmed, new leader {leader}")
    finally:
        stop.set()
        if query is not None and query.isActive:
            query.stop()
        for n in nodes:
            n.kill()
