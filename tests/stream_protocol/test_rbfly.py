"""A second stream client library, rbfly (PyPI), against Roost: its batching publisher
(many messages per Publish frame: the batched path), its single-message publisher with
AMQP 1.0 application properties, deduplication state resumed by publisher name, and a
subscription from the first offset reading every message back as sent."""

from __future__ import annotations

import asyncio
from typing import Any

from rbfly.streams import (
    Offset,
    Publisher,
    PublisherBatchFast,
    get_message_ctx,
    stream_message_ctx,
    streams_client,
)

from tests.support import RoostProcess


def test_rbfly_publishes_in_batches_and_reads_back_every_message(
    roost: RoostProcess, qname: str
) -> None:
    async def main() -> tuple[list[Any], dict[str, Any], int]:
        client = streams_client(f"rabbitmq-stream://guest:guest@127.0.0.1:{roost.stream_port}/")
        try:
            await client.create_stream(qname)
            async with client.publisher(qname, name="rb", cls=PublisherBatchFast) as batch:
                for i in range(300):
                    batch.batch(b"m%d" % i)
                await batch.flush()
            async with client.publisher(qname, name="rb", cls=Publisher) as single:
                resumed = single.message_id  # the next id after the stored sequence
                await single.send(stream_message_ctx(b"last", app_properties={"k": "v"}))
            got: list[Any] = []
            props: dict[str, Any] = {}
            async for body in client.subscribe(qname, offset=Offset.FIRST, timeout=10):
                got.append(body)
                if len(got) == 301:
                    props = dict(get_message_ctx().app_properties)
                    break
            return got, props, resumed
        finally:
            await client.disconnect()

    got, props, resumed = asyncio.run(main())
    assert got == [b"m%d" % i for i in range(300)] + [b"last"]
    assert props == {"k": "v"}
    assert resumed == 301  # ids 1..300 were stored for publisher "rb"
