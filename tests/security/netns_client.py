"""The client that tests/security/netns.py runs on the other host.

    python -m tests.security.netns_client login HOST AMQP STOMP WS HTTP USER PASSWORD
        one line per protocol: "amqp ok" or "amqp refused <why>", and so on; then exits
    python -m tests.security.netns_client hold HOST AMQP STOMP WS
        opens an AMQP connection (heartbeat 0), a STOMP one and a STOMP-over-WebSocket one
        (heart-beat 0,0), prints "ready", and keeps them until its stdin closes
"""

from __future__ import annotations

import asyncio
import socket
import sys

import aiohttp
import httpx
import pika
from pika.exceptions import AMQPError


def amqp(host: str, port: int, user: str, password: str) -> pika.BlockingConnection:
    params = pika.ConnectionParameters(
        host, port, credentials=pika.PlainCredentials(user, password), heartbeat=0,
        connection_attempts=1, socket_timeout=5,
    )
    return pika.BlockingConnection(params)


def stomp_connect(user: str, password: str) -> bytes:
    return (
        f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{user}\npasscode:{password}\n"
        "heart-beat:0,0\n\n\x00"
    ).encode()


def stomp(host: str, port: int, user: str, password: str) -> tuple[socket.socket, str]:
    sock = socket.create_connection((host, port), timeout=5)
    sock.sendall(stomp_connect(user, password))
    reply = b""
    while b"\x00" not in reply:
        data = sock.recv(65536)
        if not data:
            break
        reply += data
    return sock, reply.split(b"\n", 1)[0].decode()


def login(host: str, amqp_port: int, stomp_port: int, http_port: int, user: str,
          password: str) -> None:
    try:
        amqp(host, amqp_port, user, password).close()
        print("amqp ok")
    except AMQPError as exc:
        print(f"amqp refused {exc!r}")
    sock, command = stomp(host, stomp_port, user, password)
    sock.close()
    print(f"stomp {'ok' if command == 'CONNECTED' else 'refused'} {command}")
    reply = httpx.get(f"http://{host}:{http_port}/api/whoami", auth=(user, password))
    print(f"http {'ok' if reply.status_code == 200 else 'refused'} {reply.status_code}")


async def hold(host: str, amqp_port: int, stomp_port: int, ws_port: int) -> None:
    conn = await asyncio.to_thread(amqp, host, amqp_port, "netns", "pw")
    sock, command = await asyncio.to_thread(stomp, host, stomp_port, "netns", "pw")
    assert command == "CONNECTED", command
    async with aiohttp.ClientSession() as session, session.ws_connect(
        f"http://{host}:{ws_port}/ws", protocols=("v12.stomp",), heartbeat=None
    ) as ws:
        await ws.send_str(stomp_connect("netns", "pw").decode())
        reply = await ws.receive(timeout=5)
        assert str(reply.data).startswith("CONNECTED"), reply
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the test closes our stdin
    sock.close()
    conn.close()


def main() -> None:
    mode, host, *ports = sys.argv[1:]
    if mode == "login":
        amqp_port, stomp_port, _ws, http_port, user, password = ports
        login(host, int(amqp_port), int(stomp_port), int(http_port), user, password)
    else:
        asyncio.run(hold(host, *(int(p) for p in ports)))


if __name__ == "__main__":
    main()
