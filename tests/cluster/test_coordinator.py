"""The coordinator against a real etcd 3.4: CAS transactions on revisions, snapshots and
watches from a revision (across an etcd restart), leases kept alive and lost, clear errors
when etcd cannot be reached."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from roost.cluster.coordinator import (
    Change,
    Compare,
    Coordinator,
    Delete,
    Get,
    Put,
    prefix_end,
)
from roost.cluster.errors import ClusterError, CoordinatorUnavailable
from roost.cluster.etcd_server import EtcdServer, free_port
from roost.cluster.lease import LeaseKeeper
from roost.cluster.urls import parse_cluster_url

T = TypeVar("T")


def run(make: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await make()

    return asyncio.run(main())


def coordinator(etcd: EtcdServer) -> Coordinator:
    endpoints, _ = parse_cluster_url(etcd.url())
    return Coordinator(endpoints, timeout=2.0)


def test_parse_cluster_url() -> None:
    assert parse_cluster_url("etcd://127.0.0.1:2379") == ([("127.0.0.1", 2379)], "/roost")
    assert parse_cluster_url("etcd://a:1,b:2/prod/") == ([("a", 1), ("b", 2)], "/prod")
    assert parse_cluster_url("etcd://[::1]:2379") == ([("::1", 2379)], "/roost")
    for bad in ("http://a:1", "etcd://a", "etcd://a:x", "etcd://:1", "etcd://a:99999"):
        with pytest.raises(ValueError):
            parse_cluster_url(bad)


def test_prefix_end() -> None:
    assert prefix_end("/a/") == b"/a0"
    assert prefix_end("a\xff") == "a\xff".encode()[:-1] + b"\xc0"


def test_cas_declare_race_has_one_winner(shared_etcd: EtcdServer, etcd_prefix: str) -> None:
    """Two writers create the same key if absent: etcd lets exactly one in, and the loser
    reads the winner's value in the same transaction."""
    key = etcd_prefix + "/queue"

    async def main() -> list[tuple[bool, list[bytes]]]:
        c1, c2 = coordinator(shared_etcd), coordinator(shared_etcd)
        try:

            async def declare(c: Coordinator, value: bytes) -> tuple[bool, list[bytes]]:
                r = await c.txn([Compare(key, "create", 0)], [Put(key, value)], [Get(key)])
                return r.succeeded, [kv.value for kv in (r.reads[0] if r.reads else [])]

            return list(await asyncio.gather(declare(c1, b"durable"), declare(c2, b"transient")))
        finally:
            await c1.close()
            await c2.close()

    results = run(main)
    winners = [r for r in results if r[0]]
    losers = [r for r in results if not r[0]]
    assert len(winners) == 1 and len(losers) == 1
    assert losers[0][1] in ([b"durable"], [b"transient"])


def test_cas_on_mod_revision(shared_etcd: EtcdServer, etcd_prefix: str) -> None:
    key = etcd_prefix + "/k"

    async def main() -> None:
        c = coordinator(shared_etcd)
        try:
            rev = await c.put(key, b"1")
            stale = await c.put(key, b"2")
            assert stale > rev
            lost = await c.txn([Compare(key, "mod", rev)], [Put(key, b"3")])
            assert not lost.succeeded
            won = await c.txn([Compare(key, "mod", stale)], [Put(key, b"3")])
            assert won.succeeded and won.revision > stale
            got = await c.get(key)
            assert got is not None and got.value == b"3" and got.mod_revision == won.revision
            await c.delete(etcd_prefix, prefix=True)
            assert await c.get(key) is None
        finally:
            await c.close()

    run(main)


def test_snapshot_then_watch_misses_nothing(shared_etcd: EtcdServer, etcd_prefix: str) -> None:
    """get_prefix gives a revision; a watch from the next one sees every later change, one
    batch per revision (a transaction's changes together)."""
    p = etcd_prefix + "/"

    async def main() -> list[list[Change]]:
        c = coordinator(shared_etcd)
        try:
            await c.put(p + "a", b"1")
            kvs, rev = await c.get_prefix(p)
            assert [(kv.key, kv.value) for kv in kvs] == [(p + "a", b"1")]
            await c.txn([], [Put(p + "b", b"2"), Put(p + "c", b"3")])
            await c.txn([], [Delete(p + "a")])
            await c.put(etcd_prefix + "-outside", b"x")
            seen: list[list[Change]] = []
            async for batch in c.watch(p, rev + 1):
                seen.append(batch)
                if len(seen) == 2:
                    break
            return seen
        finally:
            await c.close()

    first, second = run(main)
    assert [(ch.key, ch.value) for ch in first] == [(p + "b", b"2"), (p + "c", b"3")]
    assert first[0].revision == first[1].revision
    assert [(ch.key, ch.value) for ch in second] == [(p + "a", None)]
    assert second[0].revision == first[0].revision + 1


def test_watch_resumes_after_etcd_restart(etcd: EtcdServer) -> None:
    """kill -9 of etcd under a watch: the watch resumes from the next revision on its own;
    a write while etcd is down fails at once with a clear error."""

    async def main() -> tuple[list[str], str]:
        c = coordinator(etcd)
        try:
            await c.put("/w/0", b"x")
            _, rev = await c.get_prefix("/w/")
            got: list[str] = []
            reached = asyncio.Event()

            async def watch() -> None:
                async for batch in c.watch("/w/", rev + 1):
                    got.extend(ch.key for ch in batch)
                    reached.set()
                    if len(got) == 3:
                        return

            task = asyncio.create_task(watch())
            await c.put("/w/1", b"x")
            await asyncio.wait_for(reached.wait(), 5)
            await asyncio.to_thread(etcd.kill)
            with pytest.raises(CoordinatorUnavailable) as refused:
                await c.put("/w/lost", b"x")
            await asyncio.to_thread(etcd.start)
            writer = coordinator(etcd)
            # etcd answers its health check before its gRPC port takes every connection
            # on a loaded box: the first write may be refused, so it is tried for 10 s
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while True:
                try:
                    await writer.put("/w/2", b"x")
                    break
                except CoordinatorUnavailable:
                    if loop.time() > deadline:
                        raise
                    await asyncio.sleep(0.1)
            await writer.put("/w/3", b"x")
            await writer.close()
            await asyncio.wait_for(task, 15)
            return got, str(refused.value)
        finally:
            await c.close()

    got, error = run(main)
    assert got == ["/w/1", "/w/2", "/w/3"]
    assert f"etcd unreachable at {etcd.endpoint}" in error


def test_unreachable_etcd_is_a_clear_error() -> None:
    port = free_port()

    async def main() -> float:
        c = Coordinator([("127.0.0.1", port)], timeout=1.0)
        started = time.monotonic()
        try:
            with pytest.raises(
                CoordinatorUnavailable, match=f"etcd unreachable at 127.0.0.1:{port}"
            ):
                await c.txn([Compare("/x", "create", 0)], [Put("/x", b"1")])
            with pytest.raises(CoordinatorUnavailable):
                await c.get_prefix("/x")
            return time.monotonic() - started
        finally:
            await c.close()

    assert run(main) < 5


def test_second_endpoint_serves_reads(shared_etcd: EtcdServer, etcd_prefix: str) -> None:
    """--cluster lists several endpoints: a dead first one costs a read nothing."""
    dead = ("127.0.0.1", free_port())
    live = ("127.0.0.1", shared_etcd.client_port)

    async def main() -> None:
        c = Coordinator([dead, live], timeout=1.0)
        try:
            kvs, rev = await c.get_prefix(etcd_prefix + "/")
            assert kvs == [] and rev > 0
            assert await c.put(etcd_prefix + "/k", b"v") > rev
        finally:
            await c.close()

    run(main)


def test_lease_kept_alive_then_lost(shared_etcd: EtcdServer, etcd_prefix: str) -> None:
    """A kept lease outlives its TTL; once revoked behind the keeper's back (as when it
    expires while etcd was out of reach), the keeper says so and its keys are gone."""
    key = etcd_prefix + "/node"

    async def main() -> None:
        c = coordinator(shared_etcd)
        try:
            lease = await c.grant_lease(1)
            await c.put(key, b"up", lease=lease)
            lost = asyncio.Event()
            keeper = LeaseKeeper(c, lease, 1, lost.set)
            keeper.start()
            await asyncio.sleep(2.5)
            assert (await c.get(key)) is not None
            other = coordinator(shared_etcd)
            await other.revoke_lease(lease)
            await other.close()
            await asyncio.wait_for(lost.wait(), 3)
            assert await c.get(key) is None
            await keeper.stop(revoke=False)
        finally:
            await c.close()

    run(main)


def test_a_keeper_fences_past_its_deadline_and_lifts_the_fence_on_a_renewal(
    shared_etcd: EtcdServer,
) -> None:
    """A keeper whose last renewal is older than TTL less the margin says "fenced" at
    once (the node must stop its elected roles), and "no longer" when its next
    keepalive renews the lease, which was never lost."""

    async def main() -> None:
        c = coordinator(shared_etcd)
        try:
            lease = await c.grant_lease(3)
            said: list[bool] = []
            keeper = LeaseKeeper(c, lease, 3, lambda: None,
                                 renewed_at=time.monotonic() - 3, on_fence=said.append)  # fmt: skip
            assert not keeper.in_lease()
            keeper.start()
            for _ in range(200):
                if len(said) == 2:
                    break
                await asyncio.sleep(0.05)
            assert said == [True, False] and keeper.in_lease()
            await keeper.stop()
        finally:
            await c.close()

    run(main)


def test_refused_request_is_not_unavailable(shared_etcd: EtcdServer) -> None:
    async def main() -> None:
        c = coordinator(shared_etcd)
        try:
            with pytest.raises(ClusterError) as refused:
                await c.put("/x/leased", b"v", lease=12345)  # no such lease
            assert not isinstance(refused.value, CoordinatorUnavailable)
            assert "lease not found" in str(refused.value)
        finally:
            await c.close()

    run(main)
