"""Durability against a real server: restarts, kill -9, transient vs persistent, damage."""

from __future__ import annotations

import asyncio
import datetime
import functools
import hashlib
import random
import shutil
from pathlib import Path

import aio_pika
import aiormq
import pika
import pytest

from tests.integration.conftest import pika_params
from tests.support import RoostProcess, drain, restart

PERSISTENT = 2


def connect(server: RoostProcess) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika_params(server))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_persistent_messages_survive_kill_9_after_confirm(data_dir: Path) -> None:
    """Published through a named exchange with a routing key that is not the queue's
    name: after a kill -9 every message comes back in order with its exchange, routing
    key and every property as published, not redelivered; after one more restart (they
    were delivered, not acked) redelivered."""
    server = RoostProcess(data_dir).start()
    when = int(datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC).timestamp())

    def props(i: int) -> pika.BasicProperties:
        return pika.BasicProperties(
            content_type="text/plain",
            content_encoding="gzip",
            headers={"str": "v", "int": 7 + i, "nested": {"a": [1, "b"]}, "flag": True},
            delivery_mode=PERSISTENT,
            priority=i % 10,
            correlation_id=f"c{i}",
            reply_to="replies",
            expiration="3600000",
            message_id=f"m{i}",
            timestamp=when + i,
            type="order.created",
            user_id="guest",
            app_id="shop",
            cluster_id="east",
        )

    fields = [
        "content_type", "content_encoding", "headers", "delivery_mode", "priority",
        "correlation_id", "reply_to", "expiration", "message_id", "timestamp", "type",
        "user_id", "app_id", "cluster_id",
    ]  # fmt: skip
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("orders.x", "direct", durable=True)
        ch.queue_declare("dq", durable=True)
        ch.queue_bind("dq", "orders.x", "orders.created.eu")
        for i in range(20):
            ch.basic_publish("orders.x", "orders.created.eu", b"body-%d" % i, props(i))
        ch.basic_publish("orders.x", "orders.created.eu", b"transient", pika.BasicProperties())
        # the 21 publishes were confirmed (BlockingChannel waits for each ack)
        conn.close()
        server = restart(server, kill=True)
        got = drain(server, "dq")
        assert [body for _, _, body in got] == [b"body-%d" % i for i in range(20)]
        for i, (method, got_props, _) in enumerate(got):
            assert (method.exchange, method.routing_key) == ("orders.x", "orders.created.eu")
            assert not method.redelivered
            expected = props(i)
            for name in fields:
                assert getattr(got_props, name) == getattr(expected, name), (i, name)
        assert "recovered 20 messages in 1 queues" in server.log
        # they were delivered (basic.get, not acked) before this restart: redelivered now
        server = restart(server)
        again = drain(server, "dq")
        assert [b for _, _, b in again] == [b"body-%d" % i for i in range(20)]
        assert all(m.redelivered for m, _, _ in again)
        assert all(m.routing_key == "orders.created.eu" for m, _, _ in again)
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log


def test_acked_messages_do_not_come_back(data_dir: Path) -> None:
    server = RoostProcess(data_dir).start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("acked", durable=True)
        for i in range(10):
            ch.basic_publish("", "acked", b"%d" % i, pika.BasicProperties(delivery_mode=2))
        for _ in range(6):
            method, _, _ = ch.basic_get("acked")
            assert method is not None
            ch.basic_ack(method.delivery_tag)
        ch.queue_declare("acked", durable=True)  # a round trip: the acks were processed
        conn.close()
        server = restart(server)
        assert [b for _, _, b in drain(server, "acked")] == [b"6", b"7", b"8", b"9"]
    finally:
        server.kill()


def test_publishing_after_a_restart_that_found_the_newest_messages_acked(
    data_dir: Path,
) -> None:
    """The newest messages were acked before the restart and older ones were not: the
    messages published after it must still be read, acked and kept in their own places
    (the recovered index once stopped at the last live message, so new ones landed in
    the slots of the acked ones)."""
    server = RoostProcess(data_dir).start()
    try:
        with connect(server) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("tail", durable=True)
            for body in (b"a", b"b", b"c", b"d"):
                ch.basic_publish("", "tail", body, pika.BasicProperties(delivery_mode=2))
            tags = [ch.basic_get("tail")[0].delivery_tag for _ in range(4)]
            ch.basic_ack(tags[2])
            ch.basic_ack(tags[3])  # c and d acked; a and b requeued at close
        server = restart(server)
        with connect(server) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            for body in (b"e", b"f"):
                ch.basic_publish("", "tail", body, pika.BasicProperties(delivery_mode=2))
            got = []
            for _ in range(4):
                method, _, body = ch.basic_get("tail")
                got.append(body)
                if body in (b"a", b"e"):
                    ch.basic_ack(method.delivery_tag)
            assert got == [b"a", b"b", b"e", b"f"]
        server = restart(server, kill=True)
        assert [b for _, _, b in drain(server, "tail")] == [b"b", b"f"]
        server = restart(server)  # the previous run logged no traceback either
    finally:
        server.kill()


def test_non_durable_and_exclusive_queues_and_transient_messages_do_not_survive(
    data_dir: Path,
) -> None:
    server = RoostProcess(data_dir).start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("mixed", durable=True)
        ch.queue_declare("temp", durable=False)
        ch.queue_declare("ad", durable=True, auto_delete=True)
        ch.exchange_declare("tx.ex", "fanout", durable=False)
        ch.exchange_declare("dur.ex", "topic", durable=True)
        # kept, with its binding, as RabbitMQ 3.10 keeps it (an auto-delete exchange goes
        # when its last binding is removed, not at a restart)
        ch.exchange_declare("dur.ad.ex", "direct", durable=True, auto_delete=True)
        ch.queue_bind("mixed", "dur.ex", "a.#")
        ch.queue_bind("mixed", "dur.ad.ex", "via-ad")
        ch.queue_bind("temp", "dur.ex", "b")
        ch.basic_publish("", "mixed", b"t", pika.BasicProperties(delivery_mode=1))
        ch.basic_publish("", "mixed", b"p", pika.BasicProperties(delivery_mode=2))
        ch.basic_publish("", "temp", b"p2", pika.BasicProperties(delivery_mode=2))
        conn.close()
        server = restart(server)
        conn = connect(server)
        ch = conn.channel()
        assert ch.queue_declare("mixed", passive=True).method.message_count == 1
        for name in ("temp", "ad"):
            with pytest.raises(pika.exceptions.ChannelClosedByBroker):
                ch.queue_declare(name, passive=True)
            ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            ch.exchange_declare("tx.ex", passive=True)
        ch = conn.channel()
        ch.exchange_declare("dur.ex", passive=True)
        ch.confirm_delivery()
        ch.basic_publish("dur.ex", "a.x", b"routed", pika.BasicProperties(delivery_mode=2))
        ch.basic_publish("dur.ad.ex", "via-ad", b"ad", pika.BasicProperties(delivery_mode=2))
        conn.close()
        assert [b for _, _, b in drain(server, "mixed")] == [b"p", b"routed", b"ad"]
    finally:
        server.kill()


def test_definitions_survive_restart(data_dir: Path) -> None:
    server = RoostProcess(data_dir).start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.exchange_declare("src", "direct", durable=True)
        ch.exchange_declare("dst", "fanout", durable=True)
        ch.exchange_bind("dst", "src", "k")
        ch.queue_declare("dq2", durable=True, arguments={"x-max-length": 100})
        ch.queue_bind("dq2", "dst")
        conn.close()
        server = restart(server, kill=False)
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("src", "k", b"via-e2e", pika.BasicProperties(delivery_mode=2))
        conn.close()
        assert [b for _, _, b in drain(server, "dq2")] == [b"via-e2e"]
    finally:
        server.kill()


def test_damaged_files_do_not_stop_the_server(data_dir: Path) -> None:
    server = RoostProcess(data_dir).start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        for q in ("d1", "d2"):
            ch.queue_declare(q, durable=True)
            for i in range(5):
                ch.basic_publish(
                    "", q, b"%s-%d" % (q.encode(), i), pika.BasicProperties(delivery_mode=2)
                )
        conn.close()
        server.kill()
        queues = sorted((data_dir / "vhosts").glob("*/queues/*"))
        segs = {q: sorted(q.glob("*.seg")) for q in queues}
        by_size = [s for q in queues for s in segs[q]]
        with by_size[0].open("r+b") as fh:  # one queue: torn tail
            fh.truncate(by_size[0].stat().st_size - 4)
        raw = bytearray(by_size[1].read_bytes())  # the other: a flipped byte in record 1
        raw[12] ^= 0x55
        by_size[1].write_bytes(bytes(raw))
        server = RoostProcess(data_dir).start()
        assert "torn tail" in server.log and "bad checksum" in server.log
        assert "recovered 8 messages in 2 queues" in server.log
        d1, d2 = drain(server, "d1"), drain(server, "d2")
        assert len(d1) + len(d2) == 8
        server.kill()
        shutil.rmtree(queues[0])  # a missing queue directory: that queue is empty, no more
        (queues[1] / "acks").write_bytes(b"\x00" * 7)  # an ack log cut inside its first entry
        server = RoostProcess(data_dir).start()
        assert "acks torn tail of 7 bytes dropped" in server.log
        counts = sorted(len(drain(server, q)) for q in ("d1", "d2"))
        assert counts == [0, 4]
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log


def test_segments_are_deleted_after_consuming(data_dir: Path) -> None:
    server = RoostProcess(data_dir, "--segment-size", "65536").start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("gc", durable=True)
        for _ in range(300):
            ch.basic_publish("", "gc", b"x" * 1024, pika.BasicProperties(delivery_mode=2))
        qdir = next((data_dir / "vhosts").glob("*/queues/*"))
        assert len(list(qdir.glob("*.seg"))) >= 4
        while True:
            method, _, _ = ch.basic_get("gc")
            if method is None:
                break
            ch.basic_ack(method.delivery_tag)
        ch.queue_declare("gc", durable=True)
        conn.close()
        assert list(qdir.glob("*.seg")) == []
        ch = None
        server = restart(server)
        assert drain(server, "gc") == []
        conn = connect(server)
        conn.channel().queue_delete("gc")
        conn.close()
        assert not qdir.exists()
    finally:
        server.kill()


def test_crash_rounds_confirmed_messages_are_never_lost(data_dir: Path) -> None:
    """Two publishers, each with 100 confirms outstanding, and a consumer acking most of
    what it gets (requeueing or holding the rest), run until the server is SIGKILLed at
    a random moment (so the kill lands on group commits with many messages pending);
    then it is restarted on the same data dir. Every confirmed message not acked is
    there; every message there is byte for byte one that was sent (its length and hash
    are in its body: unconfirmed ones are whole or absent); none is there twice. Four
    rounds, every server's log free of tracebacks."""
    rng = random.Random(3)
    sent: set[bytes] = set()
    confirmed: set[bytes] = set()
    acked: set[bytes] = set()
    servers = [RoostProcess(data_dir).start()]
    try:
        for round_ in range(4):
            before = len(confirmed)
            kill_after = rng.uniform(0.0, 1.0)
            asyncio.run(
                asyncio.wait_for(
                    _crash_round(servers[-1], round_, kill_after, rng, sent, confirmed, acked),
                    60,
                )
            )
            assert len(confirmed) - before >= 100
            servers.append(RoostProcess(data_dir).start())
            got = [body for _, _, body in drain(servers[-1], "crash")]
            assert len(set(got)) == len(got), "a message came back twice"
            for body in got:
                assert _intact(body), body[:60]
            assert set(got) <= sent, "a message that was never sent (or was changed)"
            missing = confirmed - acked - set(got)
            assert not missing, sorted(missing)[:3]
    finally:
        servers[-1].kill()
    for server in servers:
        assert "Traceback" not in server.log, server.log


def _body(round_: int, publisher: int, i: int, rng: random.Random) -> bytes:
    payload = rng.randbytes(rng.randrange(0, 3000))
    digest = hashlib.sha256(payload).hexdigest()[:16]
    return b"r%d-p%d-%d-%d-%s|" % (round_, publisher, i, len(payload), digest.encode()) + payload


def _intact(body: bytes) -> bool:
    head, sep, payload = body.partition(b"|")
    fields = head.split(b"-")
    return (
        bool(sep)
        and len(fields) == 5
        and int(fields[3]) == len(payload)
        and fields[4] == hashlib.sha256(payload).hexdigest()[:16].encode()
    )


LOST = (aio_pika.exceptions.AMQPError, aiormq.exceptions.AMQPError, ConnectionError, OSError)


async def _crash_round(
    server: RoostProcess,
    round_: int,
    kill_after: float,
    rng: random.Random,
    sent: set[bytes],
    confirmed: set[bytes],
    acked: set[bytes],
) -> None:
    stop = asyncio.Event()
    going = asyncio.Event()  # set once this round has 100 confirms: then the kill is timed
    target = len(confirmed) + 100

    async def publish(publisher: int) -> None:
        window = asyncio.Semaphore(100)  # confirms outstanding at once
        pending: set[asyncio.Future[object]] = set()

        def settled(body: bytes, fut: asyncio.Future[object]) -> None:
            window.release()
            pending.discard(fut)
            if not fut.cancelled() and fut.exception() is None:
                confirmed.add(body)
                if len(confirmed) >= target:
                    going.set()

        try:
            connection = await aio_pika.connect(server.url)
            channel = await connection.channel(publisher_confirms=True)
            queue = await channel.declare_queue("crash", durable=True)
            i = 0
            while not stop.is_set():
                await window.acquire()
                body = _body(round_, publisher, i, rng)
                i += 1
                sent.add(body)
                message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
                fut = asyncio.ensure_future(
                    channel.default_exchange.publish(message, routing_key=queue.name)
                )
                pending.add(fut)
                fut.add_done_callback(functools.partial(settled, body))
        except LOST:
            pass
        if pending:
            await asyncio.wait(pending, timeout=10)

    async def consume() -> None:
        try:
            connection = await aio_pika.connect(server.url)
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=50)
            queue = await channel.declare_queue("crash", durable=True)
            async with queue.iterator() as messages:
                async for message in messages:
                    roll = rng.random()
                    if roll < 0.7:
                        await message.ack()
                        acked.add(message.body)
                    elif roll < 0.95:
                        await message.reject(requeue=True)
                    # else left unacked: it must survive the kill
        except LOST:
            pass

    tasks = [asyncio.ensure_future(publish(p)) for p in range(2)]
    tasks.append(asyncio.ensure_future(consume()))
    await asyncio.wait_for(going.wait(), 30)
    await asyncio.sleep(kill_after)
    server.kill()
    stop.set()
    await asyncio.wait(tasks, timeout=20)
    for task in tasks:
        task.cancel()


def test_metrics_report_store_bytes_and_fsync_latency(data_dir: Path) -> None:
    import urllib.request

    server = RoostProcess(data_dir).start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("metered", durable=True)
        ch.basic_publish("", "metered", b"x" * 5000, pika.BasicProperties(delivery_mode=2))
        conn.close()
        with urllib.request.urlopen(server.http_url + "/metrics") as resp:
            text = resp.read().decode()
        values = {
            line.split()[0]: float(line.split()[1])
            for line in text.splitlines()
            if line and not line.startswith("#")
        }
        assert values["roost_store_bytes"] >= 5000
        assert values["roost_store_segments"] == 1
        assert values["roost_store_fsync_seconds_count"] >= 1
        assert 'roost_store_fsync_seconds_bucket{le="+Inf"}' in values
    finally:
        server.kill()


@pytest.mark.parametrize("mode", ["interval", "never"])
def test_other_fsync_modes_confirm_and_persist(data_dir: Path, mode: str) -> None:
    server = RoostProcess(data_dir, "--fsync", mode, "--fsync-interval-ms", "20").start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("modes", durable=True)
        for i in range(30):
            ch.basic_publish("", "modes", b"%d" % i, pika.BasicProperties(delivery_mode=2))
        conn.close()
        server = restart(server)  # graceful: everything is written on the way out
        assert len(drain(server, "modes")) == 30
    finally:
        server.kill()
