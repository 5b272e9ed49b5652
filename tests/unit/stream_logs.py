"""Stream logs in the unit tests: chunk entry bytes, a log filled with records, the offsets
read back."""

from __future__ import annotations

import struct

from roost.store.stream_log import StreamLog
from roost.store.stream_reader import Record, StreamReader

_U32 = struct.Struct(">I")


def data_section(body: bytes) -> bytes:
    return b"\x00Su\xa0" + bytes([len(body)]) + body


def entries(messages: list[bytes]) -> bytes:
    return b"".join(_U32.pack(len(m)) + m for m in messages)


def fill(log: StreamLog, n: int, ts0: int = 1000, size: int = 100) -> None:
    for i in range(n):
        log.append(
            b"%05d" % i + b"x" * size, timestamp_ms=ts0 + i, producer="p", publishing_id=i + 1
        )


def every_record(reader: StreamReader) -> list[Record]:
    """Every record from the reader's start up to the tail, the reader closed after."""
    with reader:
        out = []
        while (record := reader.next()) is not None:
            out.append(record)
        return out


def offsets(log: StreamLog, start: int = 0) -> list[int]:
    return [r.offset for r in every_record(log.reader(start))]
