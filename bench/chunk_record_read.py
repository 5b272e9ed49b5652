"""In-process: how long a store read of chunk records (``StreamReader.next_chunk``, what
the Spark source's chunked AMQP reads ask of the store) takes per row, for rows written as
rstream writes them with one application property, read the general way (every message
decoded, mapped to Properties, encoded) and the short way (stream_protocol/chunk_mapping.py),
and for bare bodies. No broker, no RabbitMQ (an in-process micro-benchmark of one code
path; bench/spark_superstream.py has the end-to-end reads with RabbitMQ beside them).

    .venv/bin/python bench/chunk_record_read.py [--rows 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from rstream import AMQPMessage

from roost.codecs.stream_message import message_prefix
from roost.store.stream_chunk import map_amqp10_with
from roost.store.stream_log import StreamLog
from roost.store.stream_reader import StreamReader
from roost.stream_protocol.chunk_mapping import chunk_message_record
from roost.stream_protocol.publishers import chunk_message_values

_U32 = struct.Struct(">I")


def read_us(log: StreamLog, rows: int) -> float:
    reader = StreamReader(log, 0)
    began, count = time.perf_counter(), 0
    while (chunk := reader.next_chunk(1 << 20, None)) is not None:
        count += chunk[2]
    reader.close()
    assert count == rows, count
    return (time.perf_counter() - began) / rows * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    logs = {}
    for kind, make in (("header", lambda i: AMQPMessage(body=b"x" * 100,
                                                         application_properties={"k": i})),
                       ("bare", lambda i: AMQPMessage(body=b"x" * 100))):
        log = logs[kind] = StreamLog(Path(tempfile.mkdtemp()))
        messages = [bytes(make(i)) for i in range(args.rows)]
        for start in range(0, args.rows, 1000):
            part = messages[start : start + 1000]
            log.append_chunk(message_prefix("", "s"),
                             b"".join(_U32.pack(len(m)) + m for m in part), len(part),
                             timestamp_ms=1)
    times: dict[str, list[float]] = {}
    for _ in range(args.runs):  # interleaved, so load beside it hits all alike
        map_amqp10_with(chunk_message_values)
        times.setdefault("a header each, the general way", []).append(
            read_us(logs["header"], args.rows))
        map_amqp10_with(chunk_message_values, chunk_message_record)
        times.setdefault("a header each, the short way", []).append(
            read_us(logs["header"], args.rows))
        times.setdefault("bare bodies", []).append(read_us(logs["bare"], args.rows))
    print(f"{args.rows:,} rows of 100 B in chunk records of 1,000, medians of {args.runs}")
    for label, values in times.items():
        print(f"{label:36} {statistics.median(values):6.2f} us a row")
    for log in logs.values():
        log.close()


if __name__ == "__main__":
    main()
