"""x-max-age on a real server: parsing (RabbitMQ's units) and whole old segments dropped
once they are older than the limit."""

from __future__ import annotations

import time

import pika
import pika.exceptions
import pytest

from tests.stream.conftest import declare_stream, publish, query, read


@pytest.mark.parametrize("age", ["7D", "1h", "30m", "45s", "2M", "1Y"])
def test_max_age_units_are_accepted(
    conn: pika.BlockingConnection, qname: str, age: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname, **{"x-max-age": age})
    publish(ch, qname, [b"kept"])
    assert query(ch, qname)["x-stream-next-offset"] == 1
    ch.queue_delete(qname)


@pytest.mark.parametrize("age", ["7days", "1.5h", "-1h", "h", "7d", ""])
def test_bad_max_age_is_a_406(conn: pika.BlockingConnection, qname: str, age: str) -> None:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        declare_stream(ch, qname, **{"x-max-age": age})
    assert info.value.reply_code == 406
    assert "x-max-age" in info.value.reply_text
    assert conn.is_open  # only the channel closes


def test_max_age_drops_old_segments_when_a_segment_rolls(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    ch.confirm_delivery()
    # ~3 records of 400 bytes per segment: every few publishes roll to a new segment
    declare_stream(
        ch, qname, **{"x-max-age": "1s", "x-stream-max-segment-size-bytes": 1000}
    )
    publish(ch, qname, [b"old" * 133] * 10)
    assert query(ch, qname)["x-stream-first-offset"] == 0  # young: several rolls, no drop
    time.sleep(1.5)
    publish(ch, qname, [b"new" * 133] * 6)  # rolls: retention runs on the old segments
    info = query(ch, qname)
    first = info["x-stream-first-offset"]
    assert info["x-stream-next-offset"] == 16
    # every segment whose successor starts with an old record is gone; at most the
    # last old segment (it holds the records just before the new ones) is kept
    assert 6 <= first <= 10, info
    got = read(conn, ch, qname, 16 - first, {"x-stream-offset": "first"})
    assert [o for o, _ in got] == list(range(first, 16))
    assert got[-1][1] == b"new" * 133
