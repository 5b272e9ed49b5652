"""The Spark reader's column-wise chunk decoding (``ChunkColumns`` and ``record_batch``)
gives, row for row, what decoding each record on its own (``records``) gives: runs of
equal properties, properties that change every record, several batches out of one run,
chunks cut anywhere between records."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.codecs.stream_message import encode_stream_message
from roost.pipeline.chunks import ChunkColumns, records
from roost.pipeline.record_batches import record_batch
from roost.store.stream_log import StreamLog

NONE14: tuple[Any, ...] = (None,) * 14


def _props(content_type: str | None = None, headers: dict[str, Any] | None = None,
           correlation_id: str | None = None, message_id: str | None = None) -> tuple[Any, ...]:
    values = list(NONE14)
    values[0], values[2], values[3] = content_type, headers, 2
    values[5], values[8] = correlation_id, message_id
    return tuple(values)


# (exchange, routing key, properties) a record may carry; index 4 varies per record
KINDS = [
    ("", "s", _props()),
    ("", "s", _props("text/plain", {"k": "v", "n": 7, "b": b"\xff", "none": None}, "c-1")),
    ("amq.topic", "a.b", _props(headers={})),
    ("", "other", NONE14),
    None,  # a fresh message id each record: no two records share their properties
]


def _expected(data: bytes) -> list[dict[str, Any]]:
    rows = []
    for offset, ts, exchange, key, props, body in records(data):
        headers = props[2] or {}
        rows.append({
            "offset": offset,
            "timestamp": datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC),
            "exchange": exchange,
            "routing_key": key,
            "headers": [
                (k, v if isinstance(v, str) or v is None else
                 (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)))
                for k, v in headers.items()
            ],
            "content_type": props[0],
            "message_id": props[8],
            "correlation_id": props[5],
            "body": body,
        })
    return rows


@settings(max_examples=40, deadline=None)
@given(
    kinds=st.lists(st.integers(0, len(KINDS) - 1), min_size=1, max_size=120),
    chunk_bytes=st.sampled_from([1, 300, 4096, 1 << 20]),
    batch_rows=st.sampled_from([1, 7, 50, 10_000]),
)
def test_columns_match_record_by_record_decoding(
    tmp_path_factory: Any, kinds: list[int], chunk_bytes: int, batch_rows: int
) -> None:
    directory: Path = tmp_path_factory.mktemp("log")
    log = StreamLog(directory)
    for i, kind in enumerate(kinds):
        exchange, key, props = KINDS[kind] or ("", "s", _props(message_id=f"m-{i}"))
        body = b"%d:" % i + b"\x00x" * (i % 5)
        log.append(encode_stream_message(exchange, key, props, body), timestamp_ms=1_000 + i)
    reader = log.reader(0)
    chunks = []
    while (chunk := reader.next_chunk(chunk_bytes, None)) is not None:
        chunks.append(chunk[3])
    reader.close()
    log.close()
    expected = [row for data in chunks for row in _expected(data)]
    got: list[dict[str, Any]] = []
    columns = ChunkColumns()
    for data in chunks:  # as read_partition does: a batch once enough rows are in
        columns.add(data)
        if len(columns) >= batch_rows:
            got += record_batch(columns).to_pylist()
            columns.clear()
    if len(columns):
        got += record_batch(columns).to_pylist()
    assert got == expected
