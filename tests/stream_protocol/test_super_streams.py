"""Super streams over the stream protocol, with rstream's SuperStreamProducer and
SuperStreamConsumer against a real Roost: created by the client (CreateSuperStream: a
direct exchange bound to one stream per partition, as RabbitMQ declares them),
routed by hash (Partitions) and by key (Route), read back from every partition; the
partitions are ordinary streams and the exchange an ordinary one, so an AMQP 0-9-1
publish to the exchange lands in the partition its key names."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import pika
from rstream import (
    AMQPMessage,
    ConsumerOffsetSpecification,
    OffsetType,
    Producer,
    RouteType,
    SuperStreamConsumer,
    SuperStreamCreationOption,
    SuperStreamProducer,
    amqp_decoder,
)

from tests.support import RoostProcess


async def _until(cond: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _key(name: str) -> Callable[[AMQPMessage], Awaitable[str]]:
    async def extract(message: AMQPMessage) -> str:
        return str(message.application_properties[name])

    return extract


def _auth(roost: RoostProcess) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": roost.stream_port, "username": "guest",
            "password": "guest"}


async def _consume_all(roost: RoostProcess, name: str, count: int) -> dict[str, list[bytes]]:
    got: dict[str, list[bytes]] = defaultdict(list)
    consumer = SuperStreamConsumer(**_auth(roost), super_stream=name)
    async with consumer:
        await consumer.subscribe(
            lambda m, ctx: got[ctx.stream].append(amqp_decoder(m).body),
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST),
        )
        await _until(lambda: sum(map(len, got.values())) >= count, f"{count} messages")
        await asyncio.sleep(0.05)
    return got


def test_super_stream_by_hash_then_read_from_every_partition(
    roost: RoostProcess, qname: str
) -> None:
    async def main() -> tuple[dict[str, list[bytes]], list[str]]:
        confirmed: list[int] = []
        producer = SuperStreamProducer(
            **_auth(roost),
            super_stream=qname,
            routing=RouteType.Hash,
            routing_extractor=_key("id"),
            super_stream_creation_option=SuperStreamCreationOption(n_partitions=3),
        )
        async with producer:
            for i in range(30):
                await producer.send(
                    AMQPMessage(body=f"m{i}".encode(), application_properties={"id": f"k{i}"}),
                    on_publish_confirm=lambda st: confirmed.append(st.message_id),
                )
            await _until(lambda: len(confirmed) == 30, "30 confirms")
        async with Producer(**_auth(roost)) as plain:  # rstream closed its own locator
            partitions = await (await plain.default_client).partitions(qname)
        return await _consume_all(roost, qname, 30), partitions

    got, partitions = asyncio.run(asyncio.wait_for(main(), 60))
    assert partitions == [f"{qname}-0", f"{qname}-1", f"{qname}-2"]
    assert set(got) <= set(partitions)
    assert len([p for p in partitions if got.get(p)]) >= 2  # spread by the key's hash
    assert sorted(b for bodies in got.values() for b in bodies) == sorted(
        f"m{i}".encode() for i in range(30)
    )


def test_super_stream_by_key_and_an_amqp_publish_to_its_exchange(
    roost: RoostProcess, qname: str
) -> None:
    async def main() -> tuple[dict[str, list[bytes]], list[str]]:
        confirmed: list[int] = []
        producer = SuperStreamProducer(
            **_auth(roost),
            super_stream=qname,
            routing=RouteType.Key,
            routing_extractor=_key("region"),
            super_stream_creation_option=SuperStreamCreationOption(
                n_partitions=0, binding_keys=["eu", "us"]
            ),
        )
        async with producer:
            # rstream 1.1.1 keeps the first key's route for every later key: one key here
            for region in ("us", "us"):
                await producer.send(
                    AMQPMessage(body=region.encode(), application_properties={"region": region}),
                    on_publish_confirm=lambda st: confirmed.append(st.message_id),
                )
            await _until(lambda: len(confirmed) == 2, "2 confirms")
            client = await producer.default_client
            route = await client.route("eu", qname) + await client.route("us", qname)
        with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish(qname, "eu", b"amqp-eu")
        return await _consume_all(roost, qname, 3), route

    got, route = asyncio.run(asyncio.wait_for(main(), 60))
    assert route == [f"{qname}-eu", f"{qname}-us"]
    assert got[f"{qname}-us"] == [b"us", b"us"]
    assert got[f"{qname}-eu"] == [b"amqp-eu"]


def test_single_active_consumers_share_a_super_stream_s_partitions(
    roost: RoostProcess, qname: str
) -> None:
    """Two single-active SuperStreamConsumers named alike on a 3-partition super stream:
    as RabbitMQ does, partition i goes to member i mod 2 (the first: partitions 0 and 2,
    the second: 1); the first is told it stepped down on partition 1; when the second
    leaves, partition 1 comes back to the first."""
    from rstream import OffsetSpecification

    async def main() -> tuple[dict[str, list[bytes]], dict[str, list[bytes]],
                              list[tuple[str, str, bool]]]:
        got: dict[str, dict[str, list[bytes]]] = {"one": defaultdict(list),
                                                  "two": defaultdict(list)}
        updates: list[tuple[str, str, bool]] = []

        def listener(who: str) -> Callable[[bool, Any], Awaitable[OffsetSpecification]]:
            async def answer(active: bool, ctx: Any) -> OffsetSpecification:
                updates.append((who, ctx.stream, active))
                return OffsetSpecification(OffsetType.NEXT, 0)
            return answer

        producer = SuperStreamProducer(
            **_auth(roost), super_stream=qname, routing=RouteType.Hash,
            routing_extractor=_key("id"),
            super_stream_creation_option=SuperStreamCreationOption(n_partitions=3),
        )
        async with producer:
            await producer.send(AMQPMessage(body=b"x", application_properties={"id": "k"}))
        sac = {"single-active-consumer": "true", "name": "grp", "super-stream": qname}
        consumers = {who: SuperStreamConsumer(**_auth(roost), super_stream=qname)
                     for who in ("one", "two")}
        async with Producer(**_auth(roost)) as plain:
            for who, consumer in consumers.items():
                await consumer.start()
                await consumer.subscribe(
                    lambda m, ctx, who=who: got[who][ctx.stream].append(amqp_decoder(m).body),
                    offset_specification=ConsumerOffsetSpecification(OffsetType.NEXT),
                    properties=sac, subscriber_name="grp", consumer_update_listener=listener(who),
                )
                await _until(lambda who=who: any(u[0] == who for u in updates), f"{who} active")
            await _until(lambda: ("one", f"{qname}-1", False) in updates, "one steps down")
            await asyncio.sleep(0.1)
            for i in range(3):
                await plain.send_wait(f"{qname}-{i}", AMQPMessage(body=b"p%d" % i))
            await _until(lambda: sum(len(v) for g in got.values() for v in g.values()) == 3,
                         "one message per partition")
            await consumers["two"].close()
            await _until(lambda: updates.count(("one", f"{qname}-1", True)) == 2, "back to one")
            await asyncio.sleep(0.1)
            await plain.send_wait(f"{qname}-1", AMQPMessage(body=b"again"))
            await _until(lambda: got["one"][f"{qname}-1"] == [b"again"], "one reads 1 again")
            await consumers["one"].close()
        return got["one"], got["two"], updates

    one, two, updates = asyncio.run(asyncio.wait_for(main(), 60))
    assert dict(one) == {f"{qname}-0": [b"p0"], f"{qname}-2": [b"p2"], f"{qname}-1": [b"again"]}
    assert dict(two) == {f"{qname}-1": [b"p1"]}
    assert ("two", f"{qname}-0", True) not in updates
    assert ("two", f"{qname}-2", True) not in updates


def test_super_streams_made_and_deleted_with_roost_ctl_and_the_http_api(
    roost: RoostProcess, qname: str
) -> None:
    """``roost ctl declare super_stream NAME --partitions 3`` and ``PUT
    /api/stream/super-streams/VHOST/NAME`` with binding keys declare what CreateSuperStream
    would: rstream lists the partitions, routes by key, and reads what it published;
    ``roost ctl delete super_stream`` removes the exchange and its streams."""
    import httpx

    from tests.http.ctl_runs import ctl

    ctl(roost, "declare", "super_stream", qname, "--partitions", "3",
        "--argument", "x-max-length-bytes=1000000")
    api = f"{roost.http_url}/api/stream/super-streams/%2F/{qname}.keyed"
    auth = ("guest", "guest")
    assert httpx.put(api, json={"binding_keys": ["eu", "us"]}, auth=auth).status_code == 201
    bad = httpx.put(api, json={"partitions": 2, "binding_keys": "a"}, auth=auth)
    assert bad.status_code == 400 and "either" in bad.text

    async def main() -> tuple[list[str], list[str], dict[str, list[bytes]]]:
        async with Producer(**_auth(roost)) as plain:
            client = await plain.default_client
            partitions = await client.partitions(qname)
            keyed = await client.route("us", f"{qname}.keyed")
        producer = SuperStreamProducer(**_auth(roost), super_stream=qname,
                                       routing=RouteType.Hash, routing_extractor=_key("id"))
        async with producer:
            for i in range(12):
                await producer.send(
                    AMQPMessage(body=b"m%d" % i, application_properties={"id": f"k{i}"})
                )
        return partitions, keyed, await _consume_all(roost, qname, 12)

    partitions, keyed, got = asyncio.run(asyncio.wait_for(main(), 60))
    assert partitions == [f"{qname}-0", f"{qname}-1", f"{qname}-2"]
    assert keyed == [f"{qname}.keyed-us"]
    assert sorted(b for bodies in got.values() for b in bodies) == sorted(
        b"m%d" % i for i in range(12)
    )
    stream = httpx.get(f"{roost.http_url}/api/queues/%2F/{qname}-1", auth=auth).json()
    assert stream["arguments"]["x-max-length-bytes"] == 1000000
    ctl(roost, "delete", "super_stream", qname)
    for name in (qname, f"{qname}-0", f"{qname}-2"):
        kind = "exchanges" if name == qname else "queues"
        gone = httpx.get(f"{roost.http_url}/api/{kind}/%2F/{name}", auth=auth)
        assert gone.status_code == 404, name
