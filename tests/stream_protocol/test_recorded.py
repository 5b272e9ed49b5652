"""Golden bytes from a real broker: an rstream session with RabbitMQ 3.10.8's stream
plugin recorded by ``tests/record_wire.py`` (``data/rabbitmq-rstream.json``, five
connections: create, publish, offsets, consume, delete). Both directions decode, and the
codec re-encodes every frame to the recorded bytes; the one difference allowed is the
empty Subscribe property map, which rstream sends as a count of 0 and the codec (like
RabbitMQ's own encoder) leaves off. Delivered chunks carry the published records."""

from __future__ import annotations

import json
from pathlib import Path

from roost.stream_protocol import codec
from roost.stream_protocol import constants as c
from roost.stream_protocol.chunks import ChunkHeader, chunk_records
from roost.stream_protocol.frames import (
    Deliver,
    Frame,
    MetadataResponse,
    OpenResponse,
    Publish,
    PublishConfirm,
    PublishedBatch,
    Subscribe,
    Tune,
)

RECORDING = json.loads((Path(__file__).parent / "data" / "rabbitmq-rstream.json").read_text())


def _frames_and_bytes(raw: bytes, role: str) -> list[tuple[Frame, bytes]]:
    out = []
    pos = 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos : pos + 4], "big")
        one = raw[pos : pos + 4 + size]
        reader = codec.FrameReader(role=role)
        reader.feed(one)
        (frame,) = reader.frames()
        out.append((frame, one))
        pos += 4 + size
    return out


def test_every_recorded_frame_decodes_and_reencodes_byte_for_byte() -> None:
    assert "RabbitMQ 3.10" in RECORDING["recorded_with"]
    count = 0
    for conn in RECORDING["connections"]:
        for role, key in (("server", "client_to_server"), ("client", "server_to_client")):
            raw = bytes.fromhex(conn[key])
            reader = codec.FrameReader(role=role)
            reader.feed(raw)
            assert len(reader.frames()) == len(_frames_and_bytes(raw, role))
            for frame, one in _frames_and_bytes(raw, role):
                count += 1
                encoded = codec.encode(frame)
                if isinstance(frame, Subscribe) and not frame.properties:
                    assert one[4:] == encoded[4:] + b"\x00\x00\x00\x00"
                    assert codec.decode_frame(one[4:]) == codec.decode_frame(encoded[4:])
                else:
                    assert encoded == one, frame
    assert count > 60


def test_what_rabbitmq_said() -> None:
    server = [
        f for conn in RECORDING["connections"]
        for f, _ in _frames_and_bytes(bytes.fromhex(conn["server_to_client"]), "client")
    ]
    client = [
        f for conn in RECORDING["connections"]
        for f, _ in _frames_and_bytes(bytes.fromhex(conn["client_to_server"]), "server")
    ]
    tune = next(f for f in server if isinstance(f, Tune))
    assert (tune.frame_max, tune.heartbeat, tune.response) == (c.DEFAULT_FRAME_MAX, 60, False)
    assert any(isinstance(f, Tune) for f in client)  # rstream's answer
    opened = next(f for f in server if isinstance(f, OpenResponse))
    assert opened.response_code == c.OK and opened.properties["advertised_host"] == "127.0.0.1"
    assert any(isinstance(f, MetadataResponse) and f.streams[0].stream == "rec" for f in server)
    confirmed = [i for f in server if isinstance(f, PublishConfirm) for i in f.publishing_ids]
    published = [m.publishing_id for f in client if isinstance(f, Publish) for m in f.messages]
    assert sorted(confirmed) == sorted(published)
    batch = next(m for f in client if isinstance(f, Publish) for m in f.messages
                 if isinstance(m, PublishedBatch))
    assert batch.entry.records() == [b"s1", b"s2"]
    delivers = [f for f in server if isinstance(f, Deliver)]
    records = [r for d in delivers for r in chunk_records(d.chunk)]  # CRCs checked
    assert records == [b"m0", b"m1", b"m2", b"s1", b"s2"]
    headers = [ChunkHeader.unpack(d.chunk) for d in delivers]
    assert [h.chunk_id for h in headers] == [0, 1, 2, 3]
    assert headers[-1].num_entries == 1 and headers[-1].num_records == 2  # the sub-batch
    assert all(h.magic_version == c.CHUNK_MAGIC_VERSION and h.chunk_type == c.CHUNK_USER
               for h in headers)
    # as osiris sends it: the header as stored, then exactly data-length bytes
    assert all(len(d.chunk) == c.CHUNK_HEADER_SIZE + h.data_length
               for d, h in zip(delivers, headers, strict=True))
