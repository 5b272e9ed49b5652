"""How soon federation follows a change: a new policy until its exchange link runs, and a
new downstream binding until the upstream queue is bound the same way. Roost -> Roost
beside RabbitMQ 3.10 -> RabbitMQ 3.10 (its federation plugin), in the same run.

    .venv/bin/python bench/federation_start.py [--repeat 15] [--against SRC]

Each round declares a fresh direct exchange on both brokers of a pair, then (clock
started) puts a policy federating exactly that exchange on the downstream through its
management API and reads ``/api/federation-links`` every 2 ms until the link is
``running``; then (clock started again) binds a queue to the downstream exchange with a
fresh key and reads the upstream's bindings every 2 ms until the federation queue has
that key. Reported: medians and the slowest of ``--repeat`` rounds. ``--against SRC``
adds a Roost pair whose downstream runs from another source tree (``git archive`` of an
older commit), to compare before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pika

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # sibling modules, not a package

POLL = 0.002


def until(check: Callable[[], bool], timeout: float = 30.0) -> float:
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("federation did not follow the change")
        time.sleep(POLL)
    return time.perf_counter() - start


def declare(url: str, exchange: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        conn.channel().exchange_declare(exchange, "direct")


def one_round(pair: dict[str, Any]) -> tuple[float, float]:
    exchange = f"fx-{uuid.uuid4().hex[:8]}"
    declare(pair["up"], exchange)
    declare(pair["down"], exchange)
    down: httpx.Client = pair["down_api"]
    up: httpx.Client = pair["up_api"]

    def running() -> bool:
        rows = down.get("/api/federation-links").json()
        return any(r.get("exchange") == exchange and r["status"] == "running" for r in rows)

    down.put(f"/api/policies/%2F/{exchange}", json={
        "pattern": f"^{exchange}$", "apply-to": "exchanges",
        "definition": {"federation-upstream": "up"}}).raise_for_status()
    started = until(running)  # the PUT answered: the policy is in place
    key = uuid.uuid4().hex[:8]

    def bound() -> bool:
        rows = up.get(f"/api/exchanges/%2F/{exchange}/bindings/source").json()
        return any(r["routing_key"] == key for r in rows)

    with pika.BlockingConnection(pika.URLParameters(pair["down"])) as conn:
        ch = conn.channel()
        queue = ch.queue_declare("", exclusive=True).method.queue
        start = time.perf_counter()
        ch.queue_bind(queue, exchange, key)
        followed = time.perf_counter() - start + until(bound)
    down.delete(f"/api/policies/%2F/{exchange}").raise_for_status()
    return started, followed


def roost_pair(stack: contextlib.ExitStack, src: str | None) -> dict[str, Any]:
    up_http, down_http = _brokers.free_port(), _brokers.free_port()
    env = {"PYTHONPATH": src} if src else None
    up = stack.enter_context(_brokers.roost("--http-port", str(up_http), "--node-name",
                                            f"up-{uuid.uuid4().hex[:4]}@localhost"))
    down = stack.enter_context(_brokers.roost("--http-port", str(down_http), "--node-name",
                                              f"down-{uuid.uuid4().hex[:4]}@localhost",
                                              env=env))
    return pair(up, up_http, down, down_http)


def rabbit_pair(stack: contextlib.ExitStack) -> dict[str, Any]:
    up_http, down_http = _brokers.free_port(), _brokers.free_port()

    def conf(port: int) -> str:
        return f"management.tcp.port = {port}\nmanagement.tcp.ip = 127.0.0.1\n"

    plugins = ("rabbitmq_management", "rabbitmq_federation", "rabbitmq_federation_management")
    up = stack.enter_context(_brokers.rabbitmq(plugins=plugins, name="fedstart-up",
                                               extra_conf=conf(up_http)))
    down = stack.enter_context(_brokers.rabbitmq(plugins=plugins, name="fedstart-down",
                                                 extra_conf=conf(down_http)))
    return pair(up, up_http, down, down_http)


def pair(up: str, up_http: int, down: str, down_http: int) -> dict[str, Any]:
    auth = ("guest", "guest")
    p = {"up": up, "down": down,
         "up_api": httpx.Client(base_url=f"http://127.0.0.1:{up_http}", auth=auth, timeout=30),
         "down_api": httpx.Client(base_url=f"http://127.0.0.1:{down_http}", auth=auth,
                                  timeout=30)}
    for api in (p["up_api"], p["down_api"]):  # the HTTP listener may come up last
        until(lambda a=api: _answers(a))
    p["down_api"].put("/api/parameters/federation-upstream/%2F/up",
                      json={"value": {"uri": up, "reconnect-delay": 1}}).raise_for_status()
    return p


def _answers(api: httpx.Client) -> bool:
    try:
        return api.get("/api/overview").status_code == 200
    except httpx.TransportError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--against", metavar="SRC", help="also a Roost downstream from SRC")
    parser.add_argument("--no-rabbitmq", action="store_true")
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {}
    with contextlib.ExitStack() as stack:
        pairs = {"Roost (this checkout)": roost_pair(stack, None)}
        if args.against:
            pairs[f"Roost ({args.against})"] = roost_pair(stack, args.against)
        if not args.no_rabbitmq:
            pairs["RabbitMQ 3.10"] = rabbit_pair(stack)
        for _ in range(args.repeat):
            for name, p in pairs.items():
                results.setdefault(name, []).append(one_round(p))
    print(f"\nfederation following a change, {args.repeat} rounds, ms (median / slowest)")
    print("| downstream | policy -> link running | binding -> bound upstream |")
    print("|---|---:|---:|")
    for name, runs in results.items():
        starts, binds = [r[0] * 1000 for r in runs], [r[1] * 1000 for r in runs]
        print(f"| {name} | {statistics.median(starts):.0f} / {max(starts):.0f} | "
              f"{statistics.median(binds):.0f} / {max(binds):.0f} |")


if __name__ == "__main__":
    main()
