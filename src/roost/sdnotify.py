"""systemd's readiness protocol (sd_notify(3)): one datagram to $NOTIFY_SOCKET.

A unit with ``Type=notify`` (contrib/roost.service) counts the broker as started only
when it says ``READY=1``, which the server sends once every listener is open, so units
ordered after it (``After=roost.service``) find the ports answering. The protocol is one
``AF_UNIX`` datagram of ``KEY=VALUE`` lines; a name starting with ``@`` is in the
abstract namespace. Without $NOTIFY_SOCKET (not under systemd) every call does nothing.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("roost.server")


def notify(*lines: str) -> bool:
    """Send ``lines`` (``READY=1``, ``STATUS=…``, ``STOPPING=1``) as one datagram.
    Returns whether it was sent; a failure is logged, never raised: readiness is a
    courtesy to the service manager, not a reason to stop serving."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall("\n".join(lines).encode("utf-8"))
    except OSError as exc:
        log.warning("could not notify systemd at %s: %s", path, exc)
        return False
    log.debug("notified systemd: %s", " ".join(lines))
    return True
