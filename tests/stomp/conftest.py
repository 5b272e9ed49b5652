"""STOMP test helpers: stomp.py connections with a listener that can be awaited."""

from __future__ import annotations

import contextlib
import queue
import socket
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import stomp
from stomp.utils import Frame as StompPyFrame

from tests.support import RoostProcess


class Inbox(stomp.ConnectionListener):
    """Collects MESSAGE, RECEIPT and ERROR frames in queues a test can wait on."""

    def __init__(self) -> None:
        self.messages: queue.Queue[StompPyFrame] = queue.Queue()
        self.receipts: queue.Queue[str] = queue.Queue()
        self.errors: queue.Queue[StompPyFrame] = queue.Queue()
        self.disconnected = queue.Queue[bool]()

    def on_message(self, frame: StompPyFrame) -> None:
        self.messages.put(frame)

    def on_receipt(self, frame: StompPyFrame) -> None:
        self.receipts.put(frame.headers["receipt-id"])

    def on_error(self, frame: StompPyFrame) -> None:
        self.errors.put(frame)

    def on_disconnected(self) -> None:
        self.disconnected.put(True)

    def message(self, timeout: float = 5.0) -> StompPyFrame:
        return self.messages.get(timeout=timeout)

    def no_message(self, wait: float = 0.3) -> None:
        try:
            frame = self.messages.get(timeout=wait)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected message {frame}")

    def receipt(self, timeout: float = 5.0) -> str:
        return self.receipts.get(timeout=timeout)


Connect = Callable[..., tuple[Any, Inbox]]


@pytest.fixture
def connect(roost: RoostProcess) -> Iterator[Connect]:
    """``connect(version="1.2", **connect_kwargs)`` -> (connection, inbox); closed after."""
    opened: list[Any] = []

    def _connect(
        version: str = "1.2", *, heartbeats: tuple[int, int] = (0, 0), **kwargs: Any
    ) -> tuple[Any, Inbox]:
        cls = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}
        hosts = [("127.0.0.1", roost.stomp_port)]
        conn = cls[version](hosts, heartbeats=heartbeats) if version != "1.0" else cls[version](
            hosts
        )
        inbox = Inbox()
        conn.set_listener("inbox", inbox)
        kwargs.setdefault("username", "guest")
        kwargs.setdefault("passcode", "guest")
        conn.connect(wait=True, **kwargs)
        opened.append(conn)
        return conn, inbox

    yield _connect
    for conn in opened:
        if conn.is_connected():
            # After an ERROR frame the server closes the socket; stomp.py may notice
            # it between the check and the DISCONNECT (no socket any more) or not at
            # all (a closed descriptor).
            with contextlib.suppress(OSError, stomp.exception.NotConnectedException):
                conn.disconnect()


class RawStomp:
    """A bare socket for frames no client library sends."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_until_closed(self) -> bytes:
        chunks = []
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        buf = b""
        while b"\x00" not in buf:
            data = self.sock.recv(65536)
            if not data:
                break
            buf += data
        return buf

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(roost: RoostProcess) -> Iterator[Callable[[], RawStomp]]:
    socks: list[RawStomp] = []

    def _raw() -> RawStomp:
        s = RawStomp(roost.stomp_port)
        socks.append(s)
        return s

    yield _raw
    for s in socks:
        s.close()


def queue_info(server: RoostProcess, name: str, vhost: str = "/") -> dict[str, Any]:
    """A queue as the management API shows it (ready and unacknowledged counts are live)."""
    url = f"{server.http_url}/api/queues/{quote(vhost, safe='')}/{quote(name, safe='')}"
    reply = httpx.get(url, auth=("guest", "guest"), timeout=5)
    reply.raise_for_status()
    info: dict[str, Any] = reply.json()
    return info


def bindings_of(server: RoostProcess, queue: str, vhost: str = "/") -> list[dict[str, Any]]:
    """A queue's bindings as the management API shows them."""
    url = f"{server.http_url}/api/queues/{quote(vhost, safe='')}/{quote(queue, safe='')}"
    reply = httpx.get(f"{url}/bindings", auth=("guest", "guest"), timeout=5)
    reply.raise_for_status()
    found: list[dict[str, Any]] = reply.json()
    return found


def subscription_queue(server: RoostProcess, sub_id: str) -> str:
    """The queue behind a STOMP subscription (its consumer tag is the subscription id)."""
    reply = httpx.get(f"{server.http_url}/api/consumers", auth=("guest", "guest"), timeout=5)
    reply.raise_for_status()
    names = [c["queue"]["name"] for c in reply.json() if c["consumer_tag"] == sub_id]
    assert len(names) == 1, f"subscription {sub_id!r}: {names}"
    return str(names[0])
