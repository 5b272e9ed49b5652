"""Chunked deliveries as Arrow record batches: the data source's columns (``SCHEMA`` of
pipeline/source.py), decoded column by column on the executor."""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import Any

from roost.pipeline.chunks import ChunkColumns


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)



def record_batch(columns: ChunkColumns, stream: str | None = None) -> Any:
    """The data source's columns (SCHEMA) as one Arrow record batch; with ``stream``,
    and a last column ``stream`` holding it (SUPER_SCHEMA)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    n = len(columns)
    schema = arrow_schema(with_stream=stream is not None)
    offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.offsets)])
    stamps = pa.Array.from_buffers(
        pa.timestamp("ms", tz="UTC"), n, [None, pa.py_buffer(columns.stamps)]
    ).cast(schema.field("timestamp").type)
    ends = array("i", accumulate(map(len, columns.bodies), initial=0))
    bodies = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(ends), pa.py_buffer(b"".join(columns.bodies))]
    )
    runs = [run for run in columns.runs if run[3]]
    counts = [run[3] for run in runs]
    names: list[list[Any]] = [[], [], [], [], []]  # exchange, key, type, message id, corr id
    pairs: list[list[tuple[str, str | None]]] = []
    for exchange, routing_key, props, _count in runs:
        for column, value in zip(
            names, (exchange, routing_key, props[0], props[8], props[5]), strict=True
        ):
            column.append(value)
        headers = props[2]
        pairs.append(
            [(k, v if type(v) is str else _text(v)) for k, v in headers.items()] if headers else []
        )
    if len(runs) == 1:
        strings = [pa.repeat(pa.scalar(values[0], type=pa.string()), n) for values in names]
    else:
        which = array("i")
        for i, count in enumerate(counts):
            which += array("i", (i,)) * count
        take = pa.array(which)
        strings = [pa.array(values, type=pa.string()).take(take) for values in names]
    exchanges, keys, ctypes, mids, cids = strings
    headers_col = _map_column(pairs, counts)
    arrays = [offsets, stamps, exchanges, keys, headers_col, ctypes, mids, cids, bodies]
    if stream is not None:
        arrays.append(pa.repeat(pa.scalar(stream, type=pa.string()), n))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _map_column(pairs: list[list[tuple[str, str | None]]], counts: list[int]) -> Any:
    """A map<string,string> column holding ``pairs[i]`` ``counts[i]`` times over, built
    from its offsets, keys and values (``pa.repeat`` of a map costs microseconds a row)."""
    import pyarrow as pa

    offsets = array("i", (0,))
    keys: list[str] = []
    values: list[str | None] = []
    total = 0
    for run, count in zip(pairs, counts, strict=True):
        width = len(run)
        if not width:
            offsets += array("i", (total,)) * count
            continue
        offsets.extend(range(total + width, total + width * count + 1, width))
        total += width * count
        keys += [k for k, _ in run] * count
        values += [v for _, v in run] * count
    return pa.MapArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)]),
        pa.array(keys, type=pa.string()),
        pa.array(values, type=pa.string()),
    )


def arrow_schema(*, with_stream: bool = False) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("exchange", pa.string()),
            ("routing_key", pa.string()),
            ("headers", pa.map_(pa.string(), pa.string())),
            ("content_type", pa.string()),
            ("message_id", pa.string()),
            ("correlation_id", pa.string()),
            ("body", pa.binary()),
            *([("stream", pa.string())] if with_stream else []),
        ]
    )
