"""The ``ssl.SSLContext`` for an ``amqps://`` endpoint, from its URI parameters.

The broker's certificate is verified (``verify_peer``) unless the URI says
``verify=verify_none``: against ``cacertfile`` when given, else the system's CAs. The
name checked is ``server_name_indication``, else the host; ``disable`` sends no name and
checks none (only the chain). RabbitMQ's Erlang client does not verify unless told to;
we fail closed instead, and say so in docs/client.md.
"""

from __future__ import annotations

import ssl

from roost.client.uri import Endpoint


def client_context(ep: Endpoint) -> ssl.SSLContext:
    """Raises ``ValueError`` naming the file that could not be loaded."""
    try:
        ctx = ssl.create_default_context(cafile=ep.cacertfile)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the CA bundle {ep.cacertfile}: {exc}") from exc
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not ep.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif ep.server_name == "":
        ctx.check_hostname = False  # the chain is still verified
    if ep.certfile:
        try:
            ctx.load_cert_chain(ep.certfile, ep.keyfile, password=ep.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot load the client certificate {ep.certfile}: {exc}") from exc
    return ctx


def server_hostname(ep: Endpoint) -> str | None:
    """The name sent in the TLS handshake (SNI) and checked against the certificate."""
    if ep.server_name is not None:
        return ep.server_name or None
    return ep.address[0]
