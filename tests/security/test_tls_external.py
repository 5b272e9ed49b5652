"""SASL EXTERNAL: a verified client certificate's CN names the user, no password. AMQP
(pika's ExternalCredentials) and STOMP (a CONNECT without login) over TLS."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pika.credentials
import pika.exceptions
import pytest
import stomp

from tests.security.tls_support import PKI, TLSRoost, wss_connect
from tests.stomp.conftest import Inbox


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return PKI(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def roost(pki: PKI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSRoost]:
    server = TLSRoost(
        tmp_path_factory.mktemp("roost-external"), *pki.server_args("peer"),
        tls_ports=("amqps", "stomps", "wss", "https", "mqtts", "mqtt_wss"),
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


def start_mechanisms(port: int, ctx: ssl.SSLContext | None) -> bytes:
    """The mechanisms field of the server's connection.start."""
    sock: socket.socket = socket.create_connection(("127.0.0.1", port), timeout=5)
    if ctx is not None:
        sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    with sock:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        data = b""
        while len(data) < 7 or len(data) < 8 + int.from_bytes(data[3:7], "big"):
            chunk = sock.recv(65536)
            assert chunk, "connection closed before connection.start"
            data += chunk
    payload = data[7:]  # class, method, version major/minor, server-properties, mechanisms
    assert payload[:4] == b"\x00\x0a\x00\x0a"
    end = 10 + int.from_bytes(payload[6:10], "big")
    size = int.from_bytes(payload[end : end + 4], "big")
    return payload[end + 4 : end + 4 + size]


def test_mechanisms_on_tls_include_external(roost: TLSRoost, pki: PKI) -> None:
    alice = pki.client_cert("alice")
    assert start_mechanisms(roost.amqps_port, alice.context(pki)).split() == [
        b"PLAIN",
        b"AMQPLAIN",
        b"EXTERNAL",
    ]


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
    assert "user 'alice' authenticated and granted access" in roost.log


def test_external_for_a_cn_that_is_no_user_is_refused_with_403(
    roost: TLSRoost, pki: PKI
) -> None:
    mallory = pki.client_cert("mallory")
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as err:
        pika.BlockingConnection(external(roost, mallory.context(pki)))
    assert "403" in str(err.value) and "EXTERNAL" in str(err.value)
    roost.wait_for_log("user 'mallory' (from the client certificate) does not exist")


def test_external_without_a_client_certificate_is_refused_with_403(
    roost: TLSRoost, pki: PKI
) -> None:
    # offered on every TLS connection, as RabbitMQ does, and refused at login
    assert b"EXTERNAL" in start_mechanisms(roost.amqps_port, pki.client_context())
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as err:
        pika.BlockingConnection(external(roost, pki.client_context()))
    assert "403" in str(err.value)
    roost.wait_for_log("EXTERNAL needs a verified client certificate")


def test_external_is_not_offered_on_the_plain_amqp_port(roost: TLSRoost) -> None:
    assert start_mechanisms(roost.amqp_port, None).split() == [b"PLAIN", b"AMQPLAIN"]
    # pika refuses on its side when connection.start does not list EXTERNAL
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


def test_web_stomp_over_wss_logs_in_with_the_certificate(roost: TLSRoost, pki: PKI) -> None:
    ctx = pki.client_cert("alice").context(pki)

    async def run() -> str:
        url = f"wss://127.0.0.1:{roost.wss_port}/ws"
        async with wss_connect(url, ctx) as ws:
            await ws.send_str("CONNECT\naccept-version:1.2\nclient-id:wss-external\n\n\0")
            connected = await asyncio.wait_for(ws.receive_str(), 5)
            users = {c["user"] for c in connections(roost, pki) if "Web STOMP" in c["protocol"]}
            assert users == {"alice"}
            return connected

    assert asyncio.run(run()).startswith("CONNECTED\n")


@pytest.mark.parametrize(("version", "transport"), [(4, "tcp"), (5, "tcp"), (4, "websockets")])
def test_mqtt_over_tls_without_user_name_uses_the_certificate(
    roost: TLSRoost, pki: PKI, version: int, transport: str
) -> None:
    """MQTT over TLS (8883) and over secure WebSocket (15676, /ws)."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2,
                         client_id=f"mqtt-external-{version}-{transport}",
                         protocol=mqtt.MQTTv5 if version == 5 else mqtt.MQTTv311,
                         transport=transport)  # type: ignore[arg-type]
    if transport == "websockets":
        client.ws_set_options(path="/ws")
    client.tls_set_context(pki.client_cert("alice").context(pki))
    connected: list[Any] = []
    client.on_connect = lambda _c, _u, _f, rc, _p: connected.append(rc)
    client.connect("127.0.0.1", roost.mqtts_port if transport == "tcp" else roost.mqtt_wss_port)
    client.loop_start()
    try:
        deadline = time.monotonic() + 10
        while not connected and time.monotonic() < deadline:
            time.sleep(0.02)
        assert connected and connected[0].value == 0
        mqtt_users = {(c["user"], c["auth_mechanism"]) for c in connections(roost, pki)
                      if "MQTT" in c["protocol"]}
        assert ("alice", "EXTERNAL") in mqtt_users
    finally:
        client.disconnect()
        client.loop_stop()
        for name in ("_sockpairR", "_sockpairW"):
            sock = getattr(client, name, None)
            if sock is not None:
                sock.close()

