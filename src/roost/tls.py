"""TLS for every listener: the server's ``SSLContext``, the client certificate's user name,
and ``TLSListener``, which accepts sockets itself so that a failed handshake (a plaintext
client, an untrusted certificate) is logged with the peer's address. asyncio's own
``create_server(ssl=...)`` drops such a connection silently.

The TLS itself is Python's ``ssl`` module driven by asyncio (``connect_accepted_socket``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from roost.bind import listening_socket

log = logging.getLogger("roost.tls")

VERIFY_MODES = {
    "none": ssl.CERT_NONE,  # no client certificate asked for
    "peer": ssl.CERT_OPTIONAL,  # asked for and verified when sent (RabbitMQ's verify_peer)
    "require": ssl.CERT_REQUIRED,  # ... and a client without one is refused
}


def server_context(cert: str, key: str, ca: str | None, verify: str) -> ssl.SSLContext:
    """A server context; raises ``ValueError`` naming the file that could not be loaded."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # RabbitMQ's default versions: 1.2 and 1.3
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load TLS certificate {cert} / key {key}: {exc}") from exc
    if ca is not None:
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot load TLS CA bundle {ca}: {exc}") from exc
    ctx.verify_mode = VERIFY_MODES[verify]
    return ctx


def certificate_user(transport: Any) -> str | None:
    """The common name (CN) of the client's certificate, if it sent one that verified.

    ``getpeercert()`` is empty unless the certificate was verified against the CA, so an
    unverified certificate never names a user. With several CNs the first one counts.
    """
    cert = transport.get_extra_info("peercert") if transport is not None else None
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class TLSListener:
    """Accepts TCP connections and runs the TLS handshake for each before handing the
    connection to ``protocol_factory`` (an ``asyncio.Protocol`` factory, or aiohttp's
    ``runner.server``)."""

    def __init__(
        self,
        name: str,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        context: ssl.SSLContext,
        *,
        handshake_timeout: float,
        reuse_port: bool = False,
    ) -> None:
        self.name = name
        self.protocol_factory = protocol_factory
        self.context = context
        self.handshake_timeout = handshake_timeout
        self.reuse_port = reuse_port
        self.port = 0
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        sock = listening_socket(host, port, reuse_port=self.reuse_port)
        self._sock = sock
        self.port = int(sock.getsockname()[1])
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop(sock))
        return self.port

    @property
    def sockets(self) -> list[socket.socket]:
        """The listening socket (for options accepted sockets inherit, as keepalive)."""
        return [self._sock] if self._sock is not None else []

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except OSError as exc:  # EMFILE and friends: keep serving the others
                log.warning("%s: accept failed: %s", self.name, exc)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._handshake(conn, peer))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, conn: socket.socket, peer: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                self.protocol_factory,
                conn,
                ssl=self.context,
                ssl_handshake_timeout=self.handshake_timeout,
            )
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
            log.warning(
                "%s: TLS handshake failed on %s: %s", where, self.name, str(exc) or repr(exc)
            )
            conn.close()

    def close(self) -> None:
        """Stop accepting; connections already handed over are closed by their owners."""
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._handshakes):
            task.cancel()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self._handshakes) if t is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
