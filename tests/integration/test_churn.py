"""Connection churn leaves nothing behind (issue 19): short-lived AMQP, STOMP and
WebSocket connections (closed cleanly, dropped, dropped mid-frame, with channels,
consumers, exclusive queues and unacked messages; roost.perf.churn) are opened and
closed by the thousand; afterwards the management API lists none of them and the
broker's resident memory is where it was after the first thousand.

Each closed connection once left ~12 KB behind (its objects referred to each other,
so only a full collection, which the broker's GC tuning all but never runs, could
free them): the 3,000 here then added 26 MB, far above the tolerance (the rest of the
broker's growth over them is the allocator settling: 1-3 MB, flat after 4,000).
The long version (30,000 connections, RabbitMQ beside it) is
``bench/rss_bench.py --churn``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from roost.client import parse_uri as parse_url
from roost.perf import churn
from tests.support import RoostProcess

# Ten runs of this test (session 12, a 2-core box at load 5-12) grew the broker by 0.4 to
# 2.5 MB over its 3,000 connections (pure 0.4-1.6, compiled 0.4-2.5): the allocator
# settling. 4 MB stands clear of that and still fails a leak of 1.4 KB a connection or
# more (the cycle of issue 19 left ~12 KB: +26 MB here); 8 MB let up to 2.7 KB through.
TOLERANCE_MB = 4.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def api(server: RoostProcess, path: str) -> Any:
    reply = httpx.get(f"{server.http_url}/api/{path}", auth=("guest", "guest"), timeout=10)
    reply.raise_for_status()
    return reply.json()


def run_churn(server: RoostProcess, amqp: int, stomp: int, ws: int) -> None:
    """In waves of 500 held open half a second: long enough for the broker's objects of
    a connection to grow old, as those of a pool's connections do."""
    ep = parse_url(server.url)
    counts = {"amqp": amqp, "stomp": stomp, "ws": ws}
    asyncio.run(churn.churn(ep, server.stomp_port, server.ws_port, counts, wave=500, hold=0.5))


def settled_rss(server: RoostProcess) -> float:
    """RSS once every connection the broker knew of is gone."""
    deadline = time.monotonic() + 30
    while api(server, "overview")["object_totals"]["connections"]:
        assert time.monotonic() < deadline, "connections still open"
        time.sleep(0.2)
    time.sleep(0.5)
    assert server.proc is not None
    return rss_mb(server.proc.pid)


def test_churn_leaves_no_connection_and_no_memory_behind(fresh_roost: RoostProcess) -> None:
    run_churn(fresh_roost, 600, 200, 200)  # the first thousand: caches, arenas, warm-up
    before = settled_rss(fresh_roost)
    run_churn(fresh_roost, 1800, 600, 600)
    after = settled_rss(fresh_roost)
    assert after - before < TOLERANCE_MB, (before, after)
    # the registries the management API lists are empty again
    assert api(fresh_roost, "connections") == []
    assert api(fresh_roost, "channels") == []
    assert api(fresh_roost, "consumers") == []
    leftover = [q["name"] for q in api(fresh_roost, "queues") if q["exclusive"] or
                q["auto_delete"]]
    assert leftover == []
    totals = api(fresh_roost, "overview")["object_totals"]
    assert (totals["connections"], totals["channels"], totals["consumers"]) == (0, 0, 0)
    closed = api(fresh_roost, "connections?state=closed")
    assert 0 < len(closed) <= 100  # a bounded ring of the last closed ones, with reasons
