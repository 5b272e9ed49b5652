"""``x-queue-type: quorum`` on one node (issue 28): quorum semantics, never a silent
classic queue. Each refusal carries the code and words RabbitMQ 3.10.8 answered with;
the accepted queue shows ``type: quorum``, counts deliveries and keeps every message,
persistent or not, on disk before confirming it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker

from tests.support import RoostProcess, restart, running_server, sync_ops

QUORUM = {"x-queue-type": "quorum"}


def refusal(conn: pika.BlockingConnection, name: str, **kwargs: object) -> tuple[int, str]:
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as err:
        ch.queue_declare(name, **kwargs)  # type: ignore[arg-type]
    return err.value.reply_code, err.value.reply_text


def test_pika_declarations_quorum_queues_refuse(
    conn: pika.BlockingConnection, name: str
) -> None:
    where = f"for queue '{name}' in vhost '/'"
    for kwargs, text in (
        ({}, f"invalid property 'non-durable' {where}"),
        ({"durable": True, "exclusive": True}, f"invalid property 'exclusive-owner' {where}"),
        ({"durable": True, "auto_delete": True}, f"invalid property 'auto-delete' {where}"),
    ):
        assert refusal(conn, name, arguments=QUORUM, **kwargs) == (
            406, f"PRECONDITION_FAILED - {text}"
        )
    for key, value in (("x-max-priority", 5), ("x-queue-mode", "lazy"), ("x-max-age", "1D")):
        assert refusal(conn, name, durable=True, arguments={**QUORUM, key: value}) == (
            406,
            f"PRECONDITION_FAILED - invalid arg '{key}' {where} of queue type "
            "rabbit_quorum_queue",
        )
    assert refusal(conn, "", durable=True, arguments=QUORUM) == (
        406, "PRECONDITION_FAILED - Cannot declare a server-named queue for type "
        "rabbit_quorum_queue",
    )
    assert refusal(conn, name, durable=True, arguments={"x-queue-type": "quorom"}) == (
        406, f"PRECONDITION_FAILED - invalid arg 'x-queue-type' {where}: "
        "\"unsupported queue type 'quorom'\"",
    )
    ch = conn.channel()  # what RabbitMQ allows on a quorum queue
    for mode in ("drop-head", "reject-publish", "reject-publish-dlx"):
        args = {**QUORUM, "x-overflow": mode, "x-max-length": 10, "x-delivery-limit": 3,
                "x-message-ttl": 60000, "x-single-active-consumer": True}
        ch.queue_declare(f"{name}.{mode}", durable=True, arguments=args)
        ch.queue_delete(f"{name}.{mode}")


def test_pika_quorum_queue_counts_deliveries_and_shows_its_type(
    ch: BlockingChannel, http: httpx.Client, name: str
) -> None:
    """x-delivery-count on every delivery (0 the first time), past x-delivery-limit the
    message is dropped (dead-lettered with a DLX); management says type quorum."""
    limited = name + ".limited"
    ch.queue_declare(name, durable=True, arguments=QUORUM)
    ch.queue_declare(limited, durable=True, arguments={**QUORUM, "x-delivery-limit": 1})
    info = http.get(f"/api/queues/%2F/{name}").json()
    assert (info["type"], info["durable"]) == ("quorum", True)
    for queue in (name, limited):
        ch.basic_publish("", queue, b"m")
    counts: dict[str, list[tuple[bool, int]]] = {name: [], limited: []}
    for queue in (name, limited):
        for _ in range(3):
            method, props, _body = ch.basic_get(queue)  # published before: no wait
            if method is None:
                break
            counts[queue].append((method.redelivered, props.headers["x-delivery-count"]))
            ch.basic_nack(method.delivery_tag, requeue=True)
    assert counts[name] == [(False, 0), (True, 1), (True, 2)]  # no limit: counted anyway
    assert counts[limited] == [(False, 0), (True, 1)]  # then dropped: past the limit
    ch.queue_delete(name)
    ch.queue_delete(limited)


def test_pika_global_qos_on_a_quorum_queue_is_540(
    conn: pika.BlockingConnection, name: str
) -> None:
    ch = conn.channel()
    ch.queue_declare(name, durable=True, arguments=QUORUM)
    ch.basic_qos(prefetch_count=10, global_qos=True)
    with pytest.raises(ConnectionClosedByBroker) as err:
        ch.basic_consume(name, lambda *a: None)
    assert (err.value.reply_code, err.value.reply_text) == (
        540, f"NOT_IMPLEMENTED - queue '{name}' in vhost '/' does not support global qos"
    )


def test_pika_quorum_queue_keeps_transient_messages_and_confirms_after_fsync(
    tmp_path: Path,
) -> None:
    """A transient message in a quorum queue is written and fsynced before its confirm,
    and survives kill -9 (a classic durable queue keeps only persistent ones)."""
    server = RoostProcess(tmp_path / "data", "--fsync", "interval",
                          "--fsync-interval-ms", "1500").start()
    try:
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            ch.queue_declare("qq", durable=True, arguments=QUORUM)
            ch.queue_declare("classic", durable=True)
            ch.confirm_delivery()
            before = sync_ops(server)
            ch.basic_publish("", "qq", b"transient", pika.BasicProperties(delivery_mode=1))
            assert sync_ops(server) > before, "the confirm came before the fsync"
            ch.basic_publish("", "classic", b"transient", pika.BasicProperties(delivery_mode=1))
        server = restart(server, kill=True)
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            _method, props, body = ch.basic_get("qq", auto_ack=True)
            assert body == b"transient" and props.delivery_mode == 1
            assert ch.basic_get("classic", auto_ack=True)[0] is None
            assert ch.queue_declare("qq", passive=True).method.queue == "qq"
    finally:
        server.kill()


def test_quorum_definitions_import_keeps_the_type(tmp_path: Path) -> None:
    """A definitions file with a quorum queue (RabbitMQ's export) makes a quorum queue."""
    with running_server(tmp_path) as server:
        defs = {"queues": [{"name": "imported", "vhost": "/", "durable": True,
                            "auto_delete": False, "arguments": QUORUM}]}
        r = httpx.post(server.http_url + "/api/definitions", json=defs, auth=("guest", "guest"))
        assert r.status_code in (200, 201, 204), r.text
        info = httpx.get(server.http_url + "/api/queues/%2F/imported",
                         auth=("guest", "guest")).json()
        assert info["type"] == "quorum"
