"""STOMP producers and consumers of ``roost perf`` (``--protocol stomp`` over TCP, ``ws``
over WebSocket), on the broker's sans-IO STOMP codec and aiohttp's WebSocket client.

The queues are set up over AMQP as in every mode; producers SEND to ``/amq/queue/Q``
(or ``/exchange/E/KEY`` with ``-e``), consumers SUBSCRIBE to ``/amq/queue/Q`` with
``ack:auto`` (``-a``), ``client-individual`` or, with ``-A N``, ``client`` (one ACK
every N covers the ones before it) and ``prefetch-count`` (``-q``). The confirm window
(``-c``) counts RECEIPTs: the last SEND of each batch asks for one, and since a broker
handles a connection's frames in order, a receipt settles its SEND and those before.
Over WebSocket every frame is a message of its own, as browser clients send them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from roost.client.confirms import ConfirmTracker
from roost.perf.link_base import LinkBase, opened, subscribed
from roost.perf.options import TIMESTAMP_BYTES, Options
from roost.perf.stats import Tally
from roost.stomp.frame_encoding import serialize
from roost.stomp.frames import NEED_DATA, Frame, FrameParser

DEFAULT_PORTS = {"stomp": 61613, "stomps": 61614, "ws": 15674, "wss": 15673}
WS_QUEUE_HIGH = 1000  # frames waiting for the WebSocket writer before producers hold


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    user: str
    password: str
    vhost: str
    path: str = "/ws"  # WebSocket only


def target(opts: Options) -> Target:
    """``--stomp-url`` (or the default for ``--protocol``), with ``--url``'s user,
    password and vhost wherever it names none. A vhost: the path of a ``stomp://`` URL,
    ``?vhost=`` on a ``ws://`` one."""
    ep = opts.endpoint
    url = opts.stomp_url or (f"stomp://{ep.address[0]}:61613" if opts.protocol == "stomp"
                             else f"ws://{ep.address[0]}:15674/ws")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    wants = ("stomp", "stomps") if opts.protocol == "stomp" else ("ws", "wss")
    if scheme not in wants:
        raise ValueError(f"--protocol {opts.protocol} wants a {' or '.join(wants)} URL: {url}")
    vhost = ep.vhost
    if scheme.startswith("ws"):
        vhost = parse_qs(parts.query).get("vhost", [vhost])[0]
    elif parts.path not in ("", "/"):
        vhost = unquote(parts.path[1:])
    return Target(
        scheme, parts.hostname or "localhost", parts.port or DEFAULT_PORTS[scheme],
        unquote(parts.username) if parts.username is not None else ep.user,
        unquote(parts.password) if parts.password is not None else ep.password,
        vhost, parts.path or "/ws",
    )


class StompError(Exception):
    """The broker sent an ERROR frame, or the connection ended."""


class _Link(LinkBase):
    """One STOMP connection with the attributes perf's loops use (``worker.py``)."""

    def __init__(self, where: Target) -> None:
        super().__init__()
        self.where = where
        self.parser = FrameParser()
        self.paused = False
        self._bye: asyncio.Future[None] = self.loop.create_future()
        self._transport: asyncio.Transport | None = None
        self._ws: Any = None
        self._session: Any = None
        self._queue: list[bytes] = []  # frames for the WebSocket writer
        self._queued = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- plumbing ------------------------------------------------------------------------

    async def open(self) -> None:
        w = self.where
        tls = ssl.create_default_context() if w.scheme in ("stomps", "wss") else None
        if w.scheme.startswith("stomp"):
            await self.loop.create_connection(lambda: _Tcp(self), w.host, w.port, ssl=tls)
        else:
            import aiohttp

            self._session = aiohttp.ClientSession()
            scheme = "wss" if tls else "ws"
            self._ws = await self._session.ws_connect(
                f"{scheme}://{w.host}:{w.port}{w.path}", protocols=("v12.stomp",),
                max_msg_size=0, ssl=tls if tls else False)
            self._tasks += [self.loop.create_task(self._read_ws()),
                            self.loop.create_task(self._write_ws())]
        self.write(serialize("CONNECT", {
            "accept-version": "1.2", "host": w.vhost, "login": w.user,
            "passcode": w.password, "heart-beat": "0,0"}))
        await asyncio.wait_for(asyncio.shield(self.connected), 30)

    def write(self, data: bytes) -> None:
        if self._transport is not None:
            if not self._transport.is_closing():
                self._transport.write(data)
        elif self._ws is not None:
            self._queue.append(data)
            self.paused = len(self._queue) > WS_QUEUE_HIGH
            self._queued.set()

    def write_all(self, frames: list[bytes]) -> None:
        """Several frames: one write on TCP, one WebSocket message each."""
        if self._transport is not None:
            self.write(b"".join(frames))
            return
        for frame in frames:
            self.write(frame)

    async def _read_ws(self) -> None:
        async for msg in self._ws:
            data = msg.data
            self.feed(data.encode() if isinstance(data, str) else data)
        self.lost(None)

    async def _write_ws(self) -> None:
        while self.error is None:
            await self._queued.wait()
            self._queued.clear()
            frames, self._queue = self._queue, []
            for frame in frames:
                await self._ws.send_bytes(frame)
            self.paused = False
            self.wake()

    def feed(self, data: bytes) -> None:
        parser = self.parser
        parser.feed(data)
        frames = []
        while (frame := parser.next_frame()) is not NEED_DATA:
            frames.append(frame)
        self.frames_received(frames)  # type: ignore[arg-type]

    def frames_received(self, frames: list[Frame]) -> None:
        for frame in frames:
            self.frame(frame)

    def frame(self, frame: Frame) -> None:
        if frame.command == "CONNECTED":
            self.server = frame.headers.get("server", "").replace("/", " ")
            if not self.connected.done():
                self.connected.set_result(None)
        elif frame.command == "RECEIPT" and frame.headers.get("receipt-id") == "bye":
            if not self._bye.done():
                self._bye.set_result(None)
        elif frame.command == "ERROR":
            self.lost(StompError(f"ERROR {frame.headers.get('message', '')} "
                                 f"{frame.body[:200].decode(errors='replace')}".strip()))

    def lost(self, exc: BaseException | None) -> None:
        """After DISCONNECT's receipt the close is ours: no error."""
        self.ended(exc or StompError("the connection was closed"),
                   record=not self._bye.done(), waiting=(self._bye,))

    async def close(self, timeout: float = 2.0) -> None:
        """DISCONNECT and wait for its receipt: every frame before it was handled."""
        if self.error is None:
            self.write(serialize("DISCONNECT", {"receipt": "bye"}))
            # RabbitMQ's Web-STOMP closes without the receipt: the close says the same
            with contextlib.suppress(TimeoutError, StompError):
                await asyncio.wait_for(asyncio.shield(self._bye), timeout)
        if self._transport is not None:
            self._transport.close()
        if self._ws is not None:
            await self._ws.close()
            await self._session.close()
        for task in self._tasks:
            task.cancel()


class _Tcp(asyncio.Protocol):
    def __init__(self, link: _Link) -> None:
        self.link = link

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.link._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.link.feed(data)

    def pause_writing(self) -> None:
        self.link.paused = True

    def resume_writing(self) -> None:
        self.link.paused = False
        self.link.wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.lost(exc)


class Producer(_Link):
    def __init__(self, where: Target, opts: Options, queue: str) -> None:
        super().__init__(where)
        self.confirms = ConfirmTracker()
        self.window = opts.confirm
        self.sent = 0
        dest = (f"/exchange/{opts.exchange}/{opts.routing_key_for(queue)}" if opts.exchange
                else f"/amq/queue/{queue}")
        self.headers = {"destination": dest, **({"persistent": "true"}
                                                if opts.persistent else {})}
        self.resize(opts.size)

    def resize(self, size: int) -> None:
        """Bodies of ``size`` bytes from now on (``--variable-size``)."""
        self.body = bytes(size)
        self.body_tail = bytes(max(0, size - TIMESTAMP_BYTES))
        self.plain = serialize("SEND", self.headers, self.body)
        self.message_bytes = len(self.plain)

    @property
    def settled(self) -> int:
        return self.confirms.settled

    def send(self, n: int, stamp: bytes) -> None:
        body = stamp + self.body_tail if stamp else self.body
        one = serialize("SEND", self.headers, body) if stamp else self.plain
        self.sent += n
        frames = [one] * n
        if self.window:  # the batch's last SEND asks for a receipt: the confirm window
            frames[-1] = serialize("SEND", {**self.headers, "receipt": str(self.sent)}, body)
        self.write_all(frames)

    def frame(self, frame: Frame) -> None:
        receipt = frame.headers.get("receipt-id", "")
        if frame.command == "RECEIPT" and receipt.isdigit():
            self.confirms.settle(int(receipt), multiple=True)
            self.wake()
        else:
            super().frame(frame)


class Consumer(_Link):
    def __init__(self, where: Target, opts: Options, slot: int) -> None:
        super().__init__(where)
        self.tally = Tally()
        self.opts, self.slot = opts, slot
        self.ack = "auto" if opts.auto_ack else (
            "client-individual" if opts.multi_ack_every == 1 else "client")
        self.unacked = 0
        self.last_ack = ""

    async def subscribe(self) -> None:
        opts = self.opts
        headers = {"id": f"perf-{self.slot}", "destination": f"/amq/queue/"
                   f"{opts.queue_of(self.slot)}", "ack": self.ack, "receipt": "subscribed"}
        if opts.prefetch:
            headers["prefetch-count"] = str(opts.prefetch)
        self._subscribed: asyncio.Future[None] = self.loop.create_future()
        self.write(serialize("SUBSCRIBE", headers))
        await asyncio.wait_for(self._subscribed, 30)

    def frames_received(self, frames: list[Frame]) -> None:
        t = self.tally
        now = time.monotonic_ns()
        t.arrived(now)
        acks: list[bytes] = []
        for frame in frames:
            if frame.command != "MESSAGE":
                self.frame(frame)
                continue
            if not t.take(frame.body, now):
                continue  # -D reached, or the run is over: left unacked
            ack_id = frame.headers.get("ack", "")
            if self.ack == "client-individual":
                acks.append(serialize("ACK", {"id": ack_id}))
            elif self.ack == "client":
                self.unacked += 1
                self.last_ack = ack_id
                if self.unacked >= self.opts.multi_ack_every:
                    self.ack_up_to_last()
        t.counted()
        if acks:
            self.write_all(acks)
        if t.done:
            self.wake()

    def frame(self, frame: Frame) -> None:
        if frame.command == "RECEIPT" and frame.headers.get("receipt-id") == "subscribed":
            self._subscribed.set_result(None)
        else:
            super().frame(frame)

    def ack_up_to_last(self) -> None:
        if self.unacked and self.last_ack:
            self.write(serialize("ACK", {"id": self.last_ack}))
            self.unacked = 0

    def finish(self) -> None:
        self.tally.full = True
        if self.error is None:
            self.ack_up_to_last()


async def open_producer(opts: Options, slot: int) -> Producer:
    return await opened(Producer(target(opts), opts, opts.queue_of(slot)))


async def open_consumer(opts: Options, slot: int) -> Consumer:
    return await subscribed(Consumer(target(opts), opts, slot))
