"""Listening on every ``--bind`` address: one socket per address, all on the port asked
for. An address the machine does not have (no IPv6 loopback in a container, say) is
skipped with a warning, as long as another one binds."""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable

log = logging.getLogger("roost.server")

# the machine lacks the address or its family; anything else (in use, denied) is fatal
UNAVAILABLE = frozenset({errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT})


def host_port(address: str, port: int) -> str:
    """``127.0.0.1:5672``, ``[::1]:5672``."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


async def on_each_address(
    addresses: list[str],
    port: int,
    what: str,
    open_one: Callable[[str, int], Awaitable[int]],
) -> list[tuple[str, int]]:
    """``open_one(address, port)`` for each address (it returns the port it got);
    returns the (address, port) pairs that listen. Raises when none can."""
    bound: list[tuple[str, int]] = []
    skipped: list[str] = []
    for address in addresses:
        try:
            got = await open_one(address, port)
        except OSError as exc:
            if exc.errno not in UNAVAILABLE and not isinstance(exc, socket.gaierror):
                raise
            log.warning("%s: not listening on %s: %s", what, address, exc.strerror or exc)
            skipped.append(address)
            continue
        bound.append((address, got))
    if not bound:
        raise OSError(
            errno.EADDRNOTAVAIL, f"{what}: none of the --bind addresses is available: {skipped}"
        )
    return bound


def listening_socket(address: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A bound, listening, non-blocking TCP socket (IPv6 ones take IPv6 only, so that
    ``::`` and ``0.0.0.0`` can both be bound); ``reuse_port``: SO_REUSEPORT, so several
    nodes on one machine share the port (``--reuse-port``)."""
    family, kind, proto, _, sockaddr = socket.getaddrinfo(
        address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(sockaddr)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
