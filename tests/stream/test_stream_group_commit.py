"""Stream appends join the disk store's group commit: confirmed after its fsync."""

from __future__ import annotations

import pika

from tests.stream.conftest import declare_stream
from tests.support import RoostProcess, sync_ops


def test_confirmed_stream_publish_is_fsynced_by_the_store(
    roost: RoostProcess, conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    ch.confirm_delivery()
    before = sync_ops(roost)
    # transient: a stream keeps every message, so delivery mode does not matter
    ch.basic_publish("", qname, b"kept", pika.BasicProperties(delivery_mode=1))
    assert sync_ops(roost) > before


def test_stored_offset_is_fsynced_by_the_store(
    roost: RoostProcess, conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    ch.confirm_delivery()
    ch.basic_publish("", qname, b"one")
    before = sync_ops(roost)
    ch.basic_publish(
        "amq.roost.offsets",
        qname,
        b"",
        pika.BasicProperties(headers={"x-stream-consumer-name": "c", "x-stream-offset": 0}),
    )
    assert sync_ops(roost) > before
