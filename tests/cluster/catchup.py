"""A quorum queue member far behind catches up: the scenario shared by the suite's short
test (``test_quorum_catchup.py``) and the long benchmark (``bench/quorum_catchup.py``).

Three nodes; ``held`` messages published with confirms and in sync on every member;
kill -9 of a follower (n3); ``behind`` messages published with confirms
(in windows, recorded by the history checker); n3 restarted, timed until the leader
counts it in sync (``online``); then the leader (n1) killed with kill -9: the caught-up
member and n2 elect one of them (a majority of the three, as Raft and RabbitMQ's quorum
queues need; one member alone never leads) and every confirmed message must be served.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import aio_pika
import httpx
import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.history import History, body
from tests.confirming import publish_confirmed
from tests.support import RoostProcess

QUORUM = {"x-queue-type": "quorum"}


@dataclass
class Figures:
    behind: int = 0
    held: int = 0  # in the queue, and on n3, before its kill
    publish_s: float = 0.0
    catch_up_s: float = 0.0  # n3 restarted (process spawned) -> in the leader's online set
    start_s: float = 0.0  # of which: n3 spawned -> serving clients
    leader_rss_before_mb: float = 0.0
    leader_rss_peak_mb: float = 0.0  # sampled every 20 ms during the catch-up
    leader_hwm_mb: float = 0.0  # the leader's peak RSS of its whole run (the kernel's)
    n3_rss_peak_mb: float = 0.0
    problems: list[str] = field(default_factory=list)
    delivered: int = 0
    live: int = 0  # confirmed while n3 caught up
    how: str = ""  # the leader's log line naming what it sent n3


def rss_mb(server: RoostProcess, field: str = "VmRSS") -> float:
    """The process's resident memory (``VmHWM``: its peak so far), in MB."""
    assert server.proc is not None
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def online(server: RoostProcess, queue: str) -> list[str]:
    try:
        url = f"{server.http_url}/api/queues/%2F/{queue}"
        shown = httpx.get(url, auth=("guest", "guest"), timeout=30)
    except httpx.TransportError:  # a node too busy to answer: not in sync yet
        return []
    return list(shown.json().get("online", [])) if shown.status_code == 200 else []


async def _publish(url: str, queue: str, h: History, count: int, size: int, tag: str = "p") -> None:
    """``count`` persistent messages with confirms, 500 in flight at a time."""
    conn = await aio_pika.connect(url)
    async with conn:
        ch = await conn.channel(publisher_confirms=True)
        for start in range(0, count, 500):
            ids = range(start, min(start + 500, count))
            for i in ids:
                h.publish((tag, i), queue)
            results = await asyncio.gather(
                *(
                    ch.default_exchange.publish(
                        aio_pika.Message(body(tag, i, size), delivery_mode=2), queue
                    )
                    for i in ids
                ),
                return_exceptions=True,
            )
            for i, res in zip(ids, results, strict=True):
                h.confirm((tag, i), ok=not isinstance(res, BaseException))


def _trickle(server: RoostProcess, h: History, stop: threading.Event, size: int) -> None:
    def settled(n: int, ok: bool, _began: float) -> None:
        h.confirm(("live", n), ok=ok)

    publish_confirmed(
        server.url, "catch", stop, lambda n: body("live", n, size), settled,
        sending=lambda n: h.publish(("live", n), "catch"), pause=0.002,
    )  # fmt: skip


def _sample(servers: list[RoostProcess], peaks: list[float], stop: threading.Event) -> None:
    while not stop.is_set():
        for k, server in enumerate(servers):
            with contextlib.suppress(OSError, AssertionError):  # not started yet
                peaks[k] = max(peaks[k], rss_mb(server))
        time.sleep(0.02)


def run(
    etcd: EtcdServer, prefix: str, tmp: Path, behind: int, size: int = 256,
    catch_up_within: float = 60.0, lease_ttl: int = 2, held: int = 10,
) -> Figures:  # fmt: skip
    """``held``: messages in the queue (and on n3) before n3's kill."""
    ttl = ("--cluster-lease-ttl", str(lease_ttl))
    nodes = [node(etcd, tmp / f"n{i}", f"n{i}", *ttl, prefix=prefix) for i in (1, 2, 3)]
    n1, n2, n3 = nodes
    fig = Figures(behind=behind, held=held)
    h = History()
    try:
        for n in nodes:
            n.start()
        for other in ("n2", "n3"):
            n1.wait_for_log(f"node '{other}' is up")
            n1.wait_for_log(f"link with {other} up")
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            ch = conn.channel()
            ch.queue_declare("catch", durable=True, arguments=QUORUM)
        asyncio.run(_publish(n1.url, "catch", h, held, size, "early"))  # n3 holds these
        assert len(h.confirmed) == held, f"{len(h.nacked)} nacked"
        deadline = time.monotonic() + 10 + held / 1000
        while sorted(online(n1, "catch")) != ["n1", "n2", "n3"]:
            assert time.monotonic() < deadline, online(n1, "catch")
            time.sleep(0.05)
        n3.kill()
        n1.wait_for_log("link with n3 down")
        began = time.monotonic()
        asyncio.run(_publish(n1.url, "catch", h, behind, size))
        fig.publish_s = time.monotonic() - began
        assert len(h.confirmed) == behind + held, f"{len(h.nacked)} nacked"
        fig.leader_rss_before_mb = rss_mb(n1)
        peaks = [0.0, 0.0]
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=([n1, n3], peaks, stop))
        sampler.start()
        # publishes go on through the catch-up: they reach n3 after the snapshot's end
        trickle_stop = threading.Event()
        trickle = threading.Thread(target=_trickle, args=(n2, h, trickle_stop, size))
        trickle.start()
        began = time.monotonic()
        n3.start()
        fig.start_s = time.monotonic() - began
        try:
            while "n3" not in online(n1, "catch"):
                if time.monotonic() - began > catch_up_within:
                    raise AssertionError(f"n3 not in sync after {catch_up_within} s:\n{n3.log}")
                time.sleep(0.05)
            fig.catch_up_s = time.monotonic() - began
            fig.how = next((ln for ln in reversed(n1.log_lines) if "sent to n3" in ln), "")
        finally:
            stop.set()
            sampler.join()
        fig.leader_rss_peak_mb, fig.n3_rss_peak_mb = peaks
        fig.leader_hwm_mb = rss_mb(n1, "VmHWM")
        time.sleep(0.5)
        trickle_stop.set()
        trickle.join(10)
        fig.live = sum(1 for p, _i in h.confirmed if p == "live")
        time.sleep(1)  # quiet: n3 acks the last records in milliseconds
        # the leader goes: the caught-up member and n2 (a majority) elect one of them
        n1.kill()
        delivered: set[tuple[str, int]] = set()
        idle_since = time.monotonic()  # a new leader once n1's lease expires
        while not h.confirmed <= delivered and time.monotonic() - idle_since < 30:
            try:
                with pika.BlockingConnection(pika.URLParameters(n3.url)) as conn:
                    ch = conn.channel()
                    ch.basic_qos(prefetch_count=1000)
                    unacked: list[tuple[str, int]] = []
                    tag = 0
                    for method, _p, raw in ch.consume("catch", inactivity_timeout=3):
                        if method is None or len(unacked) == 200:
                            # acks in batches (100,000 take a while), the rest when idle
                            if unacked:
                                ch.basic_ack(tag, multiple=True)
                                for msg in unacked:
                                    h.ack(msg)
                                unacked.clear()
                            if method is None:
                                break
                        msg = h.deliver("c", raw, method.redelivered)
                        if msg not in delivered:
                            idle_since = time.monotonic()  # progress: a message not seen
                        delivered.add(msg)
                        unacked.append(msg)
                        tag = method.delivery_tag
            except pika.exceptions.AMQPError:
                time.sleep(0.5)
        fig.delivered = len(delivered)
        fig.problems = h.problems()
        return fig
    finally:
        for n in nodes:
            n.kill()
