"""What a stream holds now, read with the pipeline's own client (no Spark): what the data
source wrote, or what the broker appended."""

from __future__ import annotations

from roost.pipeline.amqp import Client, Delivery


def messages(url: str, stream: str) -> list[Delivery]:
    """Every message in ``stream``, from its first offset to its end as of now."""
    with Client(url) as client:
        end = client.stream_info(stream)["x-stream-next-offset"]
        return list(client.read_range(stream, 0, end))
