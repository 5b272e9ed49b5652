"""The link's asyncio plumbing: one TCP connection per pair of nodes, re-established.

Of two nodes, the one whose name sorts first dials and the other accepts, so a pair never
ends up with two connections. Each side's first frame is ``Hello`` (name, incarnation);
a peer that restarted says a new incarnation, and the old link's work is dropped as if
the link had gone down (``on_down``) before the new one comes up (``on_up``).

Frames queued in one loop turn go out in one write (``Encoder``). A link that has sent
nothing for ``heartbeat`` seconds sends a ``Heartbeat``; one that has received nothing
for ``dead_after`` is closed (a peer that hangs, or a cut network; a killed process
closes its sockets, and the link goes down at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from roost.cluster.link import fast
from roost.cluster.link import frames as f
from roost.cluster.link.codec import NEED_DATA, Encoder, LinkError, LinkReader

log = logging.getLogger("roost.cluster.link")

HEARTBEAT = 1.0
DEAD_AFTER = 6.0


@dataclass(frozen=True)
class Peer:
    name: str
    host: str
    port: int


class Link:
    """The live connection with one peer, as the rest of the cluster code sees it."""

    def __init__(self, manager: LinkManager, peer: str, incarnation: int) -> None:
        self.manager = manager
        self.peer = peer
        self.incarnation = incarnation
        self.protocol: LinkProtocol | None = None
        self.frames_in = 0
        self.frames_out = 0
        self.writes = 0

    @property
    def up(self) -> bool:
        return self.protocol is not None and not self.protocol.closed

    @property
    def writable(self) -> bool:
        """False while the kernel's send buffer is full (the peer reads slower)."""
        return self.up and self.protocol is not None and not self.protocol.paused

    def send(self, frame: f.Frame) -> bool:
        """Queue ``frame`` for this loop turn's write; False when the link is down."""
        if self.protocol is None or self.protocol.closed:
            return False
        self.protocol.queue(frame)
        self.frames_out += 1
        return True

    def send_publish(
        self,
        publish_id: int,
        flags: int,
        vhost: str,
        queue: str,
        exchange: str,
        routing_key: str,
        props: bytes,
        body: bytes,
    ) -> bool:
        """``send(Publish(...))`` to one queue, encoded without the frame object."""
        protocol = self.protocol
        if protocol is None or protocol.closed:
            return False
        parts, size = fast.publish_parts(
            publish_id, flags, vhost, queue, exchange, routing_key, props, body
        )
        protocol.out.add_batched(parts, size)
        protocol.plan_flush()
        self.frames_out += 1
        return True

    def close(self) -> None:
        if self.protocol is not None:
            self.protocol.close("closed by this node")


class LinkProtocol(asyncio.Protocol):
    """One TCP connection: reads frames, writes batches, keeps the heartbeat."""

    def __init__(self, manager: LinkManager, dialed: Peer | None = None) -> None:
        self.manager = manager
        self.dialed = dialed
        self.reader = LinkReader(manager.max_frame)
        self.out = Encoder(batching=False)  # until the peer's Hello says it reads them
        self.transport: asyncio.Transport | None = None
        self.link: Link | None = None
        self.closed = False
        self.paused = False
        self._flush_planned = False
        self._last_in = 0.0
        self._last_out = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        if self.dialed is not None:
            self.manager._newest[self.dialed.name] = self
        self._last_in = self._last_out = self.loop.time()
        self.queue(f.Hello(self.manager.node, self.manager.incarnation, f.LINK_VERSION))
        self._timer = self.loop.call_later(HEARTBEAT, self._tick)

    def queue(self, frame: f.Frame) -> None:
        self.out.add(frame)
        self.plan_flush()

    def plan_flush(self) -> None:
        if not self._flush_planned:
            self._flush_planned = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_planned = False
        transport = self.transport
        if self.out and transport is not None and not self.closed:
            if transport.is_closing():  # replaced by a new connection in this turn
                self.out.take()
                return
            try:
                transport.write(self.out.take())
            except RuntimeError:  # uvloop: closed by the peer (a reset) but not closing
                return  # the frames were lost with it: link-down handling follows
            self._last_out = self.loop.time()
            if self.link is not None:
                self.link.writes += 1

    def data_received(self, data: bytes) -> None:
        self._last_in = self.loop.time()
        self.reader.feed(data)
        try:
            while (frame := self.reader.next_frame()) is not NEED_DATA:
                assert not isinstance(frame, type(NEED_DATA))
                if self.link is None:
                    self._hello(frame)
                    continue
                self.link.frames_in += 1
                if not isinstance(frame, f.Heartbeat):
                    self.manager.on_frame(self.link, frame)
                if self.closed:
                    return
        except LinkError as exc:
            log.warning("link with %s: %s; reconnecting", self._who, exc)
            self.close(str(exc))

    @property
    def _who(self) -> str:
        if self.link is not None:
            return repr(self.link.peer)
        return repr(self.dialed.name) if self.dialed else "a peer"

    def _hello(self, frame: f.Frame) -> None:
        if not isinstance(frame, f.Hello):
            raise LinkError(f"expected Hello, got {type(frame).__name__}")
        if self.dialed is not None and frame.node != self.dialed.name:
            raise LinkError(f"dialed {self.dialed.name!r} but {frame.node!r} answered")
        self.out.batching = frame.version >= 2  # an older build cannot read a Batch
        self.link = self.manager._attach(self, frame)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.link is not None:
            self.manager.on_writable(self.link)

    def _tick(self) -> None:
        if self.closed:
            return
        now = self.loop.time()
        if now - self._last_in > self.manager.dead_after:
            log.warning("link with %s silent for %.1f s; closing", self._who, now - self._last_in)
            self.close("peer silent")
            return
        if now - self._last_out >= HEARTBEAT and not self.out:
            self.queue(f.Heartbeat())
        self._timer = self.loop.call_later(HEARTBEAT, self._tick)

    def close(self, why: str) -> None:
        if self.transport is not None and not self.closed:
            self._flush()
            self.transport.close()
        self._closed(why)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed(str(exc) if exc else "connection closed")

    def _closed(self, why: str) -> None:
        if self.closed:
            return
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        if self.link is not None:
            self.manager._detach(self, why)
        # only the newest connection dialed to a peer is redialed: an older one closed
        # because that one replaced it would dial again and replace it in turn, every
        # 50 ms for ever (the link down and up each time: publishes nacked, sessions gone)
        if self.dialed is not None and self.manager._newest.get(self.dialed.name) is self:
            self.manager._redial(self.dialed)


class LinkManager:
    """This node's links: it listens on the cluster port, dials the peers it should, and
    tells its owner about links up and down and every frame that arrives."""

    def __init__(
        self,
        node: str,
        *,
        on_frame: Callable[[Link, f.Frame], None],
        on_up: Callable[[Link], None] = lambda link: None,
        on_down: Callable[[Link, str], None] = lambda link, why: None,
        on_writable: Callable[[Link], None] = lambda link: None,
        max_frame: int = 256 * 1024 * 1024,
        dead_after: float = DEAD_AFTER,
    ) -> None:
        self.node = node
        # a new number at every start: a peer tells a restarted node from a reconnect
        self.incarnation = int.from_bytes(os.urandom(8), "big")
        self.on_frame = on_frame
        self.on_up = on_up
        self.on_down = on_down
        self.on_writable = on_writable
        self.max_frame = max_frame
        self.dead_after = dead_after
        self.links: dict[str, Link] = {}
        self.peers: dict[str, Peer] = {}
        self._server: asyncio.base_events.Server | None = None
        self._dialing: dict[str, asyncio.Task[None]] = {}
        self._newest: dict[str, LinkProtocol] = {}  # peer -> the last connection dialed
        self._closing = False
        self.port = 0

    async def listen(self, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: LinkProtocol(self), host=host, port=port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def set_peers(self, peers: list[Peer]) -> None:
        """The running peers (from membership): dial those this node should dial, stop
        dialing those that are gone."""
        wanted = {p.name: p for p in peers if p.name != self.node}
        for name in list(self.peers):
            if name not in wanted:
                del self.peers[name]
                task = self._dialing.pop(name, None)
                if task is not None:
                    task.cancel()
        for name, peer in wanted.items():
            known = self.peers.get(name)
            self.peers[name] = peer
            if self.node < name and (known != peer or name not in self._dialing):
                link = self.links.get(name)
                # a peer that registered again (its lease expired during a pause) comes
                # back with ``known`` None: its link, if still up, is kept
                if link is None or not link.up or (known is not None and known != peer):
                    self._dial(peer, delay=0.0)

    def _dial(self, peer: Peer, delay: float) -> None:
        if self._closing:
            return
        old = self._dialing.pop(peer.name, None)
        if old is not None and old is not asyncio.current_task():
            old.cancel()
        self._dialing[peer.name] = asyncio.get_running_loop().create_task(
            self._dial_loop(peer, delay)
        )

    async def _dial_loop(self, peer: Peer, delay: float) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing and self.peers.get(peer.name) == peer:
            if delay:
                await asyncio.sleep(delay)
            try:
                await loop.create_connection(lambda: LinkProtocol(self, peer), peer.host, peer.port)
                self._dialing.pop(peer.name, None)
                return
            except OSError as exc:
                log.debug("dialing %s at %s:%d: %s", peer.name, peer.host, peer.port, exc)
                delay = min(max(delay * 2, 0.05), 1.0)

    def _redial(self, peer: Peer) -> None:
        if not self._closing and self.peers.get(peer.name) == peer:
            self._dial(peer, delay=0.05)

    def _attach(self, protocol: LinkProtocol, hello: f.Hello) -> Link:
        link = self.links.get(hello.node)
        if link is not None and link.protocol is not None and not link.protocol.closed:
            if link.incarnation == hello.incarnation:
                link.protocol.close("replaced by a new connection")
            else:
                link.protocol.close("the peer restarted")
        link = self.links.get(hello.node)  # closing may have detached it
        if link is None or link.incarnation != hello.incarnation:
            link = Link(self, hello.node, hello.incarnation)
            self.links[hello.node] = link
        link.protocol = protocol
        log.info("link with %s up", hello.node)
        self.on_up(link)
        return link

    def _detach(self, protocol: LinkProtocol, why: str) -> None:
        link = protocol.link
        if link is None or link.protocol is not protocol:
            return
        link.protocol = None
        log.info("link with %s down (%s)", link.peer, why)
        self.on_down(link, why)

    def link(self, peer: str) -> Link | None:
        found = self.links.get(peer)
        return found if found is not None and found.up else None

    async def close(self) -> None:
        self._closing = True
        for task in self._dialing.values():
            task.cancel()
        self._dialing.clear()
        if self._server is not None:
            self._server.close()
        for link in list(self.links.values()):
            link.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
