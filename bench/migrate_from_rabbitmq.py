"""The migration guide (docs/migrate-from-rabbitmq.md), scripted and checked: a RabbitMQ
3.10 node holding ``--count`` messages in ``--queues`` durable queues is moved to Roost
with the guide's steps (definitions exported with rabbitmqctl and imported with
``roost ctl definitions import``, one ``on-confirm`` shovel per queue with
``src-delete-after: queue-length``, set with ``roost ctl set_parameter``), then every
message in Roost is counted by its id: zero lost, zero duplicated, RabbitMQ empty.

    .venv/bin/python bench/migrate_from_rabbitmq.py [--count 100000] [--queues 10]

tests/shovel/test_shovels.py (``test_the_migration_guide_moves_every_message_once``)
runs the same steps with fewer messages.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from roost.amqp.codec_methods import BasicProperties
from roost.client import Message, connect

ROOST = [sys.executable, "-m", "roost"]


def queue_names(queues: int) -> list[str]:
    return [f"orders.{i}" for i in range(queues)]


async def _fill(url: str, queues: list[str], count: int) -> None:
    """``count`` persistent messages spread over ``queues``, each body its id, every
    publish confirmed."""
    conn = await connect(url)
    ch = await conn.channel()
    await ch.confirm_select()
    props = BasicProperties(delivery_mode=2)
    window: list[asyncio.Future[bool]] = []
    for i in range(count):
        fut = ch.publish("", queues[i % len(queues)], f"id-{i}".encode(), props)
        assert fut is not None
        window.append(fut)
        if len(window) >= 2000:
            assert all(await asyncio.gather(*window)), "RabbitMQ refused a message"
            window.clear()
    assert all(await asyncio.gather(*window)), "RabbitMQ refused a message"
    await conn.close()


def fill(url: str, queues: list[str], count: int) -> None:
    asyncio.run(_fill(url, queues, count))


def declare_source(url: str, queues: list[str]) -> None:
    """The deployment to move: durable queues, an exchange with bindings."""

    async def run() -> None:
        conn = await connect(url)
        ch = await conn.channel()
        await ch.exchange_declare("orders", "topic", durable=True)
        for q in queues:
            await ch.queue_declare(q, durable=True, arguments={"x-max-length": 10_000_000})
            await ch.queue_bind(q, "orders", f"{q}.#")
        await conn.close()

    asyncio.run(run())


def ctl(roost_http: str, *args: str) -> str:
    """``roost ctl`` against Roost's management API, as the guide runs it."""
    done = subprocess.run([*ROOST, "ctl", "--url", roost_http, *args], capture_output=True,
                          text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"roost ctl {' '.join(args)}: {done.stderr}")
    return done.stdout


def migrate(definitions: Path, rabbit_url: str, roost_http: str, timeout: float) -> float:
    """The guide's steps 2 and 4: import the definitions, shovel every queue across,
    wait until every shovel has finished (and deleted itself). Returns the seconds the
    shovels took."""
    ctl(roost_http, "definitions", "import", str(definitions))
    defs = json.loads(definitions.read_text())
    start = time.perf_counter()
    for q in defs["queues"]:
        vhost = q["vhost"]
        value = {"src-uri": rabbit_url, "src-queue": q["name"], "dest-uri": "amqp://",
                 "dest-queue": q["name"], "ack-mode": "on-confirm",
                 "src-delete-after": "queue-length"}
        ctl(roost_http, "set_parameter", "-p", vhost, "shovel", f"migrate-{q['name']}",
            json.dumps(value))
    with httpx.Client(base_url=roost_http, auth=("guest", "guest"), timeout=30) as api:
        deadline = time.monotonic() + timeout
        while api.get("/api/shovels").json():
            if time.monotonic() > deadline:
                raise AssertionError(f"shovels still running: {api.get('/api/shovels').json()}")
            time.sleep(0.05)
    return time.perf_counter() - start


async def _drain(url: str, queues: list[str], expect: int) -> collections.Counter[str]:
    """Every message of ``queues`` taken and acked, counted by id."""
    seen: collections.Counter[str] = collections.Counter()
    conn = await connect(url)
    ch = await conn.channel()
    await ch.qos(5000)
    quiet = asyncio.Event()

    def on_message(msg: Message) -> None:
        seen[msg.body.decode()] += 1
        ch.ack(msg.delivery_tag)
        quiet.set()

    for q in queues:
        await ch.consume(q, on_message)
    while sum(seen.values()) < expect:  # then a little longer: duplicates would show
        quiet.clear()
        try:
            await asyncio.wait_for(quiet.wait(), 5)
        except TimeoutError:
            break
    await asyncio.sleep(0.3)
    await conn.close()
    return seen


def drain(url: str, queues: list[str], expect: int) -> collections.Counter[str]:
    return asyncio.run(_drain(url, queues, expect))


def depths(url: str, queues: list[str]) -> dict[str, int]:
    async def run() -> dict[str, int]:
        conn = await connect(url)
        ch = await conn.channel()
        out = {q: (await ch.queue_declare(q, passive=True)).message_count for q in queues}
        await conn.close()
        return out

    return asyncio.run(run())


def check(seen: collections.Counter[str], count: int) -> dict[str, Any]:
    """Lost and duplicated ids."""
    lost = [i for i in range(count) if seen[f"id-{i}"] == 0]
    dup = [k for k, n in seen.items() if n > 1]
    extra = [k for k in seen if not k.startswith("id-") or int(k[3:]) >= count]
    return {"lost": len(lost), "duplicated": len(dup), "unknown": len(extra),
            "received": sum(seen.values())}


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _brokers  # a sibling module, not a package

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=10)
    args = parser.parse_args()
    queues = queue_names(args.queues)
    http, rabbit_http = _brokers.free_port(), _brokers.free_port()
    rabbit = _brokers.rabbitmq(
        plugins=("rabbitmq_management",),
        extra_conf=f"management.tcp.port = {rabbit_http}\nmanagement.tcp.ip = 127.0.0.1\n",
    )
    with rabbit as rabbit_url, _brokers.roost("--http-port", str(http)) as roost_url, \
            tempfile.TemporaryDirectory() as tmp:
        declare_source(rabbit_url, queues)
        t = time.perf_counter()
        fill(rabbit_url, queues, args.count)
        print(f"filled RabbitMQ: {args.count:,} messages in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
        # the guide's step 1, through RabbitMQ's management API (rabbitmqctl
        # export_definitions writes the same document)
        defs = Path(tmp) / "definitions.json"
        got = httpx.get(f"http://127.0.0.1:{rabbit_http}/api/definitions",
                        auth=("guest", "guest"), timeout=30)
        defs.write_text(got.raise_for_status().text)
        took = migrate(defs, rabbit_url, f"http://127.0.0.1:{http}", timeout=900)
        left = depths(rabbit_url, queues)
        result = check(drain(roost_url, queues, args.count), args.count)
    print(f"\nmigration of {args.count:,} messages in {args.queues} queues, "
          f"RabbitMQ 3.10 -> Roost, on-confirm shovels")
    print("| shovels took | msg/s | received | lost | duplicated | left in RabbitMQ |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {took:.1f} s | {args.count / took:,.0f} | {result['received']:,} | "
          f"{result['lost']} | {result['duplicated']} | {sum(left.values())} |")
    if result["lost"] or result["duplicated"] or result["unknown"] or sum(left.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
