"""roost/plumbing.py on a fake socket: writes batched per read and per turn of the
loop, the FLUSH_AT threshold, reading paused once, writability and the close reason
forwarded."""

from __future__ import annotations

import asyncio
from typing import Any

from roost import plumbing
from roost.plumbing import TcpPlumbing


class FakeSocket:
    """What an asyncio transport shows a Protocol; every write is recorded."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.lines: list[list[bytes | memoryview]] = []  # writelines calls
        self.closing = False
        self.aborted = False
        self.pauses = 0
        self.resumes = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        assert not self.closing
        self.writes.append(data)

    def writelines(self, parts: list[bytes | memoryview]) -> None:
        assert not self.closing
        self.lines.append(list(parts))

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True

    def pause_reading(self) -> None:
        self.pauses += 1

    def resume_reading(self) -> None:
        self.resumes += 1


class EchoSession:
    """Writes each byte it reads back as a frame of its own."""

    def __init__(self, transport: TcpPlumbing[EchoSession]) -> None:
        self.transport = transport
        self.close_reason = ""
        self.lost = 0

    def data_received(self, data: bytes) -> None:
        for byte in data:
            self.transport.write(bytes([byte]))

    def connection_lost(self) -> None:
        self.lost += 1


class EchoProtocol(TcpPlumbing[EchoSession]):
    def __init__(self) -> None:
        super().__init__()
        self.writable: list[bool] = []

    def start(self) -> EchoSession:
        return EchoSession(self)

    def writable_changed(self, writable: bool) -> None:
        self.writable.append(writable)


def connect() -> tuple[EchoProtocol, FakeSocket]:
    protocol, sock = EchoProtocol(), FakeSocket()
    protocol.connection_made(sock)  # type: ignore[arg-type]
    return protocol, sock


def test_a_read_is_answered_in_one_write() -> None:
    async def run() -> None:
        protocol, sock = connect()
        assert protocol.peer == "127.0.0.1:5555" and not protocol.tls
        protocol.data_received(b"abc")
        assert sock.writes == [b"abc"]  # at the end of the read, not per frame

    asyncio.run(run())


def test_writes_outside_a_read_go_out_once_per_turn_of_the_loop() -> None:
    async def run() -> None:
        protocol, sock = connect()
        protocol.write(b"1")
        protocol.write(b"2")
        assert sock.writes == []  # held until the loop turns
        await asyncio.sleep(0)
        assert sock.writes == [b"12"]
        protocol.write(b"3")
        await asyncio.sleep(0)
        assert sock.writes == [b"12", b"3"]

    asyncio.run(run())


def test_a_backlog_of_flush_at_bytes_goes_out_at_once() -> None:
    async def run() -> None:
        protocol, sock = connect()
        half = b"x" * (plumbing.FLUSH_AT // 2)
        protocol.write(half)
        assert sock.writes == []
        protocol.write(half)  # the threshold: no waiting for the turn
        assert sock.writes == [half + half]
        protocol.write(b"tail")
        await asyncio.sleep(0)
        assert sock.writes == [half + half, b"tail"]

    asyncio.run(run())


def test_a_batch_with_a_view_goes_with_writelines_and_the_view_is_not_copied() -> None:
    """A stream chunk written as a view of the bytes read from its segment reaches the
    socket as that view (uvloop sends the parts with writev), not joined into a copy."""

    async def run() -> None:
        protocol, sock = connect()
        stored = b"chunk bytes as read from the segment"
        view = memoryview(stored)[6:11]
        protocol.write(b"head")
        protocol.write(view)
        await asyncio.sleep(0)
        assert sock.writes == [] and len(sock.lines) == 1
        head, sent = sock.lines[0]
        assert head == b"head" and sent is view and bytes(sent) == b"bytes"
        protocol.write(b"plain")  # no view in this batch: one joined write again
        await asyncio.sleep(0)
        assert sock.writes == [b"plain"] and len(sock.lines) == 1

    asyncio.run(run())


def test_close_sends_what_is_queued_and_abort_drops_it() -> None:
    async def run() -> None:
        protocol, sock = connect()
        protocol.write(b"bye")
        protocol.close()
        assert sock.writes == [b"bye"] and sock.closing
        protocol, sock = connect()
        protocol.write(b"lost")
        protocol.abort()
        await asyncio.sleep(0)
        assert sock.writes == [] and sock.aborted

    asyncio.run(run())


def test_reading_is_paused_and_resumed_once_each() -> None:
    async def run() -> None:
        protocol, sock = connect()
        protocol.resume_reading()  # already reading
        protocol.pause_reading()
        protocol.pause_reading()
        protocol.resume_reading()
        protocol.resume_reading()
        assert (sock.pauses, sock.resumes) == (1, 1)
        sock.closing = True
        protocol.pause_reading()  # a closing socket is left alone
        assert sock.pauses == 1

    asyncio.run(run())


def test_writability_and_the_lost_connection_reach_the_session() -> None:
    async def run() -> None:
        protocol, _ = connect()
        session = protocol.session
        assert session is not None
        protocol.pause_writing()
        protocol.resume_writing()
        assert protocol.writable == [False, True]
        protocol.connection_lost(ConnectionResetError("reset by peer"))
        assert session.close_reason == "connection lost (reset by peer)"
        assert session.lost == 1 and protocol.session is None
        protocol.write(b"late")  # after the end: dropped, not an error
        await asyncio.sleep(0)

    asyncio.run(run())
