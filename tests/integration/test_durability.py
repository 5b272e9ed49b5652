"""Durability against a real server: restarts, kill -9, transient vs persistent, damage."""

from __future__ import annotations

import datetime
import random
import re
import shutil
import threading
from pathlib import Path

import pika
import pytest

from tests.integration.conftest import pika_params
from tests.support import RoostProcess

PERSISTENT = 2


def restart(server: RoostProcess, *, kill: bool = False) -> RoostProcess:
    if kill:
        server.kill()
    else:
        assert server.stop() == 0, server.log
    return RoostProcess(server.data_dir, *server.extra).start()


def connect(server: RoostProcess) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika_params(server))


def drain(server: RoostProcess, queue: str) -> list[tuple[pika.spec.Basic.GetOk, object, bytes]]:
    conn = connect(server)
    ch = conn.channel()
    got = []
    while True:
        method, props, body = ch.basic_get(queue, auto_ack=False)
        if method is None:
            break
        got.append((method, props, body))
    conn.close()  # unacked: they stay in the queue
    return got


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_persistent_messages_survive_kill_9_after_confirm(data_dir: Path) -> None:
    server = RoostProcess(data_dir).start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("dq", durable=True)
        headers = {"str": "v", "int": 7, "nested": {"a": [1, "b"]}, "flag": True}
        when = datetime.datetime(2024, 1, 2, 3, 4, 5)
        for i in range(20):
            ch.basic_publish(
                "",
                "dq",
                b"body-%d" % i,
                pika.BasicProperties(
                    delivery_mode=PERSISTENT,
                    headers=headers,
                    content_type="text/plain",
                    message_id=f"m{i}",
                    priority=3,
                    timestamp=int(when.timestamp()),
                ),
            )
        ch.basic_publish("", "dq", b"transient", pika.BasicProperties(delivery_mode=1))
        # the 21 publishes were confirmed (BlockingChannel waits for each ack)
        conn.close()
        server = restart(server, kill=True)
        got = drain(server, "dq")
        assert [body for _, _, body in got] == [b"body-%d" % i for i in range(20)]
        _, props, _ = got[0]
        assert props.headers == headers  # type: ignore[attr-defined]
        assert props.content_type == "text/plain"  # type: ignore[attr-defined]
        assert props.message_id == "m0"  # type: ignore[attr-defined]
        assert props.priority == 3  # type: ignore[attr-defined]
        assert props.delivery_mode == PERSISTENT  # type: ignore[attr-defined]
        assert not got[0][0].redelivered
        assert "recovered 20 messages in 1 queues" in server.log
        # they were delivered (basic.get, not acked) before this restart: redelivered now
        server = restart(server)
        again = drain(server, "dq")
        assert len(again) == 20 and all(m.redelivered for m, _, _ in again)
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
        ch.queue_bind("mixed", "dur.ex", "a.#")
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
        conn.close()
        assert [b for _, _, b in drain(server, "mixed")] == [b"p", b"routed"]
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
    """A publisher with confirms and a consumer with acks run; the server is SIGKILLed at a
    random moment and restarted. Every confirmed message was either acked by the consumer
    before the crash or is there after it; nothing comes back corrupted."""
    rng = random.Random(3)
    confirmed: set[bytes] = set()
    acked: set[bytes] = set()
    server = RoostProcess(data_dir).start()
    try:
        for round_ in range(3):
            setup = connect(server)
            setup.channel().queue_declare("crash", durable=True)
            setup.close()
            consumer = threading.Thread(target=_consume_until_closed, args=(server, acked))
            consumer.start()
            conn = connect(server)
            ch = conn.channel()
            ch.confirm_delivery()
            kill_at = rng.randrange(50, 300)
            for i in range(400):
                if i == kill_at:
                    threading.Timer(rng.random() / 50, server.kill).start()
                body = b"r%d-%d-" % (round_, i) + b"p" * rng.randrange(0, 3000)
                try:
                    ch.basic_publish("", "crash", body, pika.BasicProperties(delivery_mode=2))
                except (pika.exceptions.AMQPError, OSError):
                    break
                confirmed.add(body)
            server.kill()
            consumer.join(10)
            server = RoostProcess(data_dir).start()
            got = {b for _, _, b in drain(server, "crash")}
            assert all(re.fullmatch(rb"r\d+-\d+-p*", b) for b in got)
            assert confirmed - acked <= got, sorted(confirmed - acked - got)[:5]
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log


def _consume_until_closed(server: RoostProcess, acked: set[bytes]) -> None:
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.basic_qos(prefetch_count=20)
        for method, _props, body in ch.consume("crash", inactivity_timeout=0.5):
            if method is None:
                continue
            if random.random() < 0.5:  # leave some unacked: they must survive
                ch.basic_ack(method.delivery_tag)
                acked.add(body)
    except (pika.exceptions.AMQPError, OSError):
        return


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
