"""The STOMP plumbing carries out the effects its session returns (stomp/effects.py) on
a real event loop: the frames a turn of deliveries makes leave in one socket write, the
session's timers (the CONNECT deadline, heart-beats) run on the loop, over TCP
(stomp/protocol.py) and WebSocket (stomp/ws.py). In process, over an in-memory broker."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from roost.stomp.handler import StompSettings
from roost.stomp.protocol import StompServerProtocol
from roost.stomp.ws import create_app
from tests.brokers import memory_broker
from tests.stomp.sessions import CONNECT, parse
from tests.support import start_site

SUBSCRIBE = b"SUBSCRIBE\nid:s\ndestination:/queue/q\nack:client-individual\n\n\x00"


class SocketRecord:
    """An asyncio transport that keeps what is written to it, one entry a write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = self.aborted = False
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5000) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def _connection(broker: Any, settings: StompSettings) -> tuple[StompServerProtocol, SocketRecord]:
    protocol, socket = StompServerProtocol(broker, settings, set()), SocketRecord()
    protocol.connection_made(socket)  # type: ignore[arg-type]
    return protocol, socket


def test_a_turn_of_deliveries_leaves_in_one_socket_write() -> None:
    async def main() -> None:
        broker = memory_broker()
        consumer, consumer_socket = _connection(broker, StompSettings())
        producer, producer_socket = _connection(broker, StompSettings())
        consumer.data_received(CONNECT + SUBSCRIBE)
        await asyncio.sleep(0)  # the consumer starts
        producer.data_received(CONNECT)
        before = len(consumer_socket.writes)
        producer.data_received(b"SEND\ndestination:/queue/q\n\nm\x00" * 50)
        assert len(consumer_socket.writes) == before  # not yet: at the end of the turn
        await asyncio.sleep(0)
        [batch] = consumer_socket.writes[before:]
        assert [f.body for f in parse(batch)] == [b"m"] * 50
        assert len(producer_socket.writes) == 1  # CONNECTED; nothing for the SENDs
        producer.data_received(b"DISCONNECT\nreceipt:r\n\n\x00")
        assert parse(producer_socket.writes[-1])[0].command == "RECEIPT"
        assert producer_socket.closed and not producer_socket.aborted
        for protocol in (consumer, producer):
            protocol.connection_lost(None)

    asyncio.run(main())


def test_the_session_timers_run_on_the_loop_over_tcp() -> None:
    async def main() -> None:
        settings = StompSettings(heartbeat_ms=50, connect_timeout=0.05)
        silent, silent_socket = _connection(memory_broker(), settings)
        beating, beating_socket = _connection(memory_broker(), settings)
        beating.data_received(b"CONNECT\naccept-version:1.2\nheart-beat:0,50\n\n\x00")
        await asyncio.sleep(0.2)
        assert silent_socket.aborted and silent.session is not None
        assert silent.session.close_reason == "no CONNECT in time"
        assert b"\n" in beating_socket.writes[1:] and not beating_socket.closed  # heart-beats
        beating.connection_lost(None)
        writes = len(beating_socket.writes)
        await asyncio.sleep(0.15)
        assert len(beating_socket.writes) == writes  # its timers stopped with it

    asyncio.run(main())


def test_the_connect_deadline_closes_a_silent_websocket() -> None:
    async def main() -> None:
        settings = StompSettings(connect_timeout=0.1)
        registry: set[Any] = set()
        runner, port = await start_site(create_app(memory_broker(), settings, registry))
        try:
            async with aiohttp.ClientSession() as http:
                ws = await http.ws_connect(f"http://127.0.0.1:{port}/ws", protocols=["v12.stomp"])
                msg = await asyncio.wait_for(ws.receive(), 5)
                assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
                assert not registry  # released
                ws = await http.ws_connect(f"http://127.0.0.1:{port}/ws", protocols=["v12.stomp"])
                await ws.send_str("CONNECT\naccept-version:1.2\n\n\x00")
                msg = await asyncio.wait_for(ws.receive(), 5)
                assert parse(msg.data.encode())[0].command == "CONNECTED"
                await asyncio.sleep(0.2)  # past the deadline: connected, it stays open
                assert not ws.closed and len(registry) == 1
                await ws.close()
        finally:
            await runner.cleanup()

    asyncio.run(main())
