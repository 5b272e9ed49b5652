"""The roost data source end to end on a real SparkSession and a real broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pika
import pytest

from roost.amqp import codec_methods as m
from roost.pipeline.amqp import Client
from tests.support import RoostProcess


def fill(broker: RoostProcess, stream: str, start: int, count: int) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    ch.queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
    for i in range(start, start + count):
        ch.basic_publish(
            "",
            stream,
            json.dumps({"n": i}).encode(),
            pika.BasicProperties(content_type="application/json", headers={"k": str(i % 3)}),
        )
    conn.close()


def read_all(broker: RoostProcess, stream: str) -> list[bytes]:
    with Client(broker.url) as client:
        end = client.stream_info(stream)["x-stream-next-offset"]
        return [d.body for d in client.read_range(stream, 0, end)]


def test_batch_read_partitions_and_columns(spark: Any, broker: RoostProcess) -> None:
    fill(broker, "batch-in", 0, 100)
    df = (
        spark.read.format("roost")
        .option("url", broker.url)
        .option("stream", "batch-in")
        .option("numPartitions", 3)
        .option("startingOffsets", 10)
        .load()
    )
    assert df.rdd.getNumPartitions() == 3
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(10, 100))
    assert json.loads(rows[0].body) == {"n": 10}
    assert rows[0].headers == {"k": "1"} and rows[0].content_type == "application/json"


def test_stream_read_restart_from_checkpoint_is_exactly_once(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    fill(broker, "orders", 0, 50)

    def run_once() -> None:
        query = (
            spark.readStream.format("roost")
            .option("url", broker.url)
            .option("stream", "orders")
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", 20)
            .load()
            .selectExpr("offset", "CAST(body AS STRING) AS body")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run_once()
    fill(broker, "orders", 50, 30)  # published while the query is stopped
    run_once()
    offsets = [r.offset for r in spark.read.parquet(str(tmp_path / "out")).collect()]
    assert sorted(offsets) == list(range(80))  # each exactly once


def test_stream_write_back_is_effectively_once(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    fill(broker, "src", 0, 40)
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    conn.channel().queue_declare("dst", durable=True, arguments={"x-queue-type": "stream"})
    conn.close()

    def run_once(checkpoint: Path) -> None:
        query = (
            spark.readStream.format("roost")
            .option("url", broker.url)
            .option("stream", "src")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(body AS STRING) AS body")
            .writeStream.format("roost")
            .option("url", broker.url)
            .option("stream", "dst")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run_once(tmp_path / "ckpt")
    # simulate a batch that wrote but failed before its commit was recorded: drop the
    # last commit, so Spark reruns that batch on restart with the same query id
    commits = sorted((tmp_path / "ckpt" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run_once(tmp_path / "ckpt")
    bodies = read_all(broker, "dst")
    assert sorted(json.loads(b)["n"] for b in bodies) == list(range(40))


def test_batch_write_with_confirms(spark: Any, broker: RoostProcess) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    conn.channel().queue_declare("bw", durable=True, arguments={"x-queue-type": "stream"})
    conn.close()
    df = spark.createDataFrame(
        [(f"r{i}", f"{i}") for i in range(25)], "body string, message_id string"
    )
    df.write.format("roost").option("url", broker.url).option("stream", "bw").mode("append").save()
    assert sorted(read_all(broker, "bw")) == sorted(f"r{i}".encode() for i in range(25))


def test_clear_errors(spark: Any, broker: RoostProcess) -> None:
    with pytest.raises(Exception, match="no stream 'missing'"):
        spark.read.format("roost").option("url", broker.url).option(
            "stream", "missing"
        ).load().collect()
    bad = broker.url.replace("guest:guest", "guest:wrong")
    with pytest.raises(Exception, match=r"403|ACCESS_REFUSED"):
        spark.read.format("roost").option("url", bad).option("stream", "x").load().collect()
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    ch.queue_declare("classic-q")
    ch.basic_publish("", "classic-q", b"keep me")
    conn.close()
    with pytest.raises(Exception, match="'classic-q' is not a stream"):
        spark.read.format("roost").option("url", broker.url).option(
            "stream", "classic-q"
        ).load().collect()
    with Client(broker.url) as client:  # the probe put the classic queue's message back
        client.call(m.QueueDeclare(queue="classic-q", passive=True), m.QueueDeclareOk)
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    assert conn.channel().queue_declare("classic-q", passive=True).method.message_count == 1
    conn.close()
    with pytest.raises(Exception, match="not an amqp://"):
        spark.read.format("roost").option("url", "http://x").option("stream", "s").load().collect()
