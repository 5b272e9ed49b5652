"""The roost data source's read side end to end on a real SparkSession and a real broker."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import pika
import pytest

from roost.amqp import codec_methods as m
from roost.pipeline.amqp import Client
from tests.spark.stream_contents import messages
from tests.support import RoostProcess, free_port


def fill(broker: RoostProcess, stream: str, start: int, count: int) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    ch.queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
    for i in range(start, start + count):
        ch.basic_publish(
            "",
            stream,
            json.dumps({"n": i}).encode(),
            pika.BasicProperties(
                content_type="application/json",
                headers={"k": str(i % 3)},
                message_id=f"m{i}",
                correlation_id=f"c{i}",
            ),
        )
    conn.close()


def read_all(broker: RoostProcess, stream: str) -> list[bytes]:
    return [d.body for d in messages(broker.url, stream)]


def append_times(broker: RoostProcess, stream: str) -> dict[int, int]:
    """offset -> the broker's append time (ms), from the x-stream-timestamp header."""
    return {
        d.properties[2]["x-stream-offset"]: d.properties[2]["x-stream-timestamp"]
        for d in messages(broker.url, stream)
    }


def roost_read(spark: Any, broker: RoostProcess, stream: str, **options: Any) -> Any:
    reader = spark.read.format("roost").option("url", broker.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_schema_is_exactly_the_documented_one(spark: Any, broker: RoostProcess) -> None:
    from pyspark.sql.types import (
        BinaryType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fill(broker, "schema-in", 0, 1)
    expected = StructType(
        [
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("exchange", StringType()),
            StructField("routing_key", StringType()),
            StructField("headers", MapType(StringType(), StringType())),
            StructField("content_type", StringType()),
            StructField("message_id", StringType()),
            StructField("correlation_id", StringType()),
            StructField("body", BinaryType()),
        ]
    )
    assert roost_read(spark, broker, "schema-in").schema == expected
    stream = spark.readStream.format("roost").option("url", broker.url)
    assert stream.option("stream", "schema-in").load().schema == expected


def test_batch_read_partitions_and_column_values(spark: Any, broker: RoostProcess) -> None:
    fill(broker, "batch-in", 0, 100)
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    ch.queue_bind("batch-in", "amq.direct", "via-direct")
    ch.basic_publish("amq.direct", "via-direct", b"routed", pika.BasicProperties(message_id="d"))
    conn.close()
    df = roost_read(spark, broker, "batch-in", numPartitions=3, startingOffsets=10)
    assert df.rdd.getNumPartitions() == 3
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(10, 101))
    times = append_times(broker, "batch-in")
    for r in rows[:-1]:
        n = r.offset
        assert json.loads(r.body) == {"n": n}
        assert (r.exchange, r.routing_key) == ("", "batch-in")
        assert r.headers == {"k": str(n % 3)} and r.content_type == "application/json"
        assert (r.message_id, r.correlation_id) == (f"m{n}", f"c{n}")
        # Spark hands timestamps back in the session's (local) zone, naive
        assert round(r.timestamp.timestamp() * 1000) == times[n]
    last = rows[-1]
    assert (last.exchange, last.routing_key, last.body) == ("amq.direct", "via-direct", b"routed")
    assert (last.message_id, last.correlation_id, last.content_type) == ("d", None, None)
    assert last.headers == {}


def test_batch_read_of_an_offset_range(spark: Any, broker: RoostProcess) -> None:
    fill(broker, "range-in", 0, 50)
    df = roost_read(spark, broker, "range-in", startingOffsets=12, endingOffsets=31)
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(12, 31))
    df = roost_read(spark, broker, "range-in", endingOffsets=5, numPartitions=4)
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(5))


def test_batch_read_of_a_time_range(spark: Any, broker: RoostProcess) -> None:
    fill(broker, "time-in", 0, 10)
    time.sleep(0.05)
    start_ms = int(time.time() * 1000)
    time.sleep(0.05)
    fill(broker, "time-in", 10, 10)
    time.sleep(0.05)
    end_ms = int(time.time() * 1000)
    time.sleep(0.05)
    fill(broker, "time-in", 20, 10)
    end_iso = datetime.datetime.fromtimestamp(end_ms / 1000, datetime.UTC).isoformat()

    def offsets(**options: Any) -> list[int]:
        df = roost_read(spark, broker, "time-in", **options)
        return sorted(r.offset for r in df.select("offset").collect())

    # milliseconds, and an ISO-8601 string (with its zone) for the exclusive end
    assert offsets(startingTimestamp=start_ms, endingTimestamp=end_iso) == list(range(10, 20))
    assert offsets(startingTimestamp=start_ms) == list(range(10, 30))
    assert offsets(endingTimestamp=end_ms, startingOffsets=5) == list(range(5, 20))
    assert offsets(startingTimestamp=int(time.time() * 1000) + 60_000) == []
    with pytest.raises(Exception, match="startingOffsets or startingTimestamp, not both"):
        offsets(startingTimestamp=start_ms, startingOffsets=0)
    with pytest.raises(Exception, match="bad timestamp 'yesterday'"):
        offsets(startingTimestamp="yesterday")


def test_max_records_per_trigger_bounds_every_batch(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    fill(broker, "limited", 0, 70)
    query = (
        spark.readStream.format("roost")
        .option("url", broker.url)
        .option("stream", "limited")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", 20)
        .option("numPartitions", 3)
        .load()
        .select("offset")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 70
    assert len(sizes) >= 4 and all(size <= 20 for size in sizes), sizes
    offsets = [r.offset for r in spark.read.parquet(str(tmp_path / "out")).collect()]
    assert sorted(offsets) == list(range(70))
    # each micro-batch was read as 3 input partitions: the file sink writes one file each
    assert len(list((tmp_path / "out").glob("part-*.parquet"))) == 3 * len(sizes)


def test_stream_read_stopped_mid_stream_restarts_exactly_once(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    fill(broker, "orders", 0, 300)

    def start(**trigger: Any) -> Any:
        writer = (
            spark.readStream.format("roost")
            .option("url", broker.url)
            .option("stream", "orders")
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", 10)
            .load()
            .selectExpr("offset", "CAST(body AS STRING) AS body")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )
        return writer.trigger(**trigger).start() if trigger else writer.start()

    query = start()  # back-to-back micro-batches of 10 rows
    deadline = time.monotonic() + 90
    while not query.recentProgress and time.monotonic() < deadline:
        assert query.exception() is None
        time.sleep(0.05)
    query.stop()  # after the first batch, while the next ones run
    assert query.exception() is None
    done = len(spark.read.parquet(str(tmp_path / "out")).collect())
    assert 10 <= done < 300  # really stopped mid-stream
    fill(broker, "orders", 300, 30)  # published while the query is stopped
    query = start(availableNow=True)
    query.awaitTermination(120)
    assert query.exception() is None
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.offset for r in out) == list(range(330))  # each exactly once
    assert all(json.loads(r.body) == {"n": r.offset} for r in out)


def test_stream_read_from_latest_skips_what_was_there(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    fill(broker, "tail", 0, 30)
    query = (
        spark.readStream.format("roost")
        .option("url", broker.url)
        .option("stream", "tail")
        .option("startingOffsets", "latest")
        .load()
        .select("offset", "body")
        .writeStream.format("memory")
        .queryName("tail_rows")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        # the query picks its start when it plans the first batch: publish one message at
        # a time until one arrives, so some surely come after that start
        deadline = time.monotonic() + 90
        n = 30
        while not spark.table("tail_rows").count() and time.monotonic() < deadline:
            assert query.exception() is None
            fill(broker, "tail", n, 1)
            n += 1
            time.sleep(0.5)
        rows = spark.table("tail_rows").collect()
    finally:
        query.stop()
    assert rows
    assert all(r.offset >= 30 and json.loads(r.body) == {"n": r.offset} for r in rows)


def test_stream_read_from_a_timestamp_starts_there(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    fill(broker, "since", 0, 10)
    time.sleep(0.05)
    start_ms = int(time.time() * 1000)
    time.sleep(0.05)
    fill(broker, "since", 10, 10)
    query = (
        spark.readStream.format("roost")
        .option("url", broker.url)
        .option("stream", "since")
        .option("startingTimestamp", start_ms)
        .load()
        .select("offset")
        .writeStream.format("memory")
        .queryName("since_rows")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the availableNow query did not end"
        assert query.exception() is None
    finally:
        query.stop()
    offsets = sorted(r.offset for r in spark.table("since_rows").collect())
    assert offsets == list(range(10, 20))


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
            .option("maxRecordsPerTrigger", 10)  # several batches: ids must rise across them
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
    assert len(commits) == 4
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run_once(tmp_path / "ckpt")
    bodies = read_all(broker, "dst")
    assert sorted(json.loads(b)["n"] for b in bodies) == list(range(40))


def test_clear_errors(spark: Any, broker: RoostProcess) -> None:
    with pytest.raises(Exception, match="no stream 'missing'"):
        roost_read(spark, broker, "missing").collect()
    bad = broker.url.replace("guest:guest", "guest:wrong")
    with pytest.raises(Exception, match=r"as user 'guest'.*ACCESS_REFUSED"):
        spark.read.format("roost").option("url", bad).option("stream", "x").load().collect()
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    ch.queue_declare("classic-q")
    ch.basic_publish("", "classic-q", b"keep me")
    conn.close()
    with pytest.raises(Exception, match="'classic-q' is not a stream"):
        roost_read(spark, broker, "classic-q").collect()
    with Client(broker.url) as client:  # the probe put the classic queue's message back
        client.call(m.QueueDeclare(queue="classic-q", passive=True), m.QueueDeclareOk)
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    assert conn.channel().queue_declare("classic-q", passive=True).method.message_count == 1
    conn.close()
    with pytest.raises(Exception, match="not an amqp://"):
        spark.read.format("roost").option("url", "http://x").option("stream", "s").load().collect()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("amqp://guest:guest@no-such-host.invalid:5672/%2F", r"cannot connect to no-such-host"),
        ("amqp://guest:guest@127.0.0.1:{port}/%2F", r"cannot connect to 127\.0\.0\.1:\d+"),
        ("amqp://guest:guest@127.0.0.1:{amqp}/nowhere", r"530 cannot open vhost 'nowhere'"),
    ],
)
def test_wrong_url_is_a_clear_error(
    spark: Any, broker: RoostProcess, tmp_path: Path, url: str, message: str
) -> None:
    url = url.format(port=free_port(), amqp=broker.amqp_port)
    with pytest.raises(Exception, match=message):
        spark.read.format("roost").option("url", url).option("stream", "s").load().collect()
    query = (
        spark.readStream.format("roost")
        .option("url", url)
        .option("stream", "s")
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=message):
        query.awaitTermination(60)
