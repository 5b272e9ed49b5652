"""TLS test support: a throwaway PKI made with trustme, and a Roost server with its TLS
listeners (AMQPS, STOMP over TLS, WSS, HTTPS) on free ports."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import trustme

from tests.support import RoostProcess, free_port


@dataclass
class ClientCert:
    cert: Path  # certificate chain (PEM)
    key: Path

    def context(self, pki: PKI) -> ssl.SSLContext:
        ctx = pki.client_context()
        ctx.load_cert_chain(self.cert, self.key)
        return ctx


class PKI:
    """A CA, the server's certificate for 127.0.0.1/localhost, and client certificates
    whose CN names a user. ``stranger`` comes from a CA the server does not trust."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = trustme.CA()
        self.ca_file = root / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        server = self.ca.issue_cert("127.0.0.1", "::1", "localhost")
        self.server_cert = root / "server.pem"
        self.server_key = root / "server.key"
        server.cert_chain_pems[0].write_to_path(str(self.server_cert))
        for pem in server.cert_chain_pems[1:]:
            pem.write_to_path(str(self.server_cert), append=True)
        server.private_key_pem.write_to_path(str(self.server_key))
        self._other_ca = trustme.CA()

    def client_cert(self, cn: str, *, trusted: bool = True) -> ClientCert:
        ca = self.ca if trusted else self._other_ca
        leaf = ca.issue_cert(f"{cn}.clients.example", common_name=cn)
        prefix = "" if trusted else "untrusted-"
        cert, key = self.root / f"{prefix}{cn}.pem", self.root / f"{prefix}{cn}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        return ClientCert(cert, key)

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts the server (and sends no certificate)."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        self.ca.configure_trust(ctx)
        return ctx

    def server_args(self, verify: str | None = None, *, ca: bool = True) -> list[str]:
        args = ["--tls-cert", str(self.server_cert), "--tls-key", str(self.server_key)]
        if ca:
            args += ["--tls-ca", str(self.ca_file)]
        if verify is not None:
            args += ["--tls-verify", verify]
        return args


TLS_PORTS = ("amqps", "stomps", "wss", "https", "mqtts", "mqtt_wss")


class TLSRoost(RoostProcess):
    """``RoostProcess`` plus free TLS ports (those named in ``tls_ports``; the others are
    left to the config), picked afresh on every attempt."""

    def __init__(
        self, data_dir: Path, *extra: str, tls_ports: tuple[str, ...] = TLS_PORTS, **kwargs: Any
    ) -> None:
        super().__init__(data_dir, *extra, **kwargs)
        self._base_extra = list(extra)
        self._tls_ports = tls_ports
        self.amqps_port = self.stomps_port = self.wss_port = self.https_port = 0
        self.mqtts_port = self.mqtt_wss_port = 0

    def start(self, timeout: float = 20.0) -> TLSRoost:
        for attempt in range(3):
            self.extra = list(self._base_extra)
            for name in self._tls_ports:
                port = free_port()
                setattr(self, f"{name}_port", port)
                self.extra += [f"--{name.replace('_', '-')}-port", str(port)]
            try:
                super().start(timeout)
                return self
            except RuntimeError:
                if attempt == 2 or "address already in use" not in self.log.lower():
                    raise
                self.log_lines.clear()
        raise AssertionError("unreachable")

    @property
    def https_url(self) -> str:
        return f"https://127.0.0.1:{self.https_port}"


@contextlib.asynccontextmanager
async def wss_connect(
    url: str, ctx: ssl.SSLContext
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """A STOMP WebSocket over TLS. At exit it waits until the socket is really closed:
    a TLS transport finishes its shutdown after the session is gone, and a test's event
    loop must not close before that (or the socket leaks)."""
    sockets: list[socket.socket] = []

    def make_socket(addr: Any) -> socket.socket:
        family, kind, proto, _, _ = addr
        sock = socket.socket(family, kind, proto)
        sockets.append(sock)
        return sock

    connector = aiohttp.TCPConnector(socket_factory=make_socket)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.ws_connect(url, ssl=ctx, protocols=("v12.stomp",)) as ws,
    ):
        yield ws
    deadline = asyncio.get_running_loop().time() + 5.0
    while any(s.fileno() != -1 for s in sockets):
        assert asyncio.get_running_loop().time() < deadline, "the TLS socket never closed"
        await asyncio.sleep(0.01)
