"""``rss_bench.py --churn``: broker memory under connection churn (issue 19).

Short-lived AMQP, STOMP and WebSocket connections (``roost.perf.churn``: waves of 500
opened, set up, held half a second, then closed cleanly, with a channel, consumer,
exclusive queue and unacked messages, dropped, or dropped mid-frame) run in rounds of
1,000 in the issue's proportions (20,000 AMQP, 5,000 STOMP, 5,000 WebSocket by
default). The broker's RSS is read after each round, once the broker has let go of
every connection; the figure that matters is the last round's next to the first's. On
Roost the management API's registries (connections, channels, consumers, exclusive
queues) must be empty at the end. RabbitMQ runs its STOMP and Web-STOMP plugins.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
import urllib.request
from typing import Any

import _brokers
from _measure import broker_pid, rss_mb

ROUND = 1000
SETTLE_S = 1.0


def client(url: str, stomp: int, ws: int, amqp_n: int, stomp_n: int, ws_n: int) -> None:
    """The load, in a process of its own: one round at a time, each after the parent
    answers the last round's line (it reads the broker's RSS in between)."""
    from roost.client import parse_uri as parse_url
    from roost.perf import churn

    ep = parse_url(url)
    total = amqp_n + stomp_n + ws_n
    done = {"amqp": 0, "stomp": 0, "ws": 0}
    want = {"amqp": amqp_n, "stomp": stomp_n, "ws": ws_n}
    rounds = max(1, -(-total // ROUND))
    for r in range(rounds):
        count = {}
        for name in done:  # this round's share, so every round has the same mix
            upto = want[name] * (r + 1) // rounds
            count[name] = upto - done[name]
            done[name] = upto
        asyncio.run(churn.churn(ep, stomp, ws, count))
        print(f"round {r + 1} {sum(done.values())}", flush=True)
        sys.stdin.readline()


def _api(http_port: int, path: str) -> Any:
    request = urllib.request.Request(f"http://127.0.0.1:{http_port}/api/{path}")
    token = base64.b64encode(b"guest:guest").decode()
    request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def _settle(http_port: int | None) -> None:
    """Wait until the broker holds no connection (Roost says so; RabbitMQ gets time)."""
    if http_port is None:
        time.sleep(SETTLE_S * 2)
        return
    deadline = time.monotonic() + 60
    while _api(http_port, "overview")["object_totals"]["connections"]:
        if time.monotonic() > deadline:
            raise RuntimeError("connections still open a minute after the churn")
        time.sleep(0.2)
    time.sleep(SETTLE_S)


def _leftovers(http_port: int) -> str:
    """What the management API still lists: '' when every registry is empty."""
    left = []
    for path in ("connections", "channels", "consumers"):
        if n := len(_api(http_port, path)):
            left.append(f"{n} {path}")
    queues = [q for q in _api(http_port, "queues") if q["exclusive"] or q["auto_delete"]]
    if queues:
        left.append(f"{len(queues)} exclusive/auto-delete queues")
    return ", ".join(left)


def measure(broker: str, bench_file: str, counts: tuple[int, int, int]) -> dict[str, Any]:
    """RSS (MB) idle, after each round; what the API still lists at the end (Roost)."""
    stomp, ws = _brokers.free_port(), _brokers.free_port()
    http = _brokers.free_port() if broker == "roost" else None
    if broker == "roost":
        launcher = _brokers.roost("--stomp-port", str(stomp), "--ws-port", str(ws),
                                  "--http-port", str(http))
    else:
        launcher = _brokers.rabbitmq(
            plugins=("rabbitmq_stomp", "rabbitmq_web_stomp"),
            extra_conf=(f"stomp.listeners.tcp.1 = 127.0.0.1:{stomp}\n"
                        f"web_stomp.tcp.port = {ws}\nweb_stomp.tcp.ip = 127.0.0.1\n"),
        )
    with launcher as url:
        pid = broker_pid(url)
        _wait_port(ws)
        time.sleep(SETTLE_S)
        out: dict[str, Any] = {"idle": rss_mb(pid), "rounds": []}
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, bench_file, "--churn-client", url, str(stomp), str(ws),
             *map(str, counts)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        for line in proc.stdout:
            _, _, opened = line.split()
            _settle(http)
            out["rounds"].append((int(opened), rss_mb(pid)))
            print(f"{broker}: {opened} connections, RSS {out['rounds'][-1][1]:.1f} MB",
                  file=sys.stderr, flush=True)
            proc.stdin.write("\n")
            proc.stdin.flush()
        if proc.wait() != 0:
            raise RuntimeError(f"churn client failed ({proc.returncode})")
        out["seconds"] = time.monotonic() - started
        out["left"] = _leftovers(http) if http is not None else "(not checked)"
    return out


def _wait_port(port: int) -> None:
    import contextlib
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


def report(results: dict[str, dict[str, Any]], counts: tuple[int, int, int]) -> None:
    amqp_n, stomp_n, ws_n = counts
    print(f"Connection churn: {amqp_n:,} AMQP, {stomp_n:,} STOMP, {ws_n:,} WebSocket "
          f"connections in rounds of {ROUND:,} (waves of 500 held 0.5 s)")
    print("| broker | RSS idle MB | after the first 1,000 | at the end | growth MB | "
          "registries left | seconds |")
    print("|---|---|---|---|---|---|---|")
    for broker, got in results.items():
        first, last = got["rounds"][0][1], got["rounds"][-1][1]
        print(f"| {_brokers.TITLES[broker]} | {got['idle']:.1f} | {first:.1f} | {last:.1f} | "
              f"{last - first:+.1f} | {got['left'] or 'none'} | {got['seconds']:.0f} |")
    for broker, got in results.items():
        trail = ", ".join(f"{n:,}: {mb:.1f}" for n, mb in got["rounds"])
        print(f"{_brokers.TITLES[broker]} RSS MB by connections closed: {trail}")
