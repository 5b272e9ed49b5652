"""TLS listeners: AMQPS with pika, STOMP over TLS with stomp.py, WSS with aiohttp and the
management API over HTTPS with httpx; plaintext and untrusted clients are refused cleanly
while the broker keeps serving everyone else."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pika
import pika.exceptions
import pytest
import stomp

from roost import config_sources
from roost.tls import certificate_user
from tests.security.tls_support import PKI, TLSRoost, wss_connect
from tests.stomp.conftest import Inbox
from tests.support import RawAMQP, RoostProcess


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return PKI(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def roost(pki: PKI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSRoost]:
    """Client certificates verified when sent (``peer``), as RabbitMQ's usual setup."""
    server = TLSRoost(tmp_path_factory.mktemp("roost-tls"), *pki.server_args()).start()
    yield server
    code = server.stop()
    assert code == 0, f"graceful shutdown failed ({code}):\n{server.log}"
    assert "Traceback" not in server.log, server.log


def amqps_params(server: TLSRoost, ctx: ssl.SSLContext, **kwargs: Any) -> pika.ConnectionParameters:
    return pika.ConnectionParameters(
        "127.0.0.1",
        server.amqps_port,
        ssl_options=pika.SSLOptions(ctx, "127.0.0.1"),
        connection_attempts=1,
        **kwargs,
    )


def https(server: TLSRoost, pki: PKI) -> httpx.Client:
    return httpx.Client(
        base_url=server.https_url, auth=("guest", "guest"), verify=pki.client_context()
    )


def assert_amqps_works(server: TLSRoost, pki: PKI, queue: str) -> None:
    conn = pika.BlockingConnection(amqps_params(server, pki.client_context()))
    try:
        ch = conn.channel()
        ch.queue_declare(queue, auto_delete=True)
        ch.basic_publish("", queue, b"over tls")
        method, _props, body = ch.basic_get(queue, auto_ack=True)
        assert method is not None and body == b"over tls"
    finally:
        conn.close()


def test_tls_listeners_are_logged_and_listed_with_rabbitmq_names(
    roost: TLSRoost, pki: PKI
) -> None:
    for line in (
        f"AMQP 0-9-1 over TLS listening on 127.0.0.1:{roost.amqps_port}",
        f"STOMP over TLS listening on 127.0.0.1:{roost.stomps_port}",
        f"STOMP over secure WebSocket (path /ws) listening on 127.0.0.1:{roost.wss_port}",
        f"HTTPS management listening on 127.0.0.1:{roost.https_port}",
    ):
        assert line in roost.log
    with https(roost, pki) as http:
        overview = http.get("/api/overview").json()
    listeners = {li["protocol"]: li["port"] for li in overview["listeners"]}
    assert listeners["amqp"] == roost.amqp_port
    assert listeners["amqp/ssl"] == roost.amqps_port
    assert listeners["stomp/ssl"] == roost.stomps_port
    assert listeners["https/web-stomp"] == roost.wss_port
    assert listeners["https"] == roost.https_port
    assert listeners["http"] == roost.http_port


def test_pika_over_tls_publishes_and_consumes(roost: TLSRoost, pki: PKI) -> None:
    props = {"connection_name": "tls-conn"}
    params = amqps_params(roost, pki.client_context(), client_properties=props)
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        ch.queue_declare("tls.q", auto_delete=True)
        ch.confirm_delivery()
        ch.basic_publish("", "tls.q", b"secret", pika.BasicProperties(delivery_mode=2))
        method, _props, body = ch.basic_get("tls.q", auto_ack=True)
        assert method is not None and body == b"secret"
        with https(roost, pki) as http:
            conns = http.get("/api/connections").json()
        mine = [c for c in conns if c.get("user_provided_name") == "tls-conn"]
        assert len(mine) == 1
        assert mine[0]["ssl"] is True
        assert mine[0]["auth_mechanism"] == "PLAIN"
        assert mine[0]["user"] == "guest"
    finally:
        conn.close()


def test_plain_amqp_connections_are_not_ssl(roost: TLSRoost, pki: PKI) -> None:
    conn = pika.BlockingConnection(
        pika.ConnectionParameters(
            "127.0.0.1", roost.amqp_port, client_properties={"connection_name": "plain-conn"}
        )
    )
    try:
        with https(roost, pki) as http:
            conns = http.get("/api/connections").json()
        mine = [c for c in conns if c.get("user_provided_name") == "plain-conn"]
        assert [c["ssl"] for c in mine] == [False]
    finally:
        conn.close()


def test_https_management_api_and_plain_http_both_serve(roost: TLSRoost, pki: PKI) -> None:
    with https(roost, pki) as http:
        r = http.get("/api/whoami")
        assert r.status_code == 200 and r.json()["name"] == "guest"
        assert http.get("/api/overview", auth=("guest", "wrong")).status_code == 401
    r = httpx.get(f"{roost.http_url}/api/whoami", auth=("guest", "guest"))
    assert r.status_code == 200


def test_stomp_py_over_tls(roost: TLSRoost, pki: PKI) -> None:
    host = ("127.0.0.1", roost.stomps_port)
    conn = stomp.Connection12([host], heartbeats=(0, 0))
    conn.set_ssl(for_hosts=[host], ca_certs=str(pki.ca_file))
    inbox = Inbox()
    conn.set_listener("inbox", inbox)
    conn.connect("guest", "guest", wait=True)
    try:
        conn.subscribe("/queue/tls.stomp", id="s1", ack="auto")
        conn.send("/queue/tls.stomp", "hello over tls", receipt="r1")
        assert inbox.receipt() == "r1"
        assert inbox.message().body == "hello over tls"
    finally:
        conn.disconnect()


def test_stomp_over_secure_websocket(roost: TLSRoost, pki: PKI) -> None:
    async def run() -> tuple[str, str]:
        url = f"wss://127.0.0.1:{roost.wss_port}/ws"
        async with wss_connect(url, pki.client_context()) as ws:
            await ws.send_str("CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\0")
            connected = await asyncio.wait_for(ws.receive_str(), 5)
            await ws.send_str("SUBSCRIBE\nid:0\ndestination:/queue/tls.wss\n\n\0")
            await ws.send_str("SEND\ndestination:/queue/tls.wss\n\nover wss\0")
            message = await asyncio.wait_for(ws.receive_str(), 5)
            return connected, message

    connected, message = asyncio.run(run())
    assert connected.startswith("CONNECTED\n")
    assert message.startswith("MESSAGE\n") and message.endswith("over wss\0")


def test_tls_listeners_answer_on_ipv6_loopback(roost: TLSRoost, pki: PKI) -> None:
    """Every TLS listener binds ::1 too (the default --bind, issue 28): AMQPS with pika,
    STOMP over TLS with stomp.py, WSS with aiohttp, HTTPS with httpx."""
    for what, port in (("AMQP 0-9-1 over TLS", roost.amqps_port),
                       ("STOMP over TLS", roost.stomps_port),
                       ("STOMP over secure WebSocket (path /ws)", roost.wss_port),
                       ("HTTPS management", roost.https_port)):
        assert f"{what} listening on [::1]:{port}" in roost.log
    params = pika.ConnectionParameters(
        "::1", roost.amqps_port, ssl_options=pika.SSLOptions(pki.client_context(), "::1"),
        connection_attempts=1,
    )
    with pika.BlockingConnection(params) as conn:
        assert conn.channel().queue_declare("", exclusive=True).method.queue
    host = ("::1", roost.stomps_port)
    client = stomp.Connection12([host], heartbeats=(0, 0))
    client.set_ssl(for_hosts=[host], ca_certs=str(pki.ca_file))
    client.connect("guest", "guest", wait=True)
    client.disconnect()

    async def wss() -> str:
        async with wss_connect(f"wss://[::1]:{roost.wss_port}/ws", pki.client_context()) as ws:
            await ws.send_str("CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\0")
            return await asyncio.wait_for(ws.receive_str(), 5)

    assert asyncio.run(wss()).startswith("CONNECTED\n")
    with httpx.Client(verify=pki.client_context()) as http:
        r = http.get(f"https://[::1]:{roost.https_port}/api/whoami", auth=("guest", "guest"))
    assert r.status_code == 200


def test_plaintext_amqp_client_on_tls_port_is_refused(roost: TLSRoost, pki: PKI) -> None:
    with RawAMQP(roost.amqps_port) as raw:
        raw.send(b"AMQP\x00\x00\x09\x01")
        reply = raw.recv_until_closed(limit=5.0)
    assert b"AMQP" not in reply  # no connection.start: the socket is closed
    roost.wait_for_log("TLS handshake failed on amqp/ssl")
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        pika.BlockingConnection(
            pika.ConnectionParameters("127.0.0.1", roost.amqps_port, connection_attempts=1)
        )
    assert_amqps_works(roost, pki, "tls.after-plaintext")


def test_plain_http_on_https_port_is_refused(roost: TLSRoost, pki: PKI) -> None:
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{roost.https_port}/api/overview", auth=("guest", "guest"))
    roost.wait_for_log("TLS handshake failed on https")
    with https(roost, pki) as http:
        assert http.get("/api/whoami").status_code == 200


def test_plaintext_stomp_on_the_stomps_port_is_refused(roost: TLSRoost, pki: PKI) -> None:
    """A STOMP CONNECT in the clear gets no CONNECTED (nor any STOMP frame): the socket
    is closed, the reason logged, and STOMP over TLS keeps working."""
    with socket.create_connection(("127.0.0.1", roost.stomps_port), timeout=5) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00")
        reply = read_until_closed(sock)
    assert b"CONNECTED" not in reply and b"ERROR" not in reply, reply
    roost.wait_for_log("TLS handshake failed on stomp/ssl")
    test_stomp_py_over_tls(roost, pki)


def test_plain_http_and_websocket_on_the_wss_port_are_refused(roost: TLSRoost, pki: PKI) -> None:
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{roost.wss_port}/ws")

    async def plain_ws() -> None:
        async with aiohttp.ClientSession() as session:
            await session.ws_connect(f"ws://127.0.0.1:{roost.wss_port}/ws",
                                     protocols=("v12.stomp",))

    with pytest.raises(aiohttp.ClientError):
        asyncio.run(plain_ws())
    roost.wait_for_log("TLS handshake failed on https/web-stomp")
    test_stomp_over_secure_websocket(roost, pki)


def read_until_closed(sock: socket.socket, limit: float = 5.0) -> bytes:
    sock.settimeout(limit)
    chunks = []
    with contextlib.suppress(OSError):
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def test_untrusted_client_certificate_is_refused(roost: TLSRoost, pki: PKI) -> None:
    stranger = pki.client_cert("stranger", trusted=False)
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        conn = pika.BlockingConnection(amqps_params(roost, stranger.context(pki)))
        conn.close()
    roost.wait_for_log("certificate verify failed")
    assert_amqps_works(roost, pki, "tls.after-untrusted")


PROBES = {
    "stomps": b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00",
    "https": b"GET /api/overview HTTP/1.1\r\nHost: x\r\n"
    b"Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n",  # guest:guest
    "wss": b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
}


@pytest.mark.parametrize("listener", sorted(PROBES))
def test_untrusted_client_certificate_is_refused_on_the_other_tls_ports(
    roost: TLSRoost, pki: PKI, listener: str
) -> None:
    """As on AMQPS: a certificate from a CA the server does not trust ends the TLS session
    before the protocol answers anything (a valid request goes unanswered)."""
    stranger = pki.client_cert("stranger", trusted=False)
    port = getattr(roost, f"{listener}_port")
    answer = b""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    with (  # the refusal comes as an alert at the handshake (TLS 1.2) or at the first read
        contextlib.suppress(ssl.SSLError, ConnectionResetError, BrokenPipeError),
        sock,
        stranger.context(pki).wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(PROBES[listener])
        while data := tls.recv(65536):
            answer += data
    assert answer == b""
    with https(roost, pki) as api:  # the listeners still serve trusted clients
        assert api.get("/api/overview").status_code == 200
    assert_amqps_works(roost, pki, f"tls.after-untrusted-{listener}")


def test_client_that_does_not_trust_the_server_gives_up(roost: TLSRoost) -> None:
    ctx = ssl.create_default_context()  # the system CAs: our test CA is not among them
    with (
        socket.create_connection(("127.0.0.1", roost.amqps_port), timeout=5) as sock,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        ctx.wrap_socket(sock, server_hostname="127.0.0.1")


def test_require_refuses_a_client_without_certificate(pki: PKI, tmp_path: Path) -> None:
    server = TLSRoost(tmp_path, *pki.server_args("require")).start()
    try:
        with pytest.raises(pika.exceptions.AMQPConnectionError):
            conn = pika.BlockingConnection(amqps_params(server, pki.client_context()))
            conn.close()
        server.wait_for_log("TLS handshake failed on amqp/ssl")
        alice = pki.client_cert("alice")
        conn = pika.BlockingConnection(amqps_params(server, alice.context(pki)))
        assert conn.is_open
        conn.close()
    finally:
        server.kill()


def test_tls_settings_from_the_config_file(pki: PKI, tmp_path: Path) -> None:
    toml = tmp_path / "roost.toml"
    toml.write_text(
        f'tls_cert = "{pki.server_cert}"\ntls_key = "{pki.server_key}"\n'
        f'tls_ca = "{pki.ca_file}"\ntls_verify = "require"\n'
        "stomps_port = 0\nwss_port = 0\nhttps_port = 0\nmqtts_port = 0\nmqtt_wss_port = 0\n"
    )
    # the other TLS ports come from the file (0: off), the AMQPS port from the flag
    server = TLSRoost(tmp_path / "data", "--config", str(toml), tls_ports=("amqps",)).start()
    try:
        assert "(client certificates: require)" in server.log
        assert "STOMP over TLS listening" not in server.log
        assert "HTTPS management listening" not in server.log
        alice = pki.client_cert("alice")
        conn = pika.BlockingConnection(amqps_params(server, alice.context(pki)))
        conn.close()
    finally:
        server.kill()


def test_no_tls_listener_without_a_certificate(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path).start()
    try:
        assert "over TLS" not in server.log and "HTTPS" not in server.log
        overview = httpx.get(f"{server.http_url}/api/overview", auth=("guest", "guest")).json()
        assert {li["protocol"] for li in overview["listeners"]} == {
            "amqp",
            "http",
            "stomp",
            "http/web-stomp",
            "http/prometheus",
            "mqtt",
            "http/web-mqtt",
            "stream",
        }
    finally:
        server.kill()


def test_a_bad_certificate_file_stops_the_start(pki: PKI, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate\n")
    server = RoostProcess(tmp_path / "data", "--tls-cert", str(bogus), "--tls-key", str(bogus))
    with pytest.raises(RuntimeError, match="exited with 2"):
        server.start(timeout=10)
    server.kill()
    assert "cannot load TLS certificate" in server.log


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--tls-cert", "c.pem"], "tls_cert and tls_key go together"),
        (["--tls-verify", "peer", "--tls-cert", "c", "--tls-key", "k"], "needs tls_ca"),
        (["--tls-verify", "maybe"], "tls_verify must be none, peer or require"),
        (["--tls-ca", "ca.pem"], "tls_ca needs tls_cert"),
        (["--amqps-port", "70000"], "amqps_port must be 0..65535"),
    ],
)
def test_invalid_tls_settings_are_refused(flags: list[str], error: str) -> None:
    parser = argparse.ArgumentParser()
    config_sources.add_arguments(parser)
    with pytest.raises(ValueError, match=error):
        config_sources.load(parser.parse_args(flags), environ={})


def test_tls_defaults() -> None:
    parser = argparse.ArgumentParser()
    config_sources.add_arguments(parser)
    cfg = config_sources.load(parser.parse_args([]), environ={})
    assert (cfg.amqps_port, cfg.stomps_port, cfg.wss_port, cfg.https_port) == (
        5671,
        61614,
        15673,
        15671,
    )
    assert not cfg.tls_enabled and cfg.tls_verify_mode == "none"
    with_ca = config_sources.load(
        parser.parse_args(["--tls-cert", "c", "--tls-key", "k", "--tls-ca", "ca"]), environ={}
    )
    assert with_ca.tls_verify_mode == "peer"


def test_a_client_silent_during_the_handshake_is_dropped(pki: PKI, tmp_path: Path) -> None:
    server = TLSRoost(
        tmp_path, *pki.server_args(), "--handshake-timeout", "0.5"
    ).start()  # every TLS port free (the defaults may be taken by another server)
    try:
        with socket.create_connection(("127.0.0.1", server.amqps_port), timeout=5) as sock:
            assert sock.recv(100) == b""  # closed by the server, long before our timeout
        server.wait_for_log("TLS handshake failed on amqp/ssl")
        assert "taking longer than 0.5 seconds" in server.log
    finally:
        server.kill()


class FakeTLSTransport:
    def __init__(self, cert: dict[str, Any] | None) -> None:
        self.cert = cert

    def get_extra_info(self, name: str) -> Any:
        return self.cert if name == "peercert" else None


@pytest.mark.parametrize(
    ("cert", "user"),
    [
        (None, None),  # no certificate sent
        ({}, None),  # sent but not verified: getpeercert() is empty
        ({"subject": ((("organizationName", "Example"),),)}, None),
        (
            {"subject": ((("organizationName", "Example"),), (("commonName", "alice"),))},
            "alice",
        ),
        ({"subject": ((("commonName", "first"),), (("commonName", "second"),))}, "first"),
    ],
)
def test_certificate_user_is_the_first_common_name(
    cert: dict[str, Any] | None, user: str | None
) -> None:
    assert certificate_user(FakeTLSTransport(cert)) == user


def test_stream_protocol_over_tls_with_plain_and_external(roost: TLSRoost, pki: PKI) -> None:
    """rstream on --streams-port: PLAIN inside TLS, then EXTERNAL with the client
    certificate's user (the SaslHandshake offers it only on a certificate connection)."""
    from rstream import Producer, SlasMechanism

    ctx = pki.client_cert("guest").context(pki)

    async def main() -> None:
        async with Producer("127.0.0.1", roost.streams_port, username="guest",
                            password="guest", ssl_context=ctx) as producer:
            await producer.create_stream("tls-stream", exists_ok=True)
            await producer.send_wait("tls-stream", b"plain")
        async with Producer("127.0.0.1", roost.streams_port, username="", password="",
                            ssl_context=ctx,
                            sasl_configuration_mechanism=SlasMechanism.MechanismExternal
                            ) as producer:
            await producer.send_wait("tls-stream", b"external")

    asyncio.run(asyncio.wait_for(main(), 30))
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ok = ch.queue_declare("tls-stream", passive=True)
        assert ok.method.message_count == 2
