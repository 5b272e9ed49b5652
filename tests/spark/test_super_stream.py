"""The roost data source on a super stream (option superStream): one Spark partition per
partition stream, rows naming their partition, offsets per partition across a restart.
The super stream is made by rstream (the stream protocol's CreateSuperStream) and filled
by AMQP publishes to its exchange, one routing key per partition."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pika
import pytest
from rstream import AMQPMessage, RouteType, SuperStreamCreationOption, SuperStreamProducer

from roost.pipeline.amqp import RoostError
from tests.support import RoostProcess

PARTITIONS = 4


def create_super_stream(broker: RoostProcess, name: str) -> None:
    async def key(message: AMQPMessage) -> str:
        return str(message.body)

    async def main() -> None:
        async with SuperStreamProducer(
            host="127.0.0.1", port=broker.stream_port, username="guest", password="guest",
            super_stream=name, routing=RouteType.Hash, routing_extractor=key,
            super_stream_creation_option=SuperStreamCreationOption(n_partitions=PARTITIONS),
        ):
            pass

    asyncio.run(asyncio.wait_for(main(), 60))


def fill(broker: RoostProcess, name: str, counts: list[int], start: int = 0) -> None:
    """``counts[p]`` messages into partition p (binding key "p"), numbered from ``start``."""
    with pika.BlockingConnection(pika.URLParameters(broker.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for p, count in enumerate(counts):
            for n in range(start, start + count):
                ch.basic_publish(name, str(p), json.dumps({"p": p, "n": n}).encode())


def read(spark: Any, broker: RoostProcess, name: str) -> Any:
    return (spark.read.format("roost").option("url", broker.url).option("superStream", name)
            .option("streamPort", broker.stream_port).load())


def test_batch_read_has_one_spark_partition_per_stream_partition(
    spark: Any, broker: RoostProcess
) -> None:
    create_super_stream(broker, "ss-batch")
    counts = [30, 10, 0, 25]
    fill(broker, "ss-batch", counts)
    df = read(spark, broker, "ss-batch")
    assert df.columns[-1] == "stream"
    assert df.rdd.getNumPartitions() == 3  # the empty partition has nothing to read
    rows = df.select("stream", "offset", "body").collect()
    by_stream: dict[str, list[tuple[int, dict[str, int]]]] = {}
    for r in rows:
        by_stream.setdefault(r.stream, []).append((r.offset, json.loads(r.body)))
    assert {s: len(v) for s, v in by_stream.items()} == {
        "ss-batch-0": 30, "ss-batch-1": 10, "ss-batch-3": 25}
    for stream, got in by_stream.items():
        p = int(stream.rsplit("-", 1)[1])
        assert sorted(got, key=lambda x: x[0]) == [(n, {"p": p, "n": n}) for n in range(counts[p])]


def test_stream_read_stopped_mid_stream_restarts_exactly_once_per_partition(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    create_super_stream(broker, "ss-restart")
    fill(broker, "ss-restart", [100, 60, 80, 40])

    def start(**trigger: Any) -> Any:
        writer = (
            spark.readStream.format("roost").option("url", broker.url)
            .option("superStream", "ss-restart").option("streamPort", broker.stream_port)
            .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", 20)
            .load()
            .selectExpr("stream", "offset", "CAST(body AS STRING) AS body")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )
        return writer.trigger(**trigger).start() if trigger else writer.start()

    query = start()  # back-to-back micro-batches of 20 rows, 5 from each partition
    deadline = time.monotonic() + 90
    while not query.recentProgress and time.monotonic() < deadline:
        assert query.exception() is None
        time.sleep(0.05)
    first = query.recentProgress[0]
    query.stop()
    assert query.exception() is None
    assert first["numInputRows"] == 20
    assert json.loads(first["sources"][0]["endOffset"])["offsets"] == {
        f"ss-restart-{p}": 5 for p in range(PARTITIONS)}
    done = len(spark.read.parquet(str(tmp_path / "out")).collect())
    assert 20 <= done < 280  # really stopped mid-stream
    fill(broker, "ss-restart", [5, 5, 5, 5], start=1000)  # published while it is stopped
    query = start(availableNow=True)
    assert query.awaitTermination(120), "the availableNow query did not end"
    assert query.exception() is None
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    seen = sorted((r.stream, r.offset) for r in out)
    expected = sorted((f"ss-restart-{p}", o) for p, n in enumerate([100, 60, 80, 40])
                      for o in range(n + 5))
    assert seen == expected  # every (partition, offset) exactly once
    assert all(json.loads(r.body)["p"] == int(r.stream.rsplit("-", 1)[1]) for r in out)


def test_an_unknown_super_stream_is_a_clear_error(spark: Any, broker: RoostProcess) -> None:
    with pytest.raises(Exception, match="no super stream 'ss-missing'"):
        read(spark, broker, "ss-missing").collect()
    from roost.pipeline.superstream import partitions

    with pytest.raises(RoostError, match="stream port"):
        partitions(broker.url, "x", stream_port=1)
