"""The node-to-node link codec: every frame kind round-trips (fed whole and split at every
offset), golden bytes fix the layout, a table of malformed frames each gives LinkError
with its reason, and Hypothesis checks that any bytes give frames or LinkError alike
whole and byte by byte."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.cluster.link import frames as f
from roost.cluster.link.codec import (
    NEED_DATA,
    SCHEMA,
    Encoder,
    LinkError,
    LinkReader,
    encode,
    frames_of,
)

SAMPLES: list[f.Frame] = [
    f.Hello("rabbit@a", 0x0102030405060708),
    f.Heartbeat(),
    f.Publish(
        7,
        f.PUBLISH_CONFIRM | f.PUBLISH_MANDATORY,
        "/",
        ["q1", "q2"],
        "amq.direct",
        "rk",
        b"\x80\x00\x02",
        b"x" * 1024,
    ),
    f.Publish(0, 0, "vh", [], "", "", b"", b""),
    f.PublishResult(7, f.Outcome.CONFIRMED),
    f.PublishResult(8, f.Outcome.UNROUTABLE, "NOT_FOUND - no queue 'q' in vhost '/'"),
    f.Consume(3, "/", "q", "ctag-1", 100, f.CONSUME_EXCLUSIVE, b'{"x-priority": 5}'),
    f.ConsumeOk(3),
    f.Cancel(3, 320, "home node 'b' is shutting down"),
    f.Deliver(3, 1 << 40, f.DELIVER_REDELIVERED, 2, "ex", "rk", b"\x00\x00", "é".encode() * 9),
    f.Settle(3, f.SettleOp.REJECT, f.SETTLE_MULTIPLE | f.SETTLE_REQUEUE, 99),
    f.Credit(3, 50),
    f.Get(11, "/", "q", True),
    f.GetResult(11, False, reply_code=404),
    f.GetResult(12, True, 5, 0, 41, 0, "", "q", b"\x00\x00", b"body"),
    f.Flow("/", "q", True),
    f.Applied(123456),
    f.Replicate("/", "qq", 4, 100, 99, [b"entry-1", b"", b"entry-3"]),
    f.ReplicateAck("/", "qq", 4, 102, False),
    f.QueueOp(8, f.QueueOpKind.PURGE, "/", "far"),
    f.QueueOpResult(8, 404, 3, 1, "no such queue"),
    f.Confirmed(f.pack_ids([1, 2, 2**63])),
    f.Acked(f.pack_ids([7])),
    f.Fenced(True),
    f.StreamAsk(9, "/", "s", b'{"what": "stats"}'),
    f.StreamAnswer(9, b'{"value": 3}'),
]


def test_every_kind_has_a_sample() -> None:
    assert {type(s) for s in SAMPLES} == set(SCHEMA)


@pytest.mark.parametrize("frame", SAMPLES, ids=lambda fr: type(fr).__name__)
def test_round_trip_split_at_every_offset(frame: f.Frame) -> None:
    data = encode(frame)
    assert frames_of(data) == [frame]
    for cut in range(len(data)):
        reader = LinkReader()
        reader.feed(data[:cut])
        assert reader.next_frame() is NEED_DATA
        reader.feed(data[cut:])
        assert reader.next_frame() == frame
        assert reader.next_frame() is NEED_DATA


def test_many_frames_in_one_write() -> None:
    """The Encoder gathers frames for one write; the reader takes them all from one feed."""
    enc = Encoder()
    for frame in SAMPLES:
        enc.add(frame)
    size = enc.size
    data = enc.take()
    assert len(data) == size and not enc
    assert _flat(frames_of(data)) == SAMPLES


def _flat(frames: list[f.Frame]) -> list[f.Frame]:
    out: list[f.Frame] = []
    for frame in frames:
        out += frame.frames if isinstance(frame, f.Batch) else [frame]
    return out


def test_a_run_of_publishes_and_deliveries_goes_as_one_batch() -> None:
    """Consecutive Publish/Deliver frames become one Batch, in order; any other frame
    ends the run, and a run of one stays a plain frame."""
    pub = f.Publish(1, f.PUBLISH_CONFIRM, "/", ["q"], "", "q", b"\x80\x00", b"a" * 100)
    dlv = f.Deliver(2, 9, 0, 0, "", "q", b"\x00\x00", b"b" * 50)
    enc = Encoder()
    for frame in (pub, dlv, pub, f.Acked(f.pack_ids([3])), dlv, f.Credit(1, 5), pub, dlv):
        enc.add(frame)
    size = enc.size
    data = enc.take()
    assert len(data) == size
    assert frames_of(data) == [
        f.Batch([pub, dlv, pub]),
        f.Acked(f.pack_ids([3])),
        dlv,
        f.Credit(1, 5),
        f.Batch([pub, dlv]),
    ]
    # the batch is the inner frames' own bytes behind one header (size, kind 44)
    inner = encode(pub) + encode(dlv)
    assert data.endswith(struct.pack("!IB", 1 + len(inner), 44) + inner)
    for cut in range(len(data)):  # and it is read whole however the socket splits it
        reader = LinkReader()
        reader.feed(data[:cut])
        got = []
        while (frame := reader.next_frame()) is not NEED_DATA:
            got.append(frame)
        reader.feed(data[cut:])
        while (frame := reader.next_frame()) is not NEED_DATA:
            got.append(frame)
        assert len(got) == 5


def test_a_long_run_is_cut_into_batches_below_the_frame_limit() -> None:
    from roost.cluster.link import codec

    pub = f.Publish(1, 0, "/", ["q"], "", "q", b"", b"x" * 100_000)
    enc = Encoder()
    for _ in range(25):
        enc.add(pub)
    batches = frames_of(enc.take())
    assert all(isinstance(b, f.Batch) for b in batches) and len(batches) == 3
    assert sum(len(b.frames) for b in batches if isinstance(b, f.Batch)) == 25
    assert codec.BATCH_BYTES < codec.DEFAULT_MAX_FRAME


GOLDEN = [
    (f.Credit(3, 50), bytes.fromhex("0000000d 0a 0000000000000003 00000032")),
    (f.Flow("/", "q", True), bytes.fromhex("00000006 0d 012f 0171 01")),
    (
        f.Settle(1, f.SettleOp.NACK, f.SETTLE_REQUEUE, 9),
        bytes.fromhex("00000013 09 0000000000000001 01 02 0000000000000009"),
    ),
    (
        f.Publish(1, 2, "/", ["q"], "", "k", b"P", b"BODY"),
        bytes.fromhex(
            "00000020 03 0000000000000001 02 012f 0001 0171 00 016b 00000001 50 00000004 424f4459"
        ),
    ),
]


@pytest.mark.parametrize("frame,golden", GOLDEN, ids=lambda x: type(x).__name__)
def test_golden_bytes(frame: f.Frame, golden: bytes) -> None:
    assert encode(frame) == golden
    assert frames_of(golden) == [frame]


def _frame(kind: int, payload: bytes) -> bytes:
    return struct.pack("!IB", len(payload) + 1, kind) + payload


MALFORMED = [
    (struct.pack("!IB", 0, 1)[:4], "size 0"),
    (_frame(99, b""), "unknown link frame kind 99"),
    (_frame(0, b""), "unknown link frame kind 0"),
    (_frame(f.Kind.CREDIT, b"\0" * 11), "Credit frame truncated"),
    (_frame(f.Kind.CREDIT, b"\0" * 13), "1 bytes past its fields"),
    (_frame(f.Kind.FLOW, b"\x05ab"), "name runs past the frame"),
    (_frame(f.Kind.FLOW, b"\x02\xff\xfe\x01q\x01"), "not UTF-8"),
    (_frame(f.Kind.FLOW, b"\x01/\x01q\x02"), "congested must be 0 or 1"),
    (_frame(f.Kind.SETTLE, b"\0" * 8 + b"\x07\x00" + b"\0" * 8), "bad op 7"),
    (_frame(f.Kind.PUBLISH_RESULT, b"\0" * 8 + b"\x09\x00"), "bad outcome 9"),
    (_frame(f.Kind.APPLIED, b""), "Applied frame truncated"),
    (
        _frame(f.Kind.PUBLISH, b"\0" * 9 + b"\x01/" + b"\0\x01\x01q\0\0" + b"\xff\xff\xff\xff"),
        "bytes run past the frame",
    ),
    (
        _frame(f.Kind.REPLICATE, b"\x01/\x01q" + b"\0" * 24 + b"\x7f\xff\xff\xff"),
        "entries cannot fit",
    ),
    (_frame(f.Kind.PUBLISH, b"\0" * 9 + b"\x01/\xff\xff\x01q"), "name runs past the frame"),
    (_frame(f.Kind.BATCH, b""), "Batch frame with no frames"),
    (_frame(f.Kind.BATCH, b"\0\0\0"), "inner frame's header runs past"),
    (_frame(f.Kind.BATCH, _frame(f.Kind.CREDIT, b"\0" * 12)), "kind 10 cannot be batched"),
    (_frame(f.Kind.BATCH, struct.pack("!IB", 99, f.Kind.DELIVER)), "inner frame runs past"),
    (
        _frame(f.Kind.BATCH, _frame(f.Kind.BATCH, _frame(f.Kind.PUBLISH, b""))),
        "kind 44 cannot be batched",
    ),
    (
        _frame(f.Kind.BATCH, _frame(f.Kind.DELIVER, encode(SAMPLES[9])[5:] + b"!")),
        "1 bytes past its fields",
    ),
]


@pytest.mark.parametrize("data,reason", MALFORMED, ids=[r for _d, r in MALFORMED])
def test_malformed_frames_raise_link_error(data: bytes, reason: str) -> None:
    reader = LinkReader()
    reader.feed(data)
    with pytest.raises(LinkError, match=reason):
        reader.next_frame()


def test_oversized_frame_refused_from_its_header() -> None:
    reader = LinkReader(max_frame=1000)
    reader.feed(struct.pack("!IB", 1001, f.Kind.PUBLISH))  # the rest never needs to come
    with pytest.raises(LinkError, match="larger than 1000"):
        reader.next_frame()


def test_names_longer_than_255_bytes_are_refused_when_encoding() -> None:
    with pytest.raises(ValueError, match="255"):
        encode(f.Flow("/", "q" * 256, True))


def _run(chunks: list[bytes]) -> tuple[list[f.Frame], str | None]:
    reader = LinkReader(max_frame=4096)
    out: list[f.Frame] = []
    try:
        for chunk in chunks:
            reader.feed(chunk)
            while (frame := reader.next_frame()) is not NEED_DATA:
                assert not isinstance(frame, type(NEED_DATA))
                out.append(frame)
    except LinkError as exc:
        return out, str(exc)
    return out, None


@st.composite
def plausible(draw: st.DrawFn) -> bytes:
    """Frames with a real kind and a random payload, or a real frame with bytes flipped."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            payload = draw(st.binary(max_size=60))
            parts.append(_frame(draw(st.sampled_from(list(f.Kind))), payload))
        else:
            data = bytearray(encode(draw(st.sampled_from(SAMPLES))))
            for _ in range(draw(st.integers(0, 3))):
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
            parts.append(bytes(data))
    return b"".join(parts)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=200), plausible()))
def test_any_bytes_give_frames_or_link_error_whole_and_byte_by_byte(data: bytes) -> None:
    assert _run([data]) == _run([data[i : i + 1] for i in range(len(data))])


names = st.text(max_size=20).filter(lambda s: len(s.encode()) <= 255)
u64 = st.integers(0, 2**64 - 1)


@settings(max_examples=200)
@given(
    st.builds(
        f.Publish,
        u64,
        st.integers(0, 255),
        names,
        st.lists(names, max_size=4),
        names,
        names,
        st.binary(max_size=30),
        st.binary(max_size=300),
    )
    | st.builds(
        f.Deliver,
        u64,
        u64,
        st.integers(0, 255),
        st.integers(0, 2**32 - 1),
        names,
        names,
        st.binary(max_size=30),
        st.binary(max_size=300),
    )
    | st.builds(f.Replicate, names, names, u64, u64, u64, st.lists(st.binary(max_size=20)))
    | st.builds(
        f.GetResult,
        u64,
        st.booleans(),
        u64,
        st.integers(0, 255),
        st.integers(0, 2**32 - 1),
        st.integers(0, 65535),
        names,
        names,
        st.binary(max_size=30),
        st.binary(max_size=60),
    ),
    st.lists(st.integers(0, 400), max_size=4),
)
def test_generated_frames_round_trip_however_split(frame: f.Frame, cuts: list[int]) -> None:
    data = encode(frame) * 2
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    assert _run(chunks) == ([frame, frame], None)


def test_a_large_frame_across_many_reads_and_the_frames_after_it() -> None:
    """A 3 MiB publish cut into 64 KiB reads, followed in its last read by more frames:
    gathered whole, then the rest decoded from the read itself (the reader keeps no
    copy of a read it decodes in place)."""
    big = f.Publish(1, f.PUBLISH_CONFIRM, "/", ["q"], "", "q", b"\x80\x00\x02", b"z" * (3 << 20))
    small = [f.Credit(3, 5), f.Publish(2, 0, "/", ["q"], "", "q", b"\x00\x00", b"tail")]
    data = encode(big) + b"".join(encode(x) for x in small)
    reader = LinkReader()
    got: list[f.Frame] = []
    for at in range(0, len(data), 65536):
        read = data[at : at + 65536]
        reader.feed(read)
        assert reader._buf is read
        while (frame := reader.next_frame()) is not NEED_DATA:
            assert not isinstance(frame, type(NEED_DATA))
            got.append(frame)
    assert got == [big, *small]
    assert type(got[0].body) is bytes and not reader._head  # type: ignore[union-attr]


def test_frames_past_an_unread_rest_are_kept() -> None:
    """A caller that feeds again before reading every frame loses none."""
    one, two = f.Credit(1, 1), f.Credit(2, 2)
    reader = LinkReader()
    reader.feed(encode(one) + encode(two)[:3])
    assert reader.next_frame() == one
    reader.feed(encode(two)[3:] + encode(one))
    assert [reader.next_frame(), reader.next_frame(), reader.next_frame()] == [two, one, NEED_DATA]


def test_repeated_properties_are_decoded_once_per_sender() -> None:
    """The node taking messages off the link decodes a sender's repeated property bytes
    once, headers included, and keeps the bytes with the message."""
    from roost.amqp.codec import encode_properties
    from roost.cluster.wire import link_properties_cache, message_cached
    from roost.core.message import Properties

    cache = link_properties_cache()
    plain = encode_properties(Properties(delivery_mode=2, content_type="text/plain"))
    a = message_cached(cache, "", "q", plain, b"1")
    b = message_cached(cache, "", "q", bytes(plain), b"2")
    assert a.properties is b.properties and a.properties.delivery_mode == 2
    assert b.encoded_properties == plain and b.body == b"2"
    headed = encode_properties(Properties(headers={"k": "v"}))
    c = message_cached(cache, "", "q", headed, b"3")
    d = message_cached(cache, "", "q", headed, b"4")
    assert c.properties is d.properties and d.properties.headers == {"k": "v"}
    assert d.encoded_properties == headed
    other = encode_properties(Properties(headers={"k": "w"}))
    e = message_cached(cache, "", "q", other, b"5")
    assert e.properties.headers == {"k": "w"} and d.properties.headers == {"k": "v"}


def test_repeated_names_are_decoded_once_and_never_mixed_up() -> None:
    """A sender's repeated vhost, queues, exchange and routing key are decoded once (the
    same string objects come back) while different names, however close, stay apart."""
    from roost.cluster.link import fast

    def publish(rk: str, queues: list[str]) -> f.Publish:
        raw = b"".join(fast.encode_publish(f.Publish(1, 0, "/v", queues, "ex", rk, b"", b"x")))
        return fast.decode_publish(raw, 5, len(raw))[0]

    a, b = publish("ké-1", ["q1"]), publish("ké-1", ["q1"])
    assert (b.vhost, b.queues, b.exchange, b.routing_key) == ("/v", ["q1"], "ex", "ké-1")
    assert a.routing_key is b.routing_key and a.queues[0] is b.queues[0]
    assert a.queues is not b.queues  # each frame its own list
    c = publish("ké-2", ["q1", "q2"])
    assert (c.queues, c.routing_key) == (["q1", "q2"], "ké-2")
    assert publish("ké-1", ["q2"]).queues == ["q2"]

    def deliver(rk: str) -> f.Deliver:
        raw = b"".join(fast.encode_deliver(f.Deliver(1, 2, 0, 0, "ex", rk, b"", b"y")))
        return fast.decode_deliver(raw, 5, len(raw))[0]

    d, e = deliver("r"), deliver("r")
    assert d.routing_key is e.routing_key and d.exchange is e.exchange == "ex"
    assert deliver("s").routing_key == "s"


def test_a_run_of_publishes_with_changing_names_decodes_each_its_own() -> None:
    """The decoder matches a Publish's name bytes against the last Publish's in place:
    a run that changes names, or one whose names start like the last one's, still gives
    each frame its own names (here against the generic decoder's)."""
    from roost.cluster.link import codec, fast

    shapes = [
        ("/", ["q"], "", "q"),
        ("/", ["q"], "", "q"),
        ("/", ["q", "q2"], "", "q"),
        ("/", ["q"], "", "qq"),
        ("/v", ["q"], "", "q"),
        ("/", ["q"], "", "q"),
    ]
    frames = [
        f.Publish(i, 0, vhost, queues, ex, rk, b"", b"%d" % i)
        for i, (vhost, queues, ex, rk) in enumerate(shapes)
    ]
    encoder = Encoder()
    for frame in frames:
        encoder.add(frame)
    data = encoder.take()
    (batch,) = frames_of(data)
    assert isinstance(batch, f.Batch) and batch.frames == frames
    for frame in frames:  # each alone, through the generic decoder
        raw = b"".join(fast.encode_publish(frame))
        with memoryview(raw) as view:
            assert codec.decode_payload(f.Kind.PUBLISH, view[5:]) == frame


def test_a_forwarded_publish_encoded_without_its_frame_is_the_same_bytes() -> None:
    """``fast.publish_parts`` (the forwarding path, no frame object) gives the bytes of
    ``encode_publish`` and joins a run of Publish frames in one Batch as they do."""
    from roost.cluster.link import fast

    frame = f.Publish(9, f.PUBLISH_CONFIRM, "/v", ["q"], "ex", "ké", b"\x10\x00\x02", b"b")
    fields = ("/v", "q", "ex", "ké", b"\x10\x00\x02", b"b")
    parts, size = fast.publish_parts(9, f.PUBLISH_CONFIRM, *fields)
    assert b"".join(parts) == b"".join(fast.encode_publish(frame))
    assert size == len(b"".join(parts))
    encoder = Encoder()
    encoder.add(frame)
    encoder.add_batched(*fast.publish_parts(10, 0, *fields))
    encoder.add(f.Heartbeat())
    batch, beat = frames_of(encoder.take())
    assert isinstance(beat, f.Heartbeat) and isinstance(batch, f.Batch)
    assert batch.frames == [frame, f.Publish(10, 0, "/v", ["q"], "ex", "ké", *fields[4:])]
