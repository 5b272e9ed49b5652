"""The sans-IO STOMP codec: wire cases both ways, limits, malformed input, fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.stomp.frames import (
    NEED_DATA,
    Frame,
    FrameParser,
    Limits,
    StompParseError,
    escape,
    serialize,
    unescape,
)


def parse_all(data: bytes, *, version: str = "1.2", limits: Limits | None = None) -> list[Frame]:
    parser = FrameParser(limits, version)
    parser.feed(data)
    frames = []
    while (frame := parser.next_frame()) is not NEED_DATA:
        assert isinstance(frame, Frame)
        frames.append(frame)
    return frames


def parse_bytewise(data: bytes, version: str = "1.2") -> list[Frame]:
    parser = FrameParser(version=version)
    frames = []
    for i in range(len(data)):
        parser.feed(data[i : i + 1])
        while (frame := parser.next_frame()) is not NEED_DATA:
            assert isinstance(frame, Frame)
            frames.append(frame)
    return frames


def test_simple_send() -> None:
    [f] = parse_all(b"SEND\ndestination:/queue/a\n\nhello\x00")
    assert f == Frame("SEND", {"destination": "/queue/a"}, b"hello")


def test_a_frame_compares_and_prints_by_its_fields() -> None:
    """What the dataclass gave ``Frame`` (now a plain class, so mypyc compiles its
    ``__init__``): equality and repr by command, headers and body, a dict of its own."""
    a, b = Frame("SEND"), Frame("SEND")
    assert a == b and a.headers == {} and a.body == b""
    a.headers["x"] = "1"
    assert b.headers == {} and a != b
    assert Frame("SEND", {"x": "1"}, b"y") != Frame("SEND", {"x": "1"}, b"z")
    assert Frame("SEND") != Frame("SUBSCRIBE") and Frame("SEND") != ("SEND", {}, b"")
    assert repr(Frame("SEND", {"a": "b"}, b"x")) == (
        "Frame(command='SEND', headers={'a': 'b'}, body=b'x')"
    )
    assert Frame("ACK", {"id": "1"}).get("id") == "1" and a.get("nope", "d") == "d"


def test_content_length_body_may_hold_nul() -> None:
    [f] = parse_all(b"SEND\ncontent-length:5\n\na\x00b\x00c\x00")
    assert f.body == b"a\x00b\x00c"


def test_content_length_must_be_followed_by_nul() -> None:
    with pytest.raises(StompParseError, match="NUL"):
        parse_all(b"SEND\ncontent-length:2\n\nabc\x00")


def test_eols_between_frames_are_heartbeats_and_crlf_lines_work() -> None:
    data = b"\n\r\nSEND\r\ndestination:/q\r\n\r\nx\x00\n\r\n\nBEGIN\ntransaction:t\n\n\x00\n"
    parser = FrameParser()
    parser.feed(data)
    frames = []
    while (frame := parser.next_frame()) is not NEED_DATA:
        frames.append(frame)
    assert [f.command for f in frames] == ["SEND", "BEGIN"]  # type: ignore[union-attr]
    assert frames[0].headers == {"destination": "/q"}  # type: ignore[union-attr]
    assert parser.heartbeats == 6


def test_repeated_header_first_wins() -> None:
    [f] = parse_all(b"SEND\nfoo:1\nfoo:2\n\n\x00")
    assert f.headers["foo"] == "1"


@pytest.mark.parametrize(
    ("version", "raw", "value"),
    [
        ("1.2", "a\\nb\\cc\\\\d\\re", "a\nb:c\\d\re"),
        ("1.1", "a\\nb\\cc\\\\d", "a\nb:c\\d"),
        ("1.0", "a\\nb\\c", "a\\nb\\c"),  # no escaping in 1.0
    ],
)
def test_header_escaping_per_version(version: str, raw: str, value: str) -> None:
    [f] = parse_all(f"SEND\nk:{raw}\n\n\x00".encode(), version=version)
    assert f.headers["k"] == value


def test_undefined_escape_is_an_error_and_11_has_no_r() -> None:
    with pytest.raises(StompParseError, match="escape"):
        parse_all(b"SEND\nk:\\t\n\n\x00")
    with pytest.raises(StompParseError, match="escape"):
        parse_all(b"SEND\nk:\\r\n\n\x00", version="1.1")


def test_connect_frames_are_never_unescaped() -> None:
    [f] = parse_all(b"CONNECT\npasscode:a\\cb\n\n\x00")
    assert f.headers["passcode"] == "a\\cb"


@pytest.mark.parametrize(
    ("data", "limits", "match"),
    [
        (b"SEND\n\n" + b"x" * 200 + b"\x00", Limits(max_frame_size=100), "too large"),
        (b"SEND\n\n" + b"x" * 200, Limits(max_frame_size=100), "too large"),
        (b"SEND\ncontent-length:500\n\n", Limits(max_frame_size=100), "too large"),
        (b"SEND\n" + b"a:b\n" * 20 + b"\n\x00", Limits(max_headers=10), "too many headers"),
        (b"SEND\nk:" + b"v" * 100 + b"\n\n\x00", Limits(max_header_length=50), "too long"),
        (b"SEND\nk:" + b"v" * 100, Limits(max_header_length=50), "too long"),
        # an ACK by number, read by the compiled parser's shortcut, keeps the limits too
        (b"ACK\nid:5\n\n\x00", Limits(max_headers=0), "too many headers"),
        (b"ACK\nid:" + b"7" * 60 + b"\n\n\x00", Limits(max_header_length=50), "too long"),
    ],
)
def test_limits_raise_a_clear_error(data: bytes, limits: Limits, match: str) -> None:
    with pytest.raises(StompParseError, match=match):
        parse_all(data, limits=limits)


@pytest.mark.parametrize(
    "data",
    [
        b"SEND\nno-colon\n\n\x00",
        b"SE ND\n\n\x00",
        b"SEND\ncontent-length:abc\n\n\x00",
        b"SEND\nk:\xff\n\n\x00",
        b"\x00\n\n\x00",
    ],
)
def test_malformed_frames(data: bytes) -> None:
    with pytest.raises(StompParseError):
        parse_all(data)


def test_serialize_adds_content_length_and_escapes() -> None:
    data = serialize("MESSAGE", [("k", "a:b\nc")], b"x\x00y", version="1.2")
    assert data == b"MESSAGE\nk:a\\cb\\nc\ncontent-length:3\n\nx\x00y\x00"
    assert serialize("CONNECTED", {"version": "1.2"}) == b"CONNECTED\nversion:1.2\n\n\x00"


header_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)
frames_strategy = st.builds(
    Frame,
    st.sampled_from(["SEND", "MESSAGE", "SUBSCRIBE", "ACK", "ERROR", "RECEIPT"]),
    st.dictionaries(header_text.filter(lambda s: s != "content-length"), header_text, max_size=5),
    st.binary(max_size=64),
)


@given(st.lists(frames_strategy, max_size=4), st.sampled_from(["1.1", "1.2"]))
def test_round_trip_whole_and_bytewise(frames: list[Frame], version: str) -> None:
    if version == "1.1":  # 1.1 cannot carry a CR in a header
        frames = [
            Frame(
                f.command,
                {k: v for k, v in f.headers.items() if "\r" not in k + v},
                f.body,
            )
            for f in frames
        ]
    data = b"\n".join(serialize(f.command, f.headers, f.body, version=version) for f in frames)
    expected = [
        Frame(
            f.command,
            {**f.headers, **({"content-length": str(len(f.body))} if f.body else {})},
            f.body,
        )
        for f in frames
    ]
    assert parse_all(data, version=version) == expected
    assert parse_bytewise(data, version) == expected


@given(st.binary(max_size=200))
def test_any_bytes_give_frames_or_the_one_error(data: bytes) -> None:
    parser = FrameParser(Limits(max_frame_size=1000, max_headers=10, max_header_length=100))
    parser.feed(data)
    try:
        while parser.next_frame() is not NEED_DATA:
            pass
    except StompParseError:
        pass


@given(header_text)
def test_escape_round_trip(text: str) -> None:
    assert unescape(escape(text, "1.2"), "1.2") == text


def _outcome(data: bytes, chunk: int, *, general_only: bool) -> tuple[list[Frame], str | None]:
    """Frames parsed from ``data`` fed ``chunk`` bytes at a time, and the error, if any."""
    parser = FrameParser(Limits(max_frame_size=300, max_headers=6, max_header_length=60))
    if general_only:
        parser._plain_head_max = -1  # every head is "too long" for next_frame's plain path
    frames: list[Frame] = []
    try:
        for i in range(0, len(data), chunk):
            parser.feed(data[i : i + chunk])
            while (frame := parser.next_frame()) is not NEED_DATA:
                assert isinstance(frame, Frame)
                frames.append(frame)
    except StompParseError as exc:
        return frames, exc.message
    return frames, None


# what the plain path must leave to the general parser, or read as it does
_EDGES = [
    b"\n",
    b"\r\n",
    b"\x00",
    b"SEND\r\na:1\r\n\r\nx\x00",
    b"SEND\na:1\r\n\n\x00",
    b"ACK\nid:1\nid:2\n\n\x00",
    b"SEND\ncontent-length: 2\n\nab\x00",
    b"SEND\ncontent-length:9\n\nab\x00",
    b"SEND\ncontent-length:2\n\nab\n\x00",
    b"SEND\ncontent-length:400\n\n" + b"x" * 400 + b"\x00",
    b"SEND\n\n" + b"y" * 400 + b"\x00",
    b"SEND\nnocolon\n\n\x00",
    b"CONNECT\nlogin:a\\c\n\n\x00",
    b"SEND\na:b\\nc\n\n\x00",
    b"SEND\na:b\\qc\n\n\x00",
    b"SEND\n" + b"h:v\n" * 8 + b"\n\x00",
    b"SEND\nk:" + b"v" * 70 + b"\n\n\x00",
    b"\xff\xfe\n\n\x00",
    b"send\n\n\x00",
    b"\n\n\nACK\n\n\x00",
    # a consumer's ACK by number, which the compiled plain path reads without splitting
    # its head, and what only looks like one
    b"ACK\nid:0071\n\n\x00",
    b"ACK\nid:\n\n\x00",
    b"ACK\nid:12a\n\n\x00",
    b"ACK\nid:-1\n\n\x00",
    b"ACK\nid:5\nreceipt:r\n\n\x00",
    b"ACK\nid:5\n\nbody\x00",
    b"ACK\nid:5\r\n\r\n\x00",
    b"ACK\nid:5\n\n",
    b"ACKX\nid:5\n\n\x00",
    b"NACK\nid:5\n\n\x00",
]

_frame_pieces = st.one_of(
    st.builds(
        lambda c, h, b: serialize(c, h, b),
        st.sampled_from(["SEND", "ACK", "MESSAGE", "BOGUS"]),
        st.dictionaries(
            st.sampled_from(["a", "id", "x:y", "d\\n", "e\r"]), st.text(max_size=8), max_size=4
        ),
        st.binary(max_size=40),
    ),
    st.sampled_from(_EDGES),
    st.binary(max_size=12),
    st.builds(lambda n: b"ACK\nid:%d\n\n\x00" % n, st.integers(0, 10**12)),
)


@pytest.mark.parametrize("chunk", [1, 7, 4096])
@pytest.mark.parametrize("data", _EDGES)
def test_plain_path_agrees_on_edge_cases(data: bytes, chunk: int) -> None:
    data += b"ACK\nid:3\n\n\x00"  # and a plain frame after it
    assert _outcome(data, chunk, general_only=False) == _outcome(data, chunk, general_only=True)


@given(st.lists(_frame_pieces, max_size=6), st.sampled_from([1, 7, 64, 4096]))
def test_plain_path_agrees_with_the_general_parser(pieces: list[bytes], chunk: int) -> None:
    """next_frame reads plain frames itself and leaves the rest to the general parser:
    what comes out (frames, then the error) is the same as the general parser's alone."""
    data = b"".join(pieces)
    assert _outcome(data, chunk, general_only=False) == _outcome(data, chunk, general_only=True)


_STREAM = (
    serialize("SEND", [("destination", "/queue/a")], b"x" * 30)
    + b"\n"
    + b"SEND\ndestination:/queue/b\n\n"
    + b"no-length body"
    + b"\x00"
    + b"ACK\nid:1\n\n\x00\r\n"
    + b"SEND\r\ndestination:/queue/c\r\n\r\n\x00"  # CRLF: the general parser's
    + b"SEND\ncontent-length:5\n\na\x00b\x00c\x00"
)


@pytest.mark.parametrize("general_only", [False, True])
def test_any_split_into_reads_gives_the_same_frames(general_only: bool) -> None:
    """However reads cut the stream (a head whole and its body not, a frame whole and the
    next one begun, ...), the frames are those of one read of it all."""
    whole = _outcome(_STREAM, len(_STREAM), general_only=general_only)
    assert len(whole[0]) == 5 and whole[1] is None
    for i in range(1, len(_STREAM)):
        for j in sorted({i, min(i + 9, len(_STREAM)), len(_STREAM)}):
            parser = FrameParser()
            if general_only:
                parser._plain_head_max = -1
            frames: list[Frame] = []
            for piece in (_STREAM[:i], _STREAM[i:j], _STREAM[j:]):
                parser.feed(piece)
                while (frame := parser.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, Frame)
                    frames.append(frame)
            assert frames == whole[0], (i, j)


@pytest.mark.parametrize("chunk", [4096, 7777, 65536, 262144])
def test_long_streams_in_reads_keep_every_body(chunk: int) -> None:
    """Past 64 KiB of a buffer that grew across reads the parser drops what it has read;
    a body taken after that (a plain frame whole in the grown buffer) was once cut to
    nothing or to another frame's bytes: a producer's 1 KiB SENDs lost one body in ~250."""
    sends = [
        b"SEND\ndestination:/queue/q\n\n" + f"{n:08d}".encode().ljust(1024, b".") + b"\x00"
        for n in range(600)
    ]
    stream = b"".join(sends)
    parser = FrameParser()
    bodies: list[bytes] = []
    for start in range(0, len(stream), chunk):
        parser.feed(stream[start : start + chunk])
        while (frame := parser.next_frame()) is not NEED_DATA:
            assert isinstance(frame, Frame)
            bodies.append(frame.body)
    assert bodies == [f"{n:08d}".encode().ljust(1024, b".") for n in range(600)]


@pytest.mark.parametrize("chunk", [1000, 4096, 70000])
@pytest.mark.parametrize("with_length", [False, True])
def test_large_frames_across_reads_beside_small_ones(chunk: int, with_length: bool) -> None:
    """A frame of 200 KiB arriving over many reads grows one buffer in place; the small
    frames cut by a read around it are read from the joined tail; every body is whole."""
    big = bytes(range(1, 256)) * 800  # no NUL: framed by NUL or by content-length
    small = [f"{n:04d}".encode() * 50 for n in range(40)]
    frames = [*small[:20], big, *small[20:], big]
    stream = b"".join(
        b"SEND\ndestination:/queue/q\n"
        + (f"content-length:{len(body)}\n".encode() if with_length else b"")
        + b"\n"
        + body
        + b"\x00"
        for body in frames
    )
    parser = FrameParser(Limits(max_frame_size=1 << 20))
    bodies: list[bytes] = []
    for start in range(0, len(stream), chunk):
        parser.feed(memoryview(stream[start : start + chunk]))
        while (frame := parser.next_frame()) is not NEED_DATA:
            assert isinstance(frame, Frame)
            bodies.append(frame.body)
    assert bodies == frames


# heads that repeat, differ by a suffix, or sit either side of the parser's short scan
_REPEATED = [
    b"SEND\ndestination:/queue/a\n\nx\x00",
    b"SEND\ndestination:/queue/a\n\n\x00",
    b"SEND\ndestination:/queue/a\ncontent-length:1\n\ny\x00",
    b"SEND\ndestination:/queue/ab\n\nz\x00",
    b"SEND\ndestination:/queue/a\nx:1\n\n\n\x00",
    b"SEND\ndestination:/queue/a\r\n\r\nq\x00",
    b"SEND\nk:" + b"v" * 38 + b"\n\n\x00",
    b"SEND\nk:" + b"v" * 40 + b"\n\n\x00",
    b"ACK\nid:" + b"1" * 40 + b"\n\n\x00",
    b"ACK\nid:7\n\n\x00",
]


@given(st.lists(st.sampled_from(_REPEATED), min_size=1, max_size=12), st.sampled_from([1, 7, 4096]))
def test_repeated_heads_read_as_the_general_parser_reads_them(
    pieces: list[bytes], chunk: int
) -> None:
    """A SEND head seen twice in a row is parsed once and reused: the frames are still the
    general parser's, whatever comes between and however reads cut them."""
    data = b"".join(pieces)
    assert _outcome(data, chunk, general_only=False) == _outcome(data, chunk, general_only=True)


def test_a_reused_head_gives_each_frame_headers_of_its_own() -> None:
    parser = FrameParser()
    parser.feed(b"SEND\ndestination:/queue/a\nreceipt:r\n\nm\x00" * 3)
    frames = [parser.next_frame() for _ in range(3)]
    assert all(isinstance(f, Frame) for f in frames)
    for frame in frames:  # the session removes the receipt header it answers
        assert isinstance(frame, Frame) and frame.headers == {
            "destination": "/queue/a",
            "receipt": "r",
        }
        del frame.headers["receipt"]
    assert parser.next_frame() is NEED_DATA
