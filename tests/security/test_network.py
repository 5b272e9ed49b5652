"""What only a second host shows: the guest rule (loopback only) for a client on another
address, and TCP keepalive reclaiming the connections of a client whose link died while it
had heartbeats off. The client runs in a network namespace (tests/security/netns.py); the
server listens on 0.0.0.0 so that it can be reached there."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pika
import pytest

from tests.security.conftest import put
from tests.security.netns import PeerHost
from tests.support import RoostProcess, eventually, running_server

ANYWHERE = ("--bind", "0.0.0.0")


def admin(server: RoostProcess) -> httpx.Client:
    return httpx.Client(base_url=server.http_url + "/api", auth=("guest", "guest"), timeout=10)


def add_user(server: RoostProcess, name: str) -> None:
    with admin(server) as api:
        put(api, f"/users/{name}", {"password": "pw", "tags": "management"})
        put(api, f"/permissions/%2F/{name}", {"configure": ".*", "write": ".*", "read": ".*"})


def login_from(peer: PeerHost, server: RoostProcess, user: str, password: str) -> list[str]:
    client = peer.client("login", peer.host_ip, str(server.amqp_port), str(server.stomp_port),
                         str(server.ws_port), str(server.http_port), user, password)
    out, _ = client.communicate(timeout=60)
    assert client.returncode == 0, out
    return out.splitlines()


# -- guest only from loopback ------------------------------------------------------------------


def test_guest_is_refused_from_another_host(tmp_path: Path) -> None:
    with PeerHost.create() as peer, running_server(tmp_path, *ANYWHERE) as server:
        add_user(server, "remote")
        lines = login_from(peer, server, "guest", "guest")
        assert lines[0].startswith("amqp refused ProbableAuthenticationError")
        assert "403" in lines[0] and "ACCESS_REFUSED" in lines[0]
        assert lines[1:] == ["stomp refused ERROR", "http refused 401"]
        server.wait_for_log(
            f"AMQP login failed for user 'guest' from {peer.peer_ip}:"
        )
        assert "user 'guest' can only connect via localhost" in server.log
        # the network is fine: another user gets in from there, and guest from loopback
        assert login_from(peer, server, "remote", "pw") == ["amqp ok", "stomp ok CONNECTED",
                                                            "http ok 200"]
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            assert conn.is_open


def test_no_loopback_users_lets_guest_in_from_anywhere(tmp_path: Path) -> None:
    with PeerHost.create() as peer, running_server(
        tmp_path, *ANYWHERE, "--loopback-users", ""
    ) as server:
        assert login_from(peer, server, "guest", "guest") == [
            "amqp ok", "stomp ok CONNECTED", "http ok 200"
        ]


# -- TCP keepalive -----------------------------------------------------------------------------


def keepalive_timers(port: int) -> list[str]:
    """``ss``'s timer column for the server's established sockets on ``port``."""
    done = subprocess.run(
        ["ss", "-tnoH", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True, check=True,
    )
    return re.findall(r"timer:\((\w+)", done.stdout)


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_every_listener_turns_keepalive_on(tmp_path: Path) -> None:
    """The kernel's view of the accepted sockets (options inherited from the listeners)."""
    with running_server(tmp_path, "--tcp-keepalive-idle", "30") as server:
        socks = [socket.create_connection(("127.0.0.1", port))
                 for port in (server.amqp_port, server.stomp_port, server.ws_port,
                              server.http_port)]
        try:
            for port in (server.amqp_port, server.stomp_port, server.ws_port, server.http_port):
                eventually(lambda p=port: keepalive_timers(p) == ["keepalive"], 5,
                           f"no keepalive timer on port {port}: {keepalive_timers(port)}")
        finally:
            for sock in socks:
                sock.close()
    with running_server(tmp_path / "off", "--tcp-keepalive-idle", "0") as server:
        sock = socket.create_connection(("127.0.0.1", server.amqp_port))
        try:
            time.sleep(0.2)
            assert keepalive_timers(server.amqp_port) == []
        finally:
            sock.close()


def peers_of(server: RoostProcess, host: str) -> list[str]:
    with admin(server) as api:
        return sorted(c["protocol"] for c in api.get("/connections").json()
                      if c["peer_host"] == host)


def test_keepalive_reclaims_a_vanished_client_without_heartbeats(tmp_path: Path) -> None:
    """AMQP heartbeat 0, STOMP and Web STOMP heart-beat 0,0; then the client's link dies.
    With keepalive (1 s idle, 2 probes 1 s apart) the broker drops all three within
    seconds; the same client against a broker with keepalive off stays listed."""
    fast = ("--tcp-keepalive-idle", "1", "--tcp-keepalive-interval", "1",
            "--tcp-keepalive-count", "2")
    with PeerHost.create() as peer, \
            running_server(tmp_path / "on", *ANYWHERE, *fast) as server, \
            running_server(tmp_path / "off", *ANYWHERE, "--tcp-keepalive-idle", "0") as control:
        clients = []
        for s in (server, control):
            add_user(s, "netns")
            client = peer.client("hold", peer.host_ip, str(s.amqp_port), str(s.stomp_port),
                                 str(s.ws_port))
            clients.append(client)
            assert client.stdout is not None
            assert client.stdout.readline().strip() == "ready"
        try:
            expected = ["AMQP 0-9-1", "STOMP 1.2", "Web STOMP 1.2"]
            for s in (server, control):
                eventually(lambda s=s: peers_of(s, peer.peer_ip) == expected, 10,
                           f"connections from {peer.peer_ip}: {peers_of(s, peer.peer_ip)}")
            peer.cut()
            cut = time.monotonic()
            eventually(lambda: peers_of(server, peer.peer_ip) == [], 20,
                       f"still listed: {peers_of(server, peer.peer_ip)}")
            took = time.monotonic() - cut
            assert took < 15, took
            server.wait_for_log("connection lost")
            time.sleep(max(0.0, cut + 6 - time.monotonic()))  # twice what keepalive took
            assert peers_of(control, peer.peer_ip) == expected
            with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
                assert conn.is_open  # the broker itself is fine
        finally:
            for client in clients:
                client.kill()
                client.communicate()  # reaps it and closes its pipes
