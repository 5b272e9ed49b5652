"""StompHandler without sockets: a fake transport on an in-memory broker."""

from __future__ import annotations

import asyncio

from roost.stomp.frames import NEED_DATA, Frame, FrameParser
from roost.stomp.handler import StompHandler, StompSettings
from tests.brokers import memory_broker


class FakeTransport:
    peer = "127.0.0.1:5000"
    cert_user: str | None = None
    tls = False

    def __init__(self) -> None:
        self.data = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self, *, going_away: bool = False) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def frames(self) -> list[Frame]:
        parser = FrameParser()
        parser.feed(self.data)
        out = []
        while (f := parser.next_frame()) is not NEED_DATA:
            assert isinstance(f, Frame)
            out.append(f)
        return out


def run(coro_fn):  # type: ignore[no-untyped-def]
    return asyncio.run(coro_fn())


def test_send_subscribe_ack_in_process() -> None:
    async def main() -> None:
        broker = memory_broker()
        registry: set[object] = set()
        t = FakeTransport()
        h = StompHandler(broker, StompSettings(), t, registry, clock=asyncio.get_running_loop())
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
        t = FakeTransport()
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
