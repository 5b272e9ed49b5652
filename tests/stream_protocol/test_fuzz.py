"""Whatever bytes arrive, the stream FrameReader yields frames or raises
StreamProtocolError, the same whether fed whole or byte by byte; valid streams give the
same frames however split; chunk parsing holds the same invariant."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.stream_protocol.chunks import chunk_records
from roost.stream_protocol.codec import FrameReader, _NeedData, encode
from roost.stream_protocol.constants import COMMAND_NAMES, RESPONSE_FLAG
from roost.stream_protocol.errors import StreamProtocolError
from roost.stream_protocol.frames import Frame
from tests.stream_protocol.samples import CHUNK, FROM_CLIENT, FROM_SERVER

ROLES = st.sampled_from(["server", "client"])
SAMPLES = {"server": FROM_CLIENT, "client": FROM_SERVER}


def _run(chunks: list[bytes], role: str) -> tuple[list[Frame], int | None]:
    reader = FrameReader(role=role, frame_max=4096)
    out: list[Frame] = []
    try:
        for chunk in chunks:
            reader.feed(chunk)
            while not isinstance(frame := reader.next_frame(), _NeedData):
                out.append(frame)
    except StreamProtocolError as exc:
        return out, exc.response_code
    return out, None


_KEYS = st.sampled_from(sorted(COMMAND_NAMES) + [k | RESPONSE_FLAG for k in COMMAND_NAMES])


@st.composite
def plausible_stream(draw: st.DrawFn) -> bytes:
    """Frames with a real key and version 1 or 2 and a random body."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        body = draw(_KEYS).to_bytes(2, "big") + draw(st.sampled_from([b"\0\1", b"\0\2"]))
        body += draw(st.binary(max_size=60))
        parts.append(len(body).to_bytes(4, "big") + body)
    return b"".join(parts)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=200), plausible_stream()), role=ROLES)
def test_any_bytes_give_frames_or_the_typed_error_whole_and_byte_by_byte(
    data: bytes, role: str
) -> None:
    assert _run([data], role) == _run([data[i : i + 1] for i in range(len(data))], role)


@settings(max_examples=200)
@given(role=ROLES, cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_valid_streams_split_anywhere_give_the_same_frames(role: str, cuts: list[int]) -> None:
    frames = SAMPLES[role]
    stream = b"".join(encode(f) for f in frames)
    points = sorted({cut % (len(stream) + 1) for cut in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert _run(chunks, role) == (frames, None)


@settings(max_examples=300)
@given(role=ROLES, index=st.integers(0, 100_000), byte=st.integers(0, 255))
def test_one_changed_byte_gives_frames_or_the_typed_error(role: str, index: int, byte: int) -> None:
    stream = bytearray(b"".join(encode(f) for f in SAMPLES[role]))
    stream[index % len(stream)] = byte
    _run([bytes(stream)], role)


@settings(max_examples=300)
@given(index=st.integers(0, 10_000), byte=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_mangled_chunks_give_records_or_the_typed_error(index: int, byte: int, cut: int) -> None:
    chunk = bytearray(CHUNK)
    chunk[index % len(chunk)] = byte
    for check_crc in (True, False):
        for candidate in (bytes(chunk), bytes(chunk[: cut % (len(chunk) + 1)])):
            with contextlib.suppress(StreamProtocolError):
                chunk_records(candidate, check_crc=check_crc)
