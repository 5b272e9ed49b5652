"""Publisher confirms after the fsync, many confirms per fsync, and a bounded ack log,
on a real server (issue 3)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pika
import pytest

from roost.client import connect
from roost.perf.amqp import publish_template
from roost.store import hub as hub_module
from roost.store.hub import DiskStore
from tests.support import RoostProcess, sync_ops

PERSISTENT = pika.BasicProperties(delivery_mode=2)
PROPS = (None,) * 14



def test_confirm_follows_the_fsync_in_interval_mode(slow_sync: RoostProcess, qname: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(slow_sync.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(qname, durable=True)
        ch.confirm_delivery()
        for i in range(3):
            before = sync_ops(slow_sync)
            ch.basic_publish("", qname, b"safe %d" % i, PERSISTENT)  # returns on its ack
            assert sync_ops(slow_sync) > before, "the confirm came before the fsync"


def test_always_mode_settles_a_waiter_only_after_its_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--fsync always (the default): a confirm or receipt waiting for a message is settled
    only once the fsync of the pass that wrote it has returned. The store's real fsync
    runs behind a gate, so a settle that came before it would be seen while it waits."""
    entered, gate = threading.Event(), threading.Event()
    synced: list[Path] = []
    real_sync = hub_module.sync_files

    def gated_sync(paths: set[Path], dirs: set[Path]) -> float:
        entered.set()
        assert gate.wait(10)
        elapsed = real_sync(paths, dirs)
        synced.extend(paths)
        return elapsed

    monkeypatch.setattr(hub_module, "sync_files", gated_sync)

    async def publish_and_wait() -> None:
        loop = asyncio.get_running_loop()
        hub = DiskStore(tmp_path, fsync="always")
        hub.start(loop)
        store = hub.open_queue("/", "q")
        store.append("", "q", PROPS, b"must be on disk first")
        settled: asyncio.Future[bool] = loop.create_future()
        hub.when_durable(settled.set_result)
        assert await loop.run_in_executor(None, entered.wait, 10)  # written, fsync running
        for _ in range(20):  # let every callback the loop has run
            await asyncio.sleep(0)
        assert not settled.done(), "settled before its fsync returned"
        gate.set()
        assert await asyncio.wait_for(settled, 10) is True
        assert store.dir / "00000001.seg" in synced
        await hub.close()

    asyncio.run(publish_and_wait())


def test_many_confirms_in_flight_share_few_fsyncs(fresh_roost: RoostProcess, qname: str) -> None:
    """--fsync always (the default): 1000 persistent publishes that reach the broker in
    one burst are confirmed after a handful of fsyncs, not one each. The burst is one
    socket write from Roost's own load-generator client, so the count does not depend on
    how fast a client library trickles frames out on a loaded machine."""
    n = 1000
    with pika.BlockingConnection(pika.URLParameters(fresh_roost.url)) as conn:
        conn.channel().queue_declare(qname, durable=True)
    before = sync_ops(fresh_roost)

    async def publish_all() -> None:
        conn = await connect(fresh_roost.url)
        ch = await conn.channel()
        await ch.confirm_select()
        head, tail = publish_template(
            exchange="", routing_key=qname, size=16, persistent=True, frame_max=conn.frame_max
        )
        # the channel counts the publishes it confirms; these bypass it, so it is told
        confirms = [ch.expect_confirm() for _ in range(n)]
        conn.write(b"".join(head + i.to_bytes(8, "big") + tail for i in range(n)))
        assert all(await asyncio.wait_for(asyncio.gather(*confirms), 60))  # no nack
        await conn.close()

    asyncio.run(publish_all())
    fsyncs = sync_ops(fresh_roost) - before
    assert 1 <= fsyncs <= 20, f"{fsyncs} fsyncs for {n} confirms"
    with pika.BlockingConnection(pika.URLParameters(fresh_roost.url)) as conn:
        assert conn.channel().queue_declare(qname, passive=True).method.message_count == n


def test_ack_log_is_compacted_and_survives_kill_9(tmp_path: Path) -> None:
    """--ack-compact-bytes 1024: acking 1500 of 2000 messages one by one (3000 entries of
    12 bytes: a delivered mark and an ack each) keeps the ack log near 1 KiB, and after a
    kill -9 exactly the unacked messages are there."""
    data = tmp_path / "data"
    server = RoostProcess(data, "--ack-compact-bytes", "1024").start()
    try:
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            ch.queue_declare("compact", durable=True)
            ch.confirm_delivery()
            for i in range(2000):
                ch.basic_publish("", "compact", b"%04d" % i, PERSISTENT)
            largest = 0
            for i in range(1500):
                method, _props, body = ch.basic_get("compact")
                assert body == b"%04d" % i
                ch.basic_ack(method.delivery_tag)
                if i % 50 == 49:
                    ch.queue_declare("compact", passive=True)  # a round trip
                    found = list(data.rglob("acks"))
                    if found:
                        largest = max(largest, found[0].stat().st_size)
            # a confirmed publish: the group commit that confirms it wrote every ack before
            ch.basic_publish("", "compact", b"last", PERSISTENT)
        assert 0 < largest <= 1024 + 12 * 2 * 50, largest
        server.kill()
        server = RoostProcess(data, "--ack-compact-bytes", "1024").start()
        assert "recovered 501 messages in 1 queues" in server.log
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            got = []
            while (msg := ch.basic_get("compact", auto_ack=True))[0] is not None:
                got.append(msg[2])
        assert got == [b"%04d" % i for i in range(1500, 2000)] + [b"last"]
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log
