"""The layout of a chunk record (store/stream_chunk.py has the record itself): what the
stream adapter reads of it to deliver one as it is stored, and what it may publish into
one, shared by the store and the adapter (stdlib only, no I/O).

A chunk record's producer-name length has bit ``CHUNK_FLAG`` set (names never exceed
255 bytes, so ``NAME_MASK`` keeps the length); its payload is ``u16 exchange | u16
routing key | osiris chunk header | entries``.
"""

from __future__ import annotations

import struct
from typing import Final

CHUNK_FLAG: Final = 0x8000
NAME_MASK: Final = 0x7FFF
# Roost's publish form for a chunk record (docs/streams.md): the body is the entries
ENTRIES_CONTENT_TYPE: Final = "application/x-roost-stream-entries"
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")


def storable(message: bytes) -> bool:
    """Whether a chunk record can hold ``message``: anything not empty (an AMQP 1.0
    message that is not one data section is mapped on reading, stream_chunk.py)."""
    return bool(message)


def osiris_start(data: bytes | memoryview, payload: int) -> int:
    """Where the osiris chunk header starts in a chunk record whose payload starts at
    ``payload`` (after the exchange and routing key)."""
    pos: int = payload + 2 + _U16.unpack_from(data, payload)[0]
    end: int = pos + 2 + _U16.unpack_from(data, pos)[0]
    return end


def chunk_count(data: bytes | memoryview, payload: int) -> int:
    """How many messages the chunk record whose payload starts at ``payload`` holds."""
    return int(_U32.unpack_from(data, osiris_start(data, payload) + 4)[0])
