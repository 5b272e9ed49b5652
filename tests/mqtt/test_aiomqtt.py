"""aiomqtt (the asyncio client on paho) against Roost, MQTT 3.1.1 and 5.0: a retained
QoS 1 message, live messages through a wildcard, and a persistent session's message
that waited while the client was away."""

from __future__ import annotations

import asyncio
import uuid

import aiomqtt
import pytest

from tests.support import RoostProcess

VERSIONS = {"3.1.1": aiomqtt.ProtocolVersion.V311, "5.0": aiomqtt.ProtocolVersion.V5}


@pytest.mark.parametrize("version", list(VERSIONS))
def test_aiomqtt_retained_wildcards_and_a_waiting_session(
    roost: RoostProcess, version: str
) -> None:
    base = f"aio-{uuid.uuid4().hex[:8]}"
    proto = VERSIONS[version]

    def client(identifier: str, *, clean: bool = True) -> aiomqtt.Client:
        kwargs: dict[str, object] = {}
        if proto is aiomqtt.ProtocolVersion.V5:
            kwargs["clean_start"] = clean
            props = None
            if not clean:
                from paho.mqtt.packettypes import PacketTypes
                from paho.mqtt.properties import Properties

                props = Properties(PacketTypes.CONNECT)
                props.SessionExpiryInterval = 60
            kwargs["properties"] = props
        else:
            kwargs["clean_session"] = clean
        return aiomqtt.Client("127.0.0.1", roost.mqtt_port, identifier=identifier,
                              username="guest", password="guest", protocol=proto,
                              **kwargs)  # type: ignore[arg-type]

    async def run() -> None:
        async with client(f"{base}-pub") as pub:
            await pub.publish(f"{base}/config", b"retained", qos=1, retain=True)
        async with client(f"{base}-sub", clean=False) as sub:
            await sub.subscribe(f"{base}/#", qos=1)
            first = await asyncio.wait_for(anext(sub.messages), 10)
            assert (str(first.topic), first.payload, first.retain) == (
                f"{base}/config", b"retained", True)
            async with client(f"{base}-pub2") as pub:
                await pub.publish(f"{base}/a/b", b"live", qos=1)
            live = await asyncio.wait_for(anext(sub.messages), 10)
            assert (str(live.topic), live.payload, live.qos) == (f"{base}/a/b", b"live", 1)
        async with client(f"{base}-pub3") as pub:  # the subscriber is away
            await pub.publish(f"{base}/while/away", b"kept", qos=1)
        async with client(f"{base}-sub", clean=False) as sub:
            waited = await asyncio.wait_for(anext(sub.messages), 10)
            assert (str(waited.topic), waited.payload) == (f"{base}/while/away", b"kept")

    asyncio.run(run())
