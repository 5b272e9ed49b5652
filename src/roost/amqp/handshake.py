"""The AMQP connection handshake: what the server says (its limits, tuned with the
client; its properties and capabilities and the mechanisms it offers, in
connection.start) and what it does with the client's answers (start-ok: capabilities
and the login; open: the core connection), through the shared connection lifecycle
(roost/lifecycle.py)."""

from __future__ import annotations

import logging
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roost import __version__
from roost.amqp import codec_methods as m
from roost.amqp.codec import decode_table, encode_method_frame
from roost.amqp.errors import ConnectionError, reply_text
from roost.core.errors import AccessRefused, BrokerError
from roost.lifecycle import login, open_client, plain_credentials

if TYPE_CHECKING:
    from roost.amqp.session import AMQPSession

log = logging.getLogger("roost.amqp")

CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "consumer_priorities": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
    "direct_reply_to": True,
}


@dataclass(frozen=True)
class AMQPLimits:
    channel_max: int = 2047
    frame_max: int = 131072
    heartbeat: int = 60
    max_message_size: int = 128 * 1024 * 1024
    handshake_timeout: float = 10.0


def server_properties(cluster_name: str) -> dict[str, Any]:
    """``cluster_name``: the port's ``cluster_name()``, which federation's loop detection
    (``x-received-from``) compares with its own."""
    return {
        "product": "Roost",
        "version": __version__,
        "platform": f"Python {platform.python_version()}",
        "copyright": "Roost developers",
        "information": "Licensed under the Apache License 2.0",
        "cluster_name": cluster_name,
        "capabilities": dict(CAPABILITIES),
    }


def mechanisms(tls: bool) -> bytes:
    # EXTERNAL on every TLS connection, as RabbitMQ's rabbitmq_auth_mechanism_ssl
    # offers it: without a verified certificate the login is refused (403), which
    # tells the client more than a mechanism it cannot negotiate
    return b"PLAIN AMQPLAIN EXTERNAL" if tls else b"PLAIN AMQPLAIN"


def parse_credentials(mechanism: str, response: bytes) -> tuple[str, str]:
    """(username, password) from a PLAIN or AMQPLAIN start-ok response."""
    if mechanism == "PLAIN":
        credentials = plain_credentials(response)
        if credentials is None:
            raise AccessRefused("malformed PLAIN response")
        return credentials
    if mechanism == "AMQPLAIN":
        # a field table without its length prefix (what pika and py-amqp send)
        table, _ = decode_table(
            memoryview(len(response).to_bytes(4, "big") + response), 0
        )
        user, password = table.get("LOGIN", ""), table.get("PASSWORD", "")
        if isinstance(user, bytes):
            user = user.decode("utf-8", "replace")
        if isinstance(password, bytes):
            password = password.decode("utf-8", "replace")
        return str(user), str(password)
    raise ConnectionError(
        m.COMMAND_INVALID,
        reply_text(m.COMMAND_INVALID, f"unknown authentication mechanism '{mechanism}'"),
        10,
        11,
    )


def start_ok(session: AMQPSession, method: m.ConnectionStartOk) -> None:
    """connection.start-ok: the client's capabilities, then its login (tune, or a
    refusal: connection.close 403 if it understands one, else the socket closes)."""
    props = method.client_properties or {}
    session.client_properties = props
    caps = props.get("capabilities") or {}
    session.cancel_notify = bool(caps.get("consumer_cancel_notify"))
    session.auth_failure_close = bool(caps.get("authentication_failure_close"))
    session.blocked_notify = bool(caps.get("connection.blocked"))
    username = "?"
    session.auth_mechanism = method.mechanism
    external = method.mechanism == "EXTERNAL" and session.tls
    try:
        if external:  # the response (an authzid) is ignored, as RabbitMQ does
            username, password = session.cert_user or "?", ""
        else:
            username, password = parse_credentials(method.mechanism, bytes(method.response))
        session.user = login(
            session.broker, username, password, external=external, cert_user=session.cert_user,
            peer=session.peer, protocol="AMQP",
        )  # fmt: skip
    except AccessRefused:
        session.close_reason = f"authentication failed for user '{username}'"
        if session.auth_failure_close:
            session.send_close(
                m.ACCESS_REFUSED,
                reply_text(
                    m.ACCESS_REFUSED,
                    f"Login was refused using authentication mechanism {method.mechanism}. "
                    "For details see the broker logfile.",
                ),
            )
        else:
            session.finish()
        return
    session.write(session.conn.tune_frame())


def open_connection(session: AMQPSession, method: m.ConnectionOpen) -> None:
    """connection.open: the core connection in the vhost (530 if refused), then open-ok."""
    try:
        session.client = open_client(
            session.broker,
            session.gate,
            session.user,
            method.virtual_host,
            protocol="AMQP 0-9-1",
            peer=session.peer,
            closer=session.shutdown,
            properties=session.client_properties,
            traffic=session.traffic,
            tls=session.tls,
            mechanism=session.auth_mechanism,
        )
    except BrokerError as exc:
        log.warning("%s: connection.open refused: %s", session.peer, exc.text)
        session.close_reason = exc.text
        session.send_close(m.NOT_ALLOWED, reply_text(m.NOT_ALLOWED, exc.text), 10, 40)
        return
    session.write(encode_method_frame(0, m.ConnectionOpenOk()))
    session.start_heartbeats()
