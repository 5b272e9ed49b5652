"""Micro-benchmark of the AMQP codec, Roost next to pamqp 4 (the reference Python codec).

    .venv/bin/python bench/codec_micro.py [--loops 20000] [--repeat 5]

Prints a Markdown table of ns per operation (best of ``--repeat`` runs) and the ratio
pamqp / Roost (above 1: Roost is faster). Each pair does the same work:

- decode basic.publish: the method, content header and body frames of one 128-byte
  message, from bytes to frame objects (Roost: FrameReader.feed + 3 x next_frame;
  pamqp: 3 x frame.unmarshal on the remaining bytes).
- encode basic.deliver: method + header + body frames to one bytes object (Roost:
  encode_basic_deliver with pre-encoded properties, the broker's path; pamqp: marshal
  of Deliver, ContentHeader (properties object) and ContentBody).
- encode / decode a 10-entry field table of mixed types.
"""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Callable

from pamqp import body as pamqp_body
from pamqp import commands
from pamqp import decode as pamqp_decode
from pamqp import encode as pamqp_encode
from pamqp import frame as pamqp_frame
from pamqp import header as pamqp_header

from roost.amqp import codec
from roost.amqp import codec_methods as m

BODY = bytes(range(128))
TABLE = {
    "x-match": "all",
    "count": 42,
    "big": 2**40,
    "ratio": 0.25,
    "enabled": True,
    "name": "roost-benchmark",
    "nothing": None,
    "list": [1, "two", 3],
    "nested": {"a": 1, "b": "c"},
    "when": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
}


def best_ns(fn: Callable[[], object], loops: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / loops)
    return best


def publish_case() -> tuple[Callable[[], object], Callable[[], object]]:
    props = m.BasicProperties(content_type="application/octet-stream", delivery_mode=2)
    data = codec.encode_basic_publish(
        1, "amq.direct", "bench.key", False, False, props.encode(), BODY, 131072
    )
    reader = codec.FrameReader(expect_protocol_header=False)
    feed, next_frame = reader.feed, reader.next_frame

    def ours() -> object:
        feed(data)
        return next_frame(), next_frame(), next_frame()

    def theirs() -> object:
        rest, out = data, []
        for _ in range(3):
            consumed, _channel, value = pamqp_frame.unmarshal(rest)
            out.append(value)
            rest = rest[consumed:]
        return out

    assert len(ours()) == len(theirs()) == 3  # type: ignore[arg-type]
    return ours, theirs


def deliver_case() -> tuple[Callable[[], object], Callable[[], object]]:
    props = m.BasicProperties(content_type="application/octet-stream", delivery_mode=2)
    raw_props = props.encode()
    pamqp_props = commands.Basic.Properties(
        content_type="application/octet-stream", delivery_mode=2
    )

    def ours() -> object:
        return codec.encode_basic_deliver(
            1, "amq.ctag-abc", 12345, False, "amq.direct", "bench.key", raw_props, BODY, 131072
        )

    def theirs() -> object:
        deliver = commands.Basic.Deliver(
            consumer_tag="amq.ctag-abc", delivery_tag=12345, redelivered=False,
            exchange="amq.direct", routing_key="bench.key",
        )
        return (
            pamqp_frame.marshal(deliver, 1)
            + pamqp_frame.marshal(pamqp_header.ContentHeader(0, len(BODY), pamqp_props), 1)
            + pamqp_frame.marshal(pamqp_body.ContentBody(BODY), 1)
        )

    assert ours() == theirs()
    return ours, theirs


def table_cases() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    ours_raw = codec.encode_table(TABLE)
    theirs_raw = pamqp_encode.field_table(TABLE)
    view = memoryview(ours_raw)
    assert codec.decode_table(view, 0)[0] == pamqp_decode.field_table(ours_raw)[1]
    return [
        ("encode 10-entry field table",
         lambda: codec.encode_table(TABLE), lambda: pamqp_encode.field_table(TABLE)),
        ("decode 10-entry field table",
         lambda: codec.decode_table(view, 0), lambda: pamqp_decode.field_table(theirs_raw)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loops", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases = [
        ("decode basic.publish (method+header+body)", *publish_case()),
        ("encode basic.deliver (method+header+body)", *deliver_case()),
        *table_cases(),
    ]
    print("| operation | roost ns/op | pamqp ns/op | pamqp / roost |")
    print("|---|---:|---:|---:|")
    for name, ours, theirs in cases:
        ours_ns = best_ns(ours, args.loops, args.repeat)
        theirs_ns = best_ns(theirs, args.loops, args.repeat)
        print(f"| {name} | {ours_ns:,.0f} | {theirs_ns:,.0f} | {theirs_ns / ours_ns:.1f}x |")


if __name__ == "__main__":
    main()
