"""Stream filtering as RabbitMQ 3.13 clients use it: rstream's producer sends a filter
value per message (Publish version 2), its consumer subscribes with filter.N and
match-unfiltered, and Roost delivers only the messages whose value is asked for (and,
with match-unfiltered, those without one). The client's own post-filter accepts
everything here, so what arrives is what the broker sent."""

from __future__ import annotations

from typing import Any

from rstream import AMQPMessage, ConsumerOffsetSpecification, OffsetType, amqp_decoder
from rstream.utils import FilterConfiguration

from tests.stream_protocol.clients import _producer, _read, _run
from tests.support import RoostProcess

REGIONS = ["eu", "us", None, "eu", "ap", None, "us", "eu"]


def test_a_filtering_subscription_gets_only_the_values_it_asks_for(
    roost: RoostProcess, qname: str
) -> None:
    async def extract(message: Any) -> str | None:
        return message.application_properties.get("region")  # type: ignore[no-any-return]

    def messages() -> list[AMQPMessage]:
        out = []
        for i, region in enumerate(REGIONS):
            props = {"region": region} if region else {}
            out.append(AMQPMessage(body=b"m%d" % i, application_properties=props))
        return out

    def everything(message: Any) -> bool:
        return True

    async def main() -> tuple[list[bytes], list[bytes], list[bytes]]:
        # rstream 1.1.1 writes nothing (not a null string) for a None filter value, so the
        # messages without one come from a producer that does not filter (Publish v1)
        async with _producer(roost, filter_value_extractor=extract) as filtering, _producer(
            roost
        ) as plain:
            await filtering.create_stream(qname)
            for _ in range(2):
                for message in messages():
                    # send_wait: each stored before the next (two connections)
                    if message.application_properties:
                        await filtering.send_wait(qname, message)
                    else:
                        await plain.send_wait(qname, message)
            await filtering.send_batch(qname, [m for m in messages() if m.application_properties])
        first = ConsumerOffsetSpecification(OffsetType.FIRST)

        async def read(values: list[str], unfiltered: bool, count: int) -> list[bytes]:
            wanted = FilterConfiguration(values, everything, match_unfiltered=unfiltered)
            got = await _read(roost, qname, first, count, filter_input=wanted)
            return [amqp_decoder(m).body for _, m in got]

        return (
            await read(["eu"], False, 9),
            await read(["us", "ap"], False, 9),
            await read(["ap"], True, 7),
        )

    eu, us_ap, ap_or_none = _run(main())
    # the stream: REGIONS twice, then those with a region again (in one Publish frame)
    stored = [(b"m%d" % i, r) for i, r in enumerate(REGIONS)] * 2
    stored += [(b"m%d" % i, r) for i, r in enumerate(REGIONS) if r]

    def where(keep: set[str | None]) -> list[bytes]:
        return [body for body, region in stored if region in keep]

    assert eu == where({"eu"})
    assert us_ap == where({"us", "ap"})
    assert ap_or_none == where({"ap", None})
