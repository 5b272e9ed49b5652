"""Stream protocol codec: every frame round-trips in the role that reads it, split at
every offset; golden bytes from PROTOCOL.adoc and RabbitMQ's encoder; malformed input
with its response code; frame_max refused from the size field."""

from __future__ import annotations

import pytest

from roost.stream_protocol import constants as c
from roost.stream_protocol.codec import NEED_DATA, FrameReader, decode_frame, encode
from roost.stream_protocol.errors import StreamProtocolError
from roost.stream_protocol.frames import (
    ConsumerUpdateResponse,
    Credit,
    CreditResponse,
    Frame,
    Heartbeat,
    OffsetSpec,
    Open,
    OpenResponse,
    PeerProperties,
    Publish,
    PublishConfirm,
    PublishedMessage,
    Response,
    SaslAuthenticate,
    StoreOffset,
    Subscribe,
    Tune,
)
from tests.stream_protocol.samples import FROM_CLIENT, FROM_SERVER


def read_all(role: str, data: bytes, frame_max: int = 0) -> list[Frame]:
    reader = FrameReader(role=role, frame_max=frame_max)
    reader.feed(data)
    frames = reader.frames()
    assert reader.next_frame() is NEED_DATA
    return frames


@pytest.mark.parametrize(("role", "frames"), [("server", FROM_CLIENT), ("client", FROM_SERVER)])
def test_every_frame_round_trips_whole_and_split_everywhere(role: str, frames: list[Frame]) -> None:
    stream = b"".join(encode(f) for f in frames)
    assert read_all(role, stream) == frames
    for cut in range(len(stream) + 1):
        reader = FrameReader(role=role)
        reader.feed(stream[:cut])
        got = reader.frames()
        reader.feed(stream[cut:])
        assert got + reader.frames() == frames, cut


def test_every_command_key_has_a_sample() -> None:
    keys = {f.key if isinstance(f, Response) else f.KEY for f in FROM_CLIENT + FROM_SERVER}
    assert keys == set(c.COMMAND_NAMES)


GOLDEN: list[tuple[str, Frame, str]] = [
    ("client", Heartbeat(), "00000004 0017 0001"),
    ("server", PeerProperties(1, {"a": "b"}),
     "00000012 0011 0001 00000001 00000001 0001 61 0001 62"),
    ("client", Tune(1_048_576, 60), "0000000c 0014 0001 00100000 0000003c"),
    ("server", Tune(1_048_576, 60, response=True), "0000000c 8014 0001 00100000 0000003c"),
    ("server", Open(2, "/"), "0000000b 0015 0001 00000002 0001 2f"),
    ("client", OpenResponse(2, c.OK), "0000000a 8015 0001 00000002 0001"),
    ("client", OpenResponse(2, c.OK, {"k": "v"}),
     "00000014 8015 0001 00000002 0001 00000001 0001 6b 0001 76"),
    ("server", SaslAuthenticate(3, "PLAIN", b"\x00u\x00p"),
     "00000017 0013 0001 00000003 0005 504c41494e 00000004 00750070"),
    ("server", SaslAuthenticate(3, "EXTERNAL"),
     "00000016 0013 0001 00000003 0008 45585445524e414c ffffffff"),
    ("server", Credit(0, 10), "00000007 0009 0001 00 000a"),
    ("client", CreditResponse(c.SUBSCRIPTION_ID_DOES_NOT_EXIST, 9), "00000007 8009 0001 0004 09"),
    ("client", Response(c.DECLARE_PUBLISHER, 5, c.OK), "0000000a 8001 0001 00000005 0001"),
    ("server", StoreOffset("r", "s", 7),
     "00000012 000a 0001 0001 72 0001 73 0000000000000007"),
    ("server", Subscribe(1, 0, "s", OffsetSpec.first(), 10),
     "00000010 0007 0001 00000001 00 0001 73 0001 000a"),
    ("server", Subscribe(1, 0, "s", OffsetSpec.offset(5), 10),
     "00000018 0007 0001 00000001 00 0001 73 0004 0000000000000005 000a"),
    ("server", Subscribe(1, 0, "s", OffsetSpec.timestamp(-1), 10, {"k": "v"}),
     "00000022 0007 0001 00000001 00 0001 73 0005 ffffffffffffffff 000a"
     " 00000001 0001 6b 0001 76"),
    ("server", Publish(1, [PublishedMessage(2, b"ab")]),
     "00000017 0002 0001 01 00000001 0000000000000002 00000002 6162"),
    ("server", Publish(1, [PublishedMessage(2, b"ab", None)], version=2),
     "00000019 0002 0002 01 00000001 0000000000000002 ffff 00000002 6162"),
    ("server", Publish(1, [PublishedMessage(2, b"ab", "f")], version=2),
     "0000001a 0002 0002 01 00000001 0000000000000002 0001 66 00000002 6162"),
    ("client", PublishConfirm(1, [2, 3]),
     "00000019 0003 0001 01 00000002 0000000000000002 0000000000000003"),
    ("server", ConsumerUpdateResponse(4, c.OK, OffsetSpec.none()),
     "0000000c 801a 0001 00000004 0001 0000"),
]


@pytest.mark.parametrize(("role", "frame", "hexbytes"), GOLDEN)
def test_golden_bytes(role: str, frame: Frame, hexbytes: str) -> None:
    raw = bytes.fromhex(hexbytes.replace(" ", ""))
    assert encode(frame) == raw
    assert read_all(role, raw) == [frame]


def test_rabbitmq_encodings_are_read_too() -> None:
    # an empty Open response with a zero count, and Subscribe properties with a count of 0
    assert read_all("client", bytes.fromhex(
        "0000000e 8015 0001 00000002 0001 00000000".replace(" ", "")
    )) == [OpenResponse(2, c.OK)]
    assert read_all("server", bytes.fromhex(
        "00000014 0007 0001 00000001 00 0001 73 0001 000a 00000000".replace(" ", "")
    )) == [Subscribe(1, 0, "s", OffsetSpec.first(), 10)]


UF = c.UNKNOWN_FRAME
# (name, role, frame after its size field: the size is added, so no case hides in NEED_DATA)
MALFORMED: list[tuple[str, str, str, int]] = [
    ("size below 4", "server", "0017", UF),
    ("unknown key", "server", "0099 0001", UF),
    ("unknown version", "server", "0017 0002", UF),
    ("server-only command from a client", "server", "0003 0001 01 00000000", UF),
    ("client-only command from a server", "client", "0009 0001 00 000a", UF),
    ("Credit response from a client", "server", "8009 0001 0004 09", UF),
    ("heartbeat with a body", "server", "0017 0001 00", UF),
    ("Credit cut short", "server", "0009 0001 00 00", UF),
    ("string runs past the end", "server", "0015 0001 00000002 0005 2f", UF),
    ("string not UTF-8", "server", "0015 0001 00000002 0001 ff", UF),
    ("offset type 6", "server", "0007 0001 00000001 00 0001 73 0006 000a", UF),
    ("offset type 0 in Subscribe", "server", "0007 0001 00000001 00 0001 73 0000 000a", UF),
    ("offset cut short", "server", "0007 0001 00000001 00 0001 73 0004 00000005", UF),
    ("map count larger than the frame", "server",
     "0011 0001 00000001 7fffffff", UF),
    ("map entry cut short", "server", "0011 0001 00000001 00000001 0001 61", UF),
    ("Publish count larger than its messages", "server",
     "0002 0001 01 00000002 0000000000000002 00000002 6162", UF),
    ("Publish message runs past the end", "server",
     "0002 0001 01 00000001 0000000000000002 00000003 6162", UF),
    ("Publish v2 with a sub-batch", "server",
     "0002 0002 01 00000001 0000000000000002 ffff 80 0001 00000001 00000001 61", UF),
    ("sub-batch runs past the end", "server",
     "0002 0001 01 00000001 0000000000000002 80 0001 00000001 00000009 61", UF),
    ("SaslAuthenticate data runs past the end", "server",
     "0013 0001 00000003 0001 50 00000009 00", UF),
    ("Deliver without a chunk header", "client", "0008 0001 00 50000000", UF),
    ("Deliver chunk with a foreign magic", "client", "0008 0001 00 " + "00" * 48, UF),
    ("Deliver chunk shorter than its data", "client",
     "0008 0001 00 50 00 0000 00000000 " + "00" * 28 + "00000001 00000000 00 000000",
     UF),
]


@pytest.mark.parametrize(
    ("role", "hexbytes", "code"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_frames_raise_their_response_code(role: str, hexbytes: str, code: int) -> None:
    body = bytes.fromhex(hexbytes.replace(" ", ""))
    with pytest.raises(StreamProtocolError) as info:
        read_all(role, len(body).to_bytes(4, "big") + body)
    assert info.value.response_code == code, info.value


def test_frame_above_frame_max_is_refused_from_its_size_field() -> None:
    frame = encode(PeerProperties(1, {"k": "v" * 100}))
    size = len(frame) - 4
    assert read_all("server", frame, frame_max=size) == [PeerProperties(1, {"k": "v" * 100})]
    reader = FrameReader(role="server", frame_max=size - 1)
    reader.feed(frame[:4])  # the size alone is enough to refuse it
    with pytest.raises(StreamProtocolError) as info:
        reader.next_frame()
    assert info.value.response_code == c.FRAME_TOO_LARGE
    # a 4 GiB announcement under RabbitMQ's pre-Open ceiling
    reader = FrameReader(role="server", frame_max=c.DEFAULT_INITIAL_FRAME_MAX)
    reader.feed(b"\xff\xff\xff\xff")
    with pytest.raises(StreamProtocolError):
        reader.next_frame()
    # 0 means no limit; the session raises the limit after Open
    reader = FrameReader(role="server", frame_max=0)
    reader.feed(b"\xff\xff\xff\xff\x00\x11")
    assert reader.next_frame() is NEED_DATA


def test_decode_frame_alone_and_error_text() -> None:
    assert decode_frame(bytes.fromhex("00170001")) == Heartbeat()
    error = StreamProtocolError(c.FRAME_TOO_LARGE, "big")
    assert str(error) == "0x0E Frame too large: big"
    assert c.response_name(0x13) == "No offset"
    assert c.response_name(0x99) == "response code 0x99"


def test_encoding_refuses_what_the_caller_got_wrong() -> None:
    with pytest.raises(ValueError):
        encode(Publish(1, [PublishedMessage(1, b"x", "filter")]))  # filter needs version 2
    with pytest.raises(ValueError):
        encode(Open(1, "x" * 40_000))


def test_a_publish_of_consecutive_plain_messages_decodes_as_its_entries_in_one_pass() -> None:
    """What clients send (version 1, plain messages, ids following on) comes out of
    the decoder as the store's chunk-record entries (``u32 length | message``), no object
    per message; any other Publish is decoded message by message. Both compare equal to
    the frame that was encoded, and ``messages`` gives the messages back."""
    sent = Publish(3, [PublishedMessage(7, b"\x00Su\xa0\x01a"), PublishedMessage(8, b"raw")])
    got = decode_frame(encode(sent)[4:])
    assert isinstance(got, Publish) and got.entries is not None
    assert got.entries == b"\x00\x00\x00\x06\x00Su\xa0\x01a" + b"\x00\x00\x00\x03raw"
    assert (got.first_id, got.count) == (7, 2)
    assert got == sent and got.messages == sent.messages
    alone = decode_frame(encode(Publish(3, [PublishedMessage(9, b"one")]))[4:])
    assert isinstance(alone, Publish) and alone.entries == b"\x00\x00\x00\x03one"
    for other in (
        Publish(3, [PublishedMessage(7, b"a"), PublishedMessage(9, b"b")]),  # a gap in ids
        Publish(3, [PublishedMessage(7, b"a"), PublishedMessage(8, b"")]),  # an empty one
        Publish(3, [PublishedMessage(7, b"a", "eu"), PublishedMessage(8, b"b")], version=2),
    ):
        decoded = decode_frame(encode(other)[4:])
        assert isinstance(decoded, Publish) and decoded.entries is None
        assert decoded == other
