"""StompHandler without sockets on an asyncio loop: a fake plumbing (tests/stomp/
test_session.py) carries out its effects, on an in-memory broker."""

from __future__ import annotations

import asyncio

from roost.stomp.handler import StompHandler, StompSettings
from tests.brokers import memory_broker
from tests.stomp.sessions import FakePlumbing


def run(coro_fn):  # type: ignore[no-untyped-def]
    return asyncio.run(coro_fn())


def test_send_subscribe_ack_in_process() -> None:
    async def main() -> None:
        broker = memory_broker()
        registry: set[object] = set()
        t = FakePlumbing(asyncio.get_running_loop())
        h = StompHandler(broker, StompSettings(), t, registry, clock=asyncio.get_running_loop(),
                         wake=t.wake)  # fmt: skip
        t.handler = h
        h.data_received(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00")
        h.data_received(b"SUBSCRIBE\nid:s\ndestination:/queue/u\nack:client\nreceipt:r\n\n\x00")
        await asyncio.sleep(0)
        h.data_received(b"SEND\ndestination:/queue/u\n\nbody\x00")
        frames = t.frames()
        assert [f.command for f in frames] == ["CONNECTED", "RECEIPT", "MESSAGE"]
        msg = frames[-1]
        assert msg.body == b"body" and msg.headers["ack"] == msg.headers["message-id"]
        assert broker.vhosts["/"].queues["u"].unacked == 1
        h.data_received(f"ACK\nid:{msg.headers['ack']}\n\n\x00".encode())
        assert broker.vhosts["/"].queues["u"].unacked == 0
        h.connection_lost()
        assert not registry and not broker.connections.clients

    run(main)


def test_dead_connection_requeues_unacked_at_once() -> None:
    async def main() -> None:
        broker = memory_broker()
        t = FakePlumbing()
        h = StompHandler(broker, StompSettings(), t, set(), clock=asyncio.get_running_loop())
        h.data_received(b"CONNECT\naccept-version:1.2\n\n\x00")
        h.data_received(b"SUBSCRIBE\nid:s\ndestination:/queue/d\nack:client-individual\n\n\x00")
        await asyncio.sleep(0)
        h.data_received(b"SEND\ndestination:/queue/d\n\nx\x00")
        queue = broker.vhosts["/"].queues["d"]
        assert queue.unacked == 1 and queue.message_count == 0
        h.connection_lost()
        assert queue.unacked == 0 and queue.message_count == 1

    run(main)
