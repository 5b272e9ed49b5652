"""Every socket the server listens on: a TCP listener on each ``--bind`` address with
keepalive on (inherited by accepted sockets), a TLS listener with its handshake
deadline, the aiohttp runners of the HTTP-based endpoints, each listed for the
management API under RabbitMQ's listener name and logged; closed together at
shutdown."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any

from roost.bind import host_port, listening_socket, on_each_address
from roost.config import Config
from roost.core.info import ListenerInfo
from roost.keepalive import Keepalive
from roost.tls import TLSListener

log = logging.getLogger("roost.server")


class Listeners:
    def __init__(
        self,
        config: Config,
        tls_context: ssl.SSLContext | None,
        on_listening: Callable[[ListenerInfo], None],
    ) -> None:
        """``on_listening``: told of each listener opened (the overview and health
        checks list them)."""
        self.config = config
        self.tls_context = tls_context
        self.on_listening = on_listening
        self.ports: dict[str, int] = {}  # the port each protocol got (0 asks for a free one)
        self.keepalive = Keepalive(
            config.tcp_keepalive_idle, config.tcp_keepalive_interval, config.tcp_keepalive_count
        )
        self._tcp: list[asyncio.base_events.Server] = []
        self._tls: list[TLSListener] = []

    async def tcp(
        self, factory: Callable[[], Any], port: int, protocol: str, what: str, suffix: str = ""
    ) -> int:
        """A TCP listener on each --bind address; ``protocol`` is RabbitMQ's listener
        name in /api/overview. Returns the port."""
        loop = asyncio.get_running_loop()

        async def open_one(address: str, port: int) -> int:
            sock = listening_socket(address, port, reuse_port=self.config.reuse_port)
            try:
                listener = await loop.create_server(factory, sock=sock, backlog=1024)
            except BaseException:
                sock.close()
                raise
            self.keepalive.apply(listener.sockets)
            self._tcp.append(listener)
            return int(listener.sockets[0].getsockname()[1])

        for address, got in await on_each_address(self.config.bind_addresses, port, what, open_one):
            self.on_listening(ListenerInfo(protocol, address, got))
            log.info("%s listening on %s%s", what, host_port(address, got), suffix)
        return got

    async def tls(self, protocol: str, what: str, factory: Callable[[], Any], port: int) -> None:
        """A TLS listener: ``protocol`` is RabbitMQ's listener name in /api/overview."""
        assert self.tls_context is not None
        cfg = self.config

        async def open_one(address: str, port: int) -> int:
            assert self.tls_context is not None
            listener = TLSListener(
                protocol,
                factory,
                self.tls_context,
                handshake_timeout=cfg.handshake_timeout,
                reuse_port=cfg.reuse_port,
            )
            got = await listener.start(address, port)
            self.keepalive.apply(listener.sockets)
            self._tls.append(listener)
            return got

        for address, got in await on_each_address(cfg.bind_addresses, port, what, open_one):
            self.ports[protocol] = got
            self.on_listening(ListenerInfo(protocol, address, got))
            log.info(
                "%s listening on %s (client certificates: %s)",
                what,
                host_port(address, got),
                cfg.tls_verify_mode,
            )

    def web_runner(self, app: Any) -> Any:
        """An aiohttp runner whose idle-connection deadline is --handshake-timeout: a
        connection that does not complete a request's headers in time (slowloris), and an
        idle keep-alive connection, is closed then (aiohttp's default is an hour)."""
        from aiohttp import web

        return web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=2.0,
            keepalive_timeout=self.config.handshake_timeout,
        )

    def close(self) -> None:
        """Stop accepting."""
        for listener in self._tcp:
            listener.close()
        for tls_listener in self._tls:
            tls_listener.close()

    async def wait_closed(self) -> None:
        for listener in self._tcp:
            await listener.wait_closed()
        for tls_listener in self._tls:
            await tls_listener.wait_closed()
