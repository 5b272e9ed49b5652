"""A kill campaign on a 3-node cluster's replicated quorum queue: a publisher with
confirms and a consumer with manual acks run throughout; each round kills a random node
with kill -9 (the queue's leader or a follower), measures the failover time when it was
the leader (kill -> first confirm of a publish begun after the kill), restarts it, and at
the end the history checker decides (every confirmed message delivered, nothing acked
delivered again, per-publisher order apart from redeliveries).

    .venv/bin/python bench/quorum_failover.py --rounds 10 [--lease-ttl 2] [--seed 1]
        [--kill random|leader]

``--kill leader`` kills the queue's leader every round (the issue's "median and max over
10 kills"), ``random`` (the default) any node.

Acks are held for half a second before each kill (an ack in flight when a node dies is
lost with it, and its message is rightly delivered again; RabbitMQ's too).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import pika  # noqa: E402

from roost.cluster.etcd_server import EtcdServer  # noqa: E402
from tests.cluster.conftest import node  # noqa: E402
from tests.cluster.history import History, body  # noqa: E402
from tests.support import RoostProcess  # noqa: E402


class Campaign:
    def __init__(self, nodes: list[RoostProcess]) -> None:
        self.nodes = nodes
        self.h = History()
        self.stop = threading.Event()
        self.stop_publishing = threading.Event()
        self.hold = threading.Event()
        self.flush = threading.Event()
        self.down: set[int] = set()
        self.times: list[tuple[float, float]] = []
        self.consumer_at = ""

    def url(self, k: int) -> str:
        for i in range(len(self.nodes)):
            j = (k + i) % len(self.nodes)
            if j not in self.down:
                return self.nodes[j].url
        raise RuntimeError("no node up")

    def publisher(self) -> None:
        seq, k = 0, 0
        while not self.stop_publishing.is_set():
            try:
                with pika.BlockingConnection(pika.URLParameters(self.url(k))) as conn:
                    ch = conn.channel()
                    ch.confirm_delivery()
                    while not self.stop_publishing.is_set():
                        self.h.publish(("p", seq), "work")
                        began = time.monotonic()
                        try:
                            ch.basic_publish("", "work", body("p", seq, 256))
                        except (pika.exceptions.NackError, pika.exceptions.UnroutableError):
                            self.h.confirm(("p", seq), ok=False)
                            seq += 1
                            time.sleep(0.05)
                            continue
                        self.h.confirm(("p", seq))
                        self.times.append((began, time.monotonic()))
                        seq += 1
            except (pika.exceptions.AMQPError, OSError):
                seq += 1
                k += 1
                time.sleep(0.2)

    def consumer(self) -> None:
        k = 1
        while not self.stop.is_set():
            stale: list[int] = []
            try:
                with pika.BlockingConnection(pika.URLParameters(self.url(k))) as conn:
                    self.consumer_at = self.url(k)
                    ch = conn.channel()
                    ch.basic_qos(prefetch_count=50)
                    for method, _props, raw in ch.consume("work", inactivity_timeout=0.1):
                        if stale and (self.flush.is_set() or not self.hold.is_set()):
                            for tag in stale:
                                ch.basic_ack(tag)
                            stale.clear()
                        if method is None:
                            if self.stop.is_set():
                                return
                            continue
                        msg = self.h.deliver("c", raw, method.redelivered)
                        if self.hold.is_set():
                            stale.append(method.delivery_tag)
                            continue
                        ch.basic_ack(method.delivery_tag)
                        self.h.ack(msg)
            except (pika.exceptions.AMQPError, OSError):
                k += 1
                time.sleep(0.2)

    def leader(self) -> str:
        for i, n in enumerate(self.nodes):
            if i in self.down:
                continue
            try:
                shown = httpx.get(f"{n.http_url}/api/queues/%2F/work", auth=("guest", "guest"))
                return str(shown.json().get("leader"))
            except httpx.HTTPError:
                continue
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--lease-ttl", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--kill",
        choices=("random", "leader"),
        default="random",
        help="the node killed each round: any, or the queue's leader",
    )
    parser.add_argument("--keep", help="a directory to run in and keep (node logs)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ttl = ("--cluster-lease-ttl", str(args.lease_ttl))
    with tempfile.TemporaryDirectory(prefix="quorum-failover-") as tmp:
        base = Path(args.keep or tmp)
        etcd = EtcdServer(base / "etcd").start()
        nodes = [node(etcd, base / f"n{i}", f"n{i}", *ttl) for i in (1, 2, 3)]
        c = Campaign(nodes)
        failovers: list[float] = []
        rows: list[str] = []
        try:
            for n in nodes:
                n.start()
            nodes[0].wait_for_log("link with n3 up")
            with pika.BlockingConnection(pika.URLParameters(nodes[0].url)) as conn:
                conn.channel().queue_declare(
                    "work", durable=True, arguments={"x-queue-type": "quorum"}
                )
            threads = [threading.Thread(target=c.publisher), threading.Thread(target=c.consumer)]
            for t in threads:
                t.start()
            for rnd in range(1, args.rounds + 1):
                time.sleep(2)
                leader = c.leader()
                victim = rng.randrange(3)
                if args.kill == "leader" and leader in {f"n{i + 1}" for i in range(3)}:
                    victim = int(leader[1:]) - 1
                c.hold.set()
                time.sleep(0.5)
                nodes[victim].kill()
                c.down.add(victim)
                t_kill = time.monotonic()
                c.flush.set()
                deadline = t_kill + 30
                while time.monotonic() < deadline and not any(b > t_kill for b, _ in c.times):
                    time.sleep(0.05)
                after = [d for b, d in c.times if b > t_kill]
                took = (after[0] - t_kill) if after else float("nan")
                was_leader = f"n{victim + 1}" == leader
                if was_leader:
                    failovers.append(took)
                rows.append(
                    f"{rnd:5} | n{victim + 1:<6} | {'leader' if was_leader else 'follower':8} "
                    f"| {took:8.2f}"
                )
                print(rows[-1], flush=True)
                c.hold.clear()
                c.flush.clear()
                nodes[victim].start()
                c.down.discard(victim)
            c.stop_publishing.set()
            threads[0].join(30)
            # the consumer drains what is left: done when it has everything confirmed,
            # or when nothing new arrived for 10 s
            seen, idle_since = -1, time.monotonic()
            while time.monotonic() - idle_since < 10:
                delivered = {m for _q, m, _r in c.h.deliveries}
                if c.h.confirmed <= delivered:
                    break
                if len(c.h.deliveries) != seen:
                    seen, idle_since = len(c.h.deliveries), time.monotonic()
                time.sleep(0.2)
            if not c.h.confirmed <= {m for _q, m, _r in c.h.deliveries}:
                print("consumer on", c.consumer_at, "last delivery", c.h.deliveries[-1:])
                for i, n in enumerate(nodes):
                    shown = httpx.get(
                        f"{n.http_url}/api/queues/%2F/work", auth=("guest", "guest")
                    ).json()
                    keys = ("leader", "online", "consumers", "messages_ready",
                            "messages_unacknowledged")  # fmt: skip
                    print(f"n{i + 1}", n.url, {k: shown.get(k) for k in keys})
            c.stop.set()
            for t in threads:
                t.join(30)
        finally:
            c.stop.set()
            c.stop_publishing.set()
            for n in nodes:
                n.kill()
            etcd.kill()
            tracebacks = [f"n{i + 1}" for i, n in enumerate(nodes) if "Traceback" in n.log]
            if args.keep:
                for i, n in enumerate(nodes):
                    (base / f"n{i + 1}.log").write_text(n.log)
    problems = c.h.problems()
    print("\nround | killed  | role     | to next confirm (s)")
    print("\n".join(rows))
    if failovers:
        print(
            f"\nleader kills: {len(failovers)}, failover median "
            f"{statistics.median(failovers):.2f} s, max {max(failovers):.2f} s "
            f"(lease TTL {args.lease_ttl} s)"
        )
    print(f"confirmed {len(c.h.confirmed)}, nacked {len(c.h.nacked)}, acked {len(c.h.acked)}")
    print("history checker:", problems or "OK")
    print("tracebacks in the logs of:", tracebacks or "none")
    return 1 if problems or tracebacks else 0


if __name__ == "__main__":
    sys.exit(main())
