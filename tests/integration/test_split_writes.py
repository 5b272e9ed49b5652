"""Frames split across writes byte by byte, as a slow link or a client that writes each
byte on its own delivers them: pika and stomp.py go through a proxy that forwards what
they write one byte per write (pausing every few bytes so that the broker reads partial
frames), and every message arrives whole and in order."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pika
import pytest
import stomp

from tests.support import RoostProcess

N = 100


class ByteProxy:
    """Loopback proxy to ``target``; client-to-broker bytes go one per write."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self.loop.run_until_complete, args=(self._serve(),),
                                        daemon=True)
        self._stop: asyncio.Event | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
        for w in self._writers:
            w.close()
        await asyncio.sleep(0.1)  # the closes go through

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        br, bw = await asyncio.open_connection("127.0.0.1", self.target)
        self._writers += [cw, bw]
        bw.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        async def up() -> None:
            while data := await cr.read(65536):
                for i in range(len(data)):
                    bw.write(data[i : i + 1])
                    await bw.drain()
                    if i % 37 == 0:
                        await asyncio.sleep(0.001)  # the broker reads what came so far
            bw.close()

        async def down() -> None:
            while data := await br.read(65536):
                cw.write(data)
                await cw.drain()
            cw.close()

        await asyncio.gather(up(), down(), return_exceptions=True)

    def __enter__(self) -> ByteProxy:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def amqp_proxy(roost: RoostProcess) -> Iterator[int]:
    with ByteProxy(roost.amqp_port) as proxy:
        yield proxy.port


@pytest.fixture
def stomp_proxy(roost: RoostProcess) -> Iterator[int]:
    with ByteProxy(roost.stomp_port) as proxy:
        yield proxy.port


def body(i: int) -> bytes:
    return f"m{i}".encode().ljust(300, b".")


def test_pika_publishes_split_byte_by_byte(amqp_proxy: int, qname: str) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_proxy,
                                                             heartbeat=0))
    try:
        ch = conn.channel()
        ch.queue_declare(qname)
        ch.confirm_delivery()
        for i in range(N):
            ch.basic_publish("", qname, body(i),
                             pika.BasicProperties(headers={"i": i}, content_type="text/plain"))
        got: list[tuple[int, bytes]] = []
        for method, props, data in ch.consume(qname, inactivity_timeout=30):
            assert method is not None, f"only {len(got)} of {N} arrived"
            got.append((props.headers["i"], data))
            ch.basic_ack(method.delivery_tag)
            if len(got) == N:
                break
        ch.cancel()
        ch.queue_delete(qname)
    finally:
        conn.close()
    assert got == [(i, body(i)) for i in range(N)]


def test_stomp_sends_split_byte_by_byte(stomp_proxy: int, qname: str) -> None:
    got: list[stomp.utils.Frame] = []
    done = threading.Event()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame: stomp.utils.Frame) -> None:
            got.append(frame)
            if len(got) == N:
                done.set()

    conn = stomp.Connection12([("127.0.0.1", stomp_proxy)], heartbeats=(0, 0))
    conn.set_listener("l", Listener())
    conn.connect("guest", "guest", wait=True)
    try:
        dest = f"/queue/{qname}"
        conn.subscribe(dest, id="1", ack="client-individual")
        for i in range(N):
            conn.send(dest, body(i).decode(), headers={"i": str(i)})
        assert done.wait(60), f"only {len(got)} of {N} arrived"
        for frame in got:
            conn.ack(frame.headers["ack"], "1")
    finally:
        conn.disconnect()
    assert [(int(f.headers["i"]), f.body) for f in got] == [(i, body(i).decode())
                                                              for i in range(N)]
