"""`roost perf` without a broker: histograms, aggregation, confirms, options, frames."""

from __future__ import annotations

import argparse
import asyncio
import random
import time

import pytest

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client import Endpoint
from roost.client.confirms import ConfirmTracker
from roost.perf.amqp import ConsumerConnection, ack_template, publish_template
from roost.perf.cli import add_arguments
from roost.perf.options import Options
from roost.perf.stats import (
    ConsumerResult,
    Histogram,
    ProducerResult,
    Tally,
    aggregate,
    bucket,
    declare_report,
    rate_budget,
)


# -- histogram -------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0, 1, 127, 128, 129, 1000, 123_456, 10**9, 2**40 + 12345])
def test_bucket_is_a_floor_within_one_percent(value: int) -> None:
    key = bucket(value)
    assert key <= value
    assert value - key <= value / 128
    assert bucket(key) == key  # a key stands for itself


def test_bucket_exact_below_128_and_clamps_negatives() -> None:
    assert [bucket(v) for v in range(128)] == list(range(128))
    assert bucket(-5) == 0


def test_percentiles_nearest_rank() -> None:
    h = Histogram()
    for v in range(1, 101):
        h.record(v)
    assert h.percentile(50) == 50
    assert h.percentile(95) == 95
    assert h.percentile(99) == 99
    assert h.percentile(100) == 100
    assert h.summary() == {"min": 1, "p50": 50, "p75": 75, "p95": 95, "p99": 99, "max": 100}
    assert h.perftest() == (1, 50, 75, 95, 99)


def test_percentiles_of_large_values_are_close_and_never_above_max() -> None:
    rng = random.Random(7)
    values = [rng.randrange(1, 5_000_000) for _ in range(20_000)]
    h = Histogram()
    for v in values:
        h.record(v)
    ordered = sorted(values)
    for p in (50, 95, 99):
        exact = ordered[int(p / 100 * len(values)) - 1]
        assert abs(h.percentile(p) - exact) <= exact / 64
    assert h.max == max(values)
    assert h.percentile(100) <= h.max


def test_empty_histogram() -> None:
    h = Histogram()
    assert h.summary() is None
    with pytest.raises(ValueError):
        h.percentile(50)


def test_merge_equals_recording_everything_in_one() -> None:
    a, b, both = Histogram(), Histogram(), Histogram()
    for v in (5, 500, 50_000):
        a.record(v)
        both.record(v)
    for v in (7, 700, 7_000_000):
        b.record(v)
        both.record(v)
    a.merge(b)
    assert a.counts == both.counts
    assert a.max == both.max == 7_000_000
    assert a.total == 6


# -- aggregation -----------------------------------------------------------------------
def test_aggregate_sums_and_rates() -> None:
    h1, h2 = Histogram(), Histogram()
    h1.record(100)
    h2.record(300)
    report = aggregate(
        producers=[ProducerResult(published=600, confirmed=590, nacked=1),
                   ProducerResult(published=400, confirmed=400)],
        consumers=[ConsumerResult(consumed=510, consumed_in_window=500, latency_us=h1, stale=3),
                   ConsumerResult(consumed=490, consumed_in_window=300, latency_us=h2)],
        size=16,
        duration_s=2.0,
        server="RabbitMQ 3.10.8",
    )
    assert report["producers"] == 2 and report["consumers"] == 2
    assert report["published"] == 1000
    assert report["confirmed"] == 990 and report["nacked"] == 1
    assert report["consumed"] == 1000
    assert report["stale"] == 3
    assert report["publish_rate"] == 500.0
    assert report["consume_rate"] == 400.0  # the drain after the window does not count
    assert report["latency_us"] == {
        "min": 100, "p50": 100, "p75": 300, "p95": 300, "p99": 300, "max": 300}
    assert report["errors"] == []


def test_aggregate_without_latency_and_with_errors() -> None:
    report = aggregate(
        producers=[ProducerResult(published=10, error="producer 1: boom")],
        consumers=[],
        size=4,
        duration_s=1.0,
    )
    assert report["latency_us"] is None
    assert report["consume_rate"] == 0.0
    assert report["errors"] == ["producer 1: boom"]


def test_declare_report() -> None:
    assert declare_report(declares=1000, elapsed_s=0.5)["declare_rate"] == 2000.0
    assert declare_report(declares=0, elapsed_s=0.0)["declare_rate"] == 0.0


def test_rate_budget() -> None:
    assert rate_budget(100, 0.0, 0) == 1  # the first message goes at once
    assert rate_budget(100, 0.5, 0) == 51
    assert rate_budget(100, 0.5, 51) == 0
    assert rate_budget(100, 0.5, 80) == 0  # ahead of schedule: never negative


# -- confirms --------------------------------------------------------------------------
def test_confirms_single_in_order() -> None:
    t = ConfirmTracker()
    for tag in (1, 2, 3):
        assert t.settle(tag, multiple=False) == 1
    assert (t.floor, t.acked, t.settled) == (3, 3, 3)


def test_confirms_out_of_order_then_multiple_counts_each_tag_once() -> None:
    t = ConfirmTracker()
    assert t.settle(3, multiple=False) == 1
    assert t.settle(5, multiple=False, ok=False) == 1
    assert t.floor == 0
    assert t.settle(4, multiple=True) == 3  # 1, 2 and 4 (3 was already settled)
    assert t.floor == 5  # 5 closes the gap
    assert t.settle(5, multiple=False) == 0  # duplicate
    assert t.settle(2, multiple=True) == 0  # stale multiple
    assert (t.acked, t.nacked, t.settled) == (4, 1, 5)
    assert t.settle(8, multiple=True, ok=False) == 3
    assert (t.acked, t.nacked, t.settled, t.floor) == (4, 4, 8, 8)


def test_confirms_random_order_settles_everything_exactly_once() -> None:
    rng = random.Random(3)
    tags = list(range(1, 501))
    rng.shuffle(tags)
    t = ConfirmTracker()
    assert sum(t.settle(tag, multiple=rng.random() < 0.1) for tag in tags) <= 500
    t.settle(500, multiple=True)
    assert t.settled == 500 and t.floor == 500


# -- options ---------------------------------------------------------------------------
def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_help_renders() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert "amqp://guest:guest@127.0.0.1:5672/%2F" in parser.format_help()


def test_defaults() -> None:
    opts = Options.from_args(_parse())
    assert opts.endpoint == Endpoint("127.0.0.1", 5672, "guest", "guest", "/")
    assert (opts.producers, opts.consumers, opts.size, opts.duration) == (1, 1, 16, 10.0)
    assert (opts.confirm, opts.prefetch, opts.rate, opts.multi_ack_every) == (0, 0, 0.0, 1)
    assert not opts.auto_ack and not opts.persistent and not opts.durable_queue
    assert (opts.queue, opts.exchange, opts.queue_declares) == ("roost-perf", "", 0)
    assert opts.routing_key == "roost-perf"


def test_all_options() -> None:
    opts = Options.from_args(_parse(
        "--url", "amqp://a:b@h:1/v", "--producers", "2", "--consumers", "4", "--size", "1024",
        "--duration", "5", "--persistent", "--confirm", "100", "--prefetch", "100",
        "--multi-ack-every", "10", "--rate", "500", "--queue", "q", "--durable-queue",
        "--exchange", "x", "--queue-declares", "7", "--json",
    ))
    assert opts.endpoint == Endpoint("h", 1, "a", "b", "v")
    assert (opts.producers, opts.consumers, opts.size, opts.duration) == (2, 4, 1024, 5.0)
    assert opts.persistent and opts.durable_queue and not opts.auto_ack
    assert (opts.confirm, opts.prefetch, opts.multi_ack_every, opts.rate) == (100, 100, 10, 500.0)
    assert (opts.queue, opts.exchange, opts.queue_declares) == ("q", "x", 7)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--producers", "-1"], "--producers"),
        (["--duration", "0"], "--duration"),
        (["--rate", "-3"], "--rate"),
        (["--multi-ack-every", "0"], "--multi-ack-every"),
        (["--prefetch", "10", "--multi-ack-every", "20"], "must not exceed --prefetch"),
        (["--queue", ""], "--queue"),
        (["--url", "http://x"], "not an amqp:// or amqps:// URI"),
    ],
)
def test_invalid_options(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Options.from_args(_parse(*argv))


def test_multi_ack_above_prefetch_is_fine_with_auto_ack() -> None:
    Options.from_args(_parse("--auto-ack", "--prefetch", "10", "--multi-ack-every", "20"))


# -- pre-encoded frames (built once per run on the codec) ------------------------------
@pytest.mark.parametrize("size", [8, 16, 1024, 300_000])
def test_publish_template_carries_the_timestamp_in_the_first_body_bytes(size: int) -> None:
    prefix, suffix = publish_template(exchange="x", routing_key="q", size=size,
                                      persistent=True, frame_max=131072)
    stamp = 0x0102030405060708
    reader = codec.FrameReader(expect_protocol_header=False)
    reader.feed((prefix + stamp.to_bytes(8, "big") + suffix) * 2)
    frames = reader.frames()
    per_message = 2 + -(-size // (131072 - 8))
    assert len(frames) == 2 * per_message
    publish, header, first = frames[:3]
    assert isinstance(publish.method, m.BasicPublish)
    assert (publish.method.exchange, publish.method.routing_key) == ("x", "q")
    assert header.body_size == size
    assert codec.decode_properties(header.properties)[3] == 2  # delivery_mode
    assert int.from_bytes(first.payload[:8], "big") == stamp
    body = b"".join(f.payload for f in frames[2:per_message])
    assert len(body) == size and body[8:] == bytes(size - 8)


def test_publish_template_without_room_for_a_timestamp() -> None:
    prefix, suffix = publish_template(exchange="", routing_key="q", size=4,
                                      persistent=False, frame_max=131072)
    assert suffix == b"" and prefix.endswith(bytes(4) + b"\xce")


@pytest.mark.parametrize("multiple", [False, True])
def test_ack_template(multiple: bool) -> None:
    pre, post = ack_template(multiple)
    reader = codec.FrameReader(expect_protocol_header=False)
    reader.feed(pre + (12345).to_bytes(8, "big") + post)
    (frame,) = reader.frames()
    assert frame.method == m.BasicAck(delivery_tag=12345, multiple=multiple)


# -- the consumer's hot path, without a socket -----------------------------------------
class _FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return False


def _deliveries(tags: range, stamp: int, size: int = 16) -> bytes:
    props = codec.encode_properties(m.BasicProperties(delivery_mode=1))
    body = stamp.to_bytes(8, "big") + bytes(size - 8)
    return b"".join(
        codec.encode_basic_deliver(1, "perf-0", tag, False, "", "q", props, body, 131072)
        for tag in tags
    )


def _acks(written: list[bytes]) -> list[tuple[int, bool]]:
    reader = codec.FrameReader(expect_protocol_header=False)
    for chunk in written:
        reader.feed(chunk)
    return [(f.method.delivery_tag, f.method.multiple) for f in reader.frames()]


def _consumer(**settings: object) -> tuple[ConsumerConnection, _FakeTransport]:
    conn = ConsumerConnection(Endpoint())
    transport = _FakeTransport()
    conn.transport = transport  # type: ignore[assignment]
    conn.consuming = True
    conn.tally.start_ns = 1_000_000_000
    for name, value in settings.items():
        setattr(conn, name, value)
    return conn, transport


def test_consumer_counts_measures_latency_and_batches_acks_per_read() -> None:
    async def go() -> None:
        conn, transport = _consumer(ack_each=True)
        stamp = time.monotonic_ns() - 2_000_000  # sent 2 ms ago
        data = _deliveries(range(1, 6), stamp)
        conn.data_received(data[:50])  # frames split across reads are fine
        conn.data_received(data[50:])
        t = conn.tally
        assert t.consumed == 5 and t.stale == 0
        assert t.latency.total == 5
        assert 2000 <= t.latency.max < 1_000_000
        assert len(transport.written) == 2  # one write per data_received
        assert _acks(transport.written) == [(t, False) for t in range(1, 6)]

    asyncio.run(go())


def test_consumer_multi_ack_every_n_and_skips_stale_messages() -> None:
    async def go() -> None:
        conn, transport = _consumer(ack_every=4)
        t = conn.tally
        t.start_ns = time.monotonic_ns()
        conn.data_received(_deliveries(range(1, 3), t.start_ns - 1))  # an earlier run's
        conn.data_received(_deliveries(range(3, 6), t.start_ns + 1))
        assert (t.consumed, t.stale, t.latency.total) == (5, 2, 3)
        assert t.progress == [3]
        assert _acks(transport.written) == [(5, True)]  # 5 deliveries >= 4: one multiple ack
        conn.data_received(_deliveries(range(6, 7), t.start_ns + 1))
        conn.ack_up_to_last()  # the end of the run acks the remainder
        assert _acks(transport.written) == [(5, True), (6, True)]

    asyncio.run(go())


def test_consumer_with_auto_ack_never_acks() -> None:
    async def go() -> None:
        conn, transport = _consumer()
        conn.data_received(_deliveries(range(1, 4), conn.tally.start_ns + 1))
        conn.ack_up_to_last()
        assert conn.tally.consumed == 3 and transport.written == []

    asyncio.run(go())


def test_tally_take_counts_stamps_and_stops_at_the_limit() -> None:
    """What every STOMP and MQTT consumer link counts a delivery with (Tally.take)."""
    t = Tally()
    t.start_ns, t.limit = 1_000, 3
    now = 5_000_000
    assert t.take((2_000_000).to_bytes(8, "big") + b"x" * 10, now)  # 3 ms old
    assert t.take((500).to_bytes(8, "big"), now)  # stamped before the run: stale
    assert t.take(b"short", now)  # no timestamp: counted, no latency
    assert (t.consumed, t.stale, t.latency.max, t.full) == (3, 1, 3_000, False)  # µs
    assert t.take(b"more", now)  # the stale one does not count towards -D
    assert not t.take(b"over", now) and t.full and t.consumed == 4
