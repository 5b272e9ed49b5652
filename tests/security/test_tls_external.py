"""SASL EXTERNAL: a verified client certificate's CN names the user, no password. AMQP
(pika's ExternalCredentials) and STOMP (a CONNECT without login) over TLS."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pika.credentials
import pika.exceptions
import pytest
import stomp

from tests.security.tls_support import PKI, TLSRoost
from tests.stomp.conftest import Inbox


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return PKI(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def roost(pki: PKI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSRoost]:
    server = TLSRoost(
        tmp_path_factory.mktemp("roost-external"), *pki.server_args("peer"),
        tls_ports=("amqps", "stomps", "https"),
    ).start()  # fmt: skip
    with httpx.Client(
        base_url=server.https_url, auth=("guest", "guest"), verify=pki.client_context()
    ) as http:
        # alice has a password the tests never use: EXTERNAL does not check it
        r = http.put("/api/users/alice", json={"password": "not-used", "tags": ""})
        assert r.status_code in (201, 204), r.text
        r = http.put(
            "/api/permissions/%2F/alice", json={"configure": ".*", "write": ".*", "read": ".*"}
        )
        assert r.status_code in (201, 204), r.text
    yield server
    code = server.stop()
    assert code == 0, f"graceful shutdown failed ({code}):\n{server.log}"
    assert "Traceback" not in server.log, server.log


def external(server: TLSRoost, ctx: ssl.SSLContext, port: int | None = None) -> Any:
    return pika.ConnectionParameters(
        "127.0.0.1",
        port or server.amqps_port,
        credentials=pika.credentials.ExternalCredentials(),
        ssl_options=pika.SSLOptions(ctx, "127.0.0.1"),
        connection_attempts=1,
        client_properties={"connection_name": "external"},
    )


def connections(server: TLSRoost, pki: PKI) -> list[dict[str, Any]]:
    with httpx.Client(
        base_url=server.https_url, auth=("guest", "guest"), verify=pki.client_context()
    ) as http:
        result: list[dict[str, Any]] = http.get("/api/connections").json()
        return result


def test_pika_external_logs_in_as_the_certificate_cn(roost: TLSRoost, pki: PKI) -> None:
    alice = pki.client_cert("alice")
    conn = pika.BlockingConnection(external(roost, alice.context(pki)))
    try:
        ch = conn.channel()
        ch.queue_declare("ext.q", auto_delete=True)
        ch.basic_publish("", "ext.q", b"from alice")
        method, _props, body = ch.basic_get("ext.q", auto_ack=True)
        assert method is not None and body == b"from alice"
        mine = [c for c in connections(roost, pki) if c.get("user_provided_name") == "external"]
        assert [(c["user"], c["auth_mechanism"], c["ssl"]) for c in mine] == [
            ("alice", "EXTERNAL", True)
        ]
    finally:
        conn.close()
    assert "connection opened (user=alice" in roost.log


def test_external_for_a_cn_that_is_no_user_is_refused_with_403(
    roost: TLSRoost, pki: PKI
) -> None:
    mallory = pki.client_cert("mallory")
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as err:
        pika.BlockingConnection(external(roost, mallory.context(pki)))
    assert "403" in str(err.value) and "EXTERNAL" in str(err.value)
    roost.wait_for_log("user 'mallory' (from the client certificate) does not exist")


def test_external_is_not_offered_without_a_client_certificate(
    roost: TLSRoost, pki: PKI
) -> None:
    # pika refuses on its side when connection.start does not list EXTERNAL
    with pytest.raises(pika.exceptions.AuthenticationError, match="EXTERNAL"):
        pika.BlockingConnection(external(roost, pki.client_context()))


def test_external_is_not_offered_on_the_plain_amqp_port(roost: TLSRoost) -> None:
    params = pika.ConnectionParameters(
        "127.0.0.1",
        roost.amqp_port,
        credentials=pika.credentials.ExternalCredentials(),
        connection_attempts=1,
    )
    with pytest.raises(pika.exceptions.AuthenticationError, match="EXTERNAL"):
        pika.BlockingConnection(params)


def test_password_login_still_works_with_a_client_certificate(
    roost: TLSRoost, pki: PKI
) -> None:
    alice = pki.client_cert("alice")
    params = pika.ConnectionParameters(
        "127.0.0.1",
        roost.amqps_port,
        credentials=pika.PlainCredentials("guest", "guest"),
        ssl_options=pika.SSLOptions(alice.context(pki), "127.0.0.1"),
        connection_attempts=1,
    )
    conn = pika.BlockingConnection(params)
    assert conn.is_open
    conn.close()


def stomps(roost: TLSRoost, pki: PKI, cn: str) -> tuple[Any, Inbox]:
    cert = pki.client_cert(cn)
    host = ("127.0.0.1", roost.stomps_port)
    conn = stomp.Connection12([host], heartbeats=(0, 0))
    conn.set_ssl(
        for_hosts=[host], ca_certs=str(pki.ca_file), cert_file=str(cert.cert),
        key_file=str(cert.key),
    )  # fmt: skip
    inbox = Inbox()
    conn.set_listener("inbox", inbox)
    return conn, inbox


def test_stomp_connect_without_login_uses_the_certificate(roost: TLSRoost, pki: PKI) -> None:
    conn, inbox = stomps(roost, pki, "alice")
    conn.connect(wait=True, headers={"client-id": "stomp-external"})
    try:
        conn.subscribe("/queue/ext.stomp", id="s1", ack="auto")
        conn.send("/queue/ext.stomp", "cert login", receipt="r1")
        assert inbox.receipt() == "r1"
        assert inbox.message().body == "cert login"
        users = {c["user"] for c in connections(roost, pki) if c["protocol"].startswith("STOMP")}
        assert "alice" in users
    finally:
        conn.disconnect()


def test_stomp_certificate_of_an_unknown_user_gets_error(roost: TLSRoost, pki: PKI) -> None:
    conn, inbox = stomps(roost, pki, "mallory")
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect(wait=True)
    error = inbox.errors.get(timeout=5)
    assert error.headers["message"] == "access_refused"
    roost.wait_for_log("user 'mallory' (from the client certificate) does not exist")
