"""The roost data source's write side: where rows go, and failing loudly instead of
losing them (a missing target, rows that reach no queue, a nacked batch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pika
import pytest

from roost.pipeline.amqp import Client
from tests.spark.stream_contents import messages
from tests.support import RoostProcess


def declare(broker: RoostProcess, *streams: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    for stream in streams:
        ch.queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
    conn.close()


def stream_rows(broker: RoostProcess, stream: str) -> list[tuple[str, str, bytes, str | None]]:
    """(exchange, routing key, body, message id) of every message in ``stream``."""
    return [
        (d.exchange, d.routing_key, d.body, d.properties[8]) for d in messages(broker.url, stream)
    ]


def write(df: Any, broker: RoostProcess, **options: Any) -> None:
    writer = df.write.format("roost").option("url", broker.url).mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_batch_write_with_confirms_to_the_default_exchange(
    spark: Any, broker: RoostProcess
) -> None:
    declare(broker, "bw")
    df = spark.createDataFrame(
        [(f"r{i}", f"{i}", {"n": f"{i}"} if i % 2 else None) for i in range(25)],
        "body string, message_id string, headers map<string,string>",
    ).repartition(2)
    # a stream through the default exchange: rows go as batched publishes, 10 per batch
    write(df, broker, stream="bw", producerName="bw-writer", confirmBatch=10)
    found = messages(broker.url, "bw")
    assert sorted((d.body, d.properties[8]) for d in found) == sorted(
        (f"r{i}".encode(), f"{i}") for i in range(25)
    )
    assert {(d.exchange, d.routing_key) for d in found} == {("", "bw")}
    for d in found:  # the headers column, plus the stream's own headers on delivery
        i = int(d.properties[8])
        own = {k: v for k, v in (d.properties[2] or {}).items() if not k.startswith("x-")}
        assert own == ({"n": f"{i}"} if i % 2 else {})
    # one producer per partition, its ids counted row by row
    with Client(broker.url) as client:
        producers = client.stream_info("bw")["x-stream-producers"]
    assert set(producers) == {"bw-writer-p0", "bw-writer-p1"}
    assert sum(producers.values()) == 25


def test_exchange_routing_key_option_and_column(spark: Any, broker: RoostProcess) -> None:
    declare(broker, "by-option", "by-column-a", "by-column-b")
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    ch.queue_bind("by-option", "amq.direct", "opt")
    ch.queue_bind("by-column-a", "amq.direct", "a")
    ch.queue_bind("by-column-b", "amq.direct", "b")
    conn.close()
    # routingKey option for every row
    plain = spark.createDataFrame([("o1",), ("o2",)], "body string")
    write(plain, broker, exchange="amq.direct", routingKey="opt")
    assert sorted(stream_rows(broker, "by-option")) == [
        ("amq.direct", "opt", b"o1", None),
        ("amq.direct", "opt", b"o2", None),
    ]
    # a routing_key column routes row by row; a null falls back to the option
    keyed = spark.createDataFrame(
        [("x1", "a"), ("x2", "b"), ("x3", "a"), ("x4", None)], "body string, routing_key string"
    )
    write(keyed, broker, exchange="amq.direct", routingKey="opt")
    assert sorted(b for _, _, b, _ in stream_rows(broker, "by-column-a")) == [b"x1", b"x3"]
    assert [b for _, _, b, _ in stream_rows(broker, "by-column-b")] == [b"x2"]
    assert sorted(b for _, _, b, _ in stream_rows(broker, "by-option")) == [b"o1", b"o2", b"x4"]


def test_writing_to_a_missing_stream_or_exchange_fails_clearly(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    df = spark.createDataFrame([("lost?",)], "body string")
    with pytest.raises(Exception, match="no stream or queue 'nowhere' to write to"):
        write(df, broker, stream="nowhere")
    with pytest.raises(Exception, match="no exchange 'no-such-x' to write to"):
        write(df, broker, exchange="no-such-x", routingKey="k")
    source = (
        spark.readStream.format("rate").option("rowsPerSecond", 1).load().selectExpr("'b' AS body")
    )
    query = (
        source.writeStream.format("roost")
        .option("url", broker.url)
        .option("stream", "nowhere")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    with pytest.raises(Exception, match="no stream or queue 'nowhere' to write to"):
        query.awaitTermination(60)


def test_rows_that_reach_no_queue_fail_the_job(spark: Any, broker: RoostProcess) -> None:
    declare(broker, "routed")
    df = spark.createDataFrame(
        [("a", "routed"), ("b", "unbound-key")], "body string, routing_key string"
    )
    # the default exchange: the second row names a queue that does not exist
    with pytest.raises(Exception, match=r"reached no queue \(312 NO_ROUTE"):
        write(df, broker)
    # an exchange with nothing bound for the key
    with pytest.raises(Exception, match=r"reached no queue.*exchange 'amq.topic'"):
        write(df.select("body"), broker, exchange="amq.topic", routingKey="nobody.listens")


def test_a_nacked_batch_fails_the_job(spark: Any, broker: RoostProcess) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    ch.queue_declare("full", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    conn.close()
    df = spark.createDataFrame([(f"r{i}",) for i in range(10)], "body string")
    with pytest.raises(Exception, match=r"refused \(nacked\)"):
        write(df, broker, stream="full")
