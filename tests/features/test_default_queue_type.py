"""A vhost's default queue type applies to declarations that name none (issue 28), as
in RabbitMQ 3.10.8: a durable, shared queue (not exclusive, not auto-delete) declared
without x-queue-type gets the vhost's type written into its arguments, over AMQP, STOMP
and the management API; the others stay classic."""

from __future__ import annotations

import httpx
import pika
import pytest
import stomp
from pika.exceptions import ChannelClosedByBroker

from tests.stomp.conftest import Inbox
from tests.support import RoostProcess


def _vhost(http: httpx.Client, name: str, body: dict[str, object]) -> None:
    assert http.put(f"/api/vhosts/{name}", json=body).status_code in (201, 204)
    perms = {"configure": ".*", "write": ".*", "read": ".*"}
    assert http.put(f"/api/permissions/{name}/guest", json=perms).status_code in (201, 204)


def _http(roost: RoostProcess) -> httpx.Client:
    return httpx.Client(base_url=roost.http_url, auth=("guest", "guest"), timeout=5)


def _types(http: httpx.Client, vhost: str) -> dict[str, tuple[str, dict[str, object]]]:
    return {q["name"]: (q["type"], q["arguments"]) for q in http.get(f"/api/queues/{vhost}").json()}


def test_default_queue_type_applies_over_amqp_stomp_and_http(roost: RoostProcess) -> None:
    vhost = "dqt-quorum"
    # RabbitMQ 3.10's API and UI call the field defaultqueuetype
    with _http(roost) as http:
        _check(roost, http, vhost)


def _check(roost: RoostProcess, http: httpx.Client, vhost: str) -> None:
    _vhost(http, vhost, {"defaultqueuetype": "quorum"})
    info = http.get(f"/api/vhosts/{vhost}").json()
    assert info["default_queue_type"] == info["metadata"]["default_queue_type"] == "quorum"
    params = pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{roost.amqp_port}/{vhost}")
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.queue_declare("amqp.durable", durable=True)
        ch.queue_declare("amqp.durable", durable=True)  # a redeclare without a type matches
        ch.queue_declare("amqp.transient")
        ch.queue_declare("amqp.auto", durable=True, auto_delete=True)
        ch.queue_declare("amqp.classic", durable=True, arguments={"x-queue-type": "classic"})
        ch.queue_declare("amqp.stream", durable=True, arguments={"x-queue-type": "stream"})
        exclusive = ch.queue_declare("", exclusive=True).method.queue
        with pytest.raises(ChannelClosedByBroker) as err:  # now a quorum declaration
            conn.channel().queue_declare("", durable=True)
        assert err.value.reply_text == (
            "PRECONDITION_FAILED - Cannot declare a server-named queue for type "
            "rabbit_quorum_queue"
        )
        assert http.put(f"/api/queues/{vhost}/http.durable", json={"durable": True}).is_success
        stomp_conn = stomp.Connection12([("127.0.0.1", roost.stomp_port)], vhost=vhost)
        inbox = Inbox()
        stomp_conn.set_listener("inbox", inbox)
        stomp_conn.connect("guest", "guest", wait=True)
        stomp_conn.subscribe("/queue/stomp.durable", id="s", receipt="subscribed")
        assert inbox.receipt() == "subscribed"
        quorum = ("quorum", {"x-queue-type": "quorum"})
        assert _types(http, vhost) == {
            "amqp.durable": quorum,
            "http.durable": quorum,
            "stomp.durable": quorum,
            "amqp.transient": ("classic", {}),
            "amqp.auto": ("classic", {}),
            exclusive: ("classic", {}),
            "amqp.classic": ("classic", {"x-queue-type": "classic"}),
            "amqp.stream": ("stream", {"x-queue-type": "stream"}),
        }
        stomp_conn.disconnect()
    assert http.delete(f"/api/vhosts/{vhost}").is_success


def test_default_queue_type_from_definitions_metadata(roost: RoostProcess) -> None:
    """Definitions carry it in the vhost's metadata (RabbitMQ 3.10 imports it from
    there); the export says it in both places."""
    with _http(roost) as http:
        _check_definitions(http)


def _check_definitions(http: httpx.Client) -> None:
    defs = {"vhosts": [{"name": "dqt-defs", "metadata": {"default_queue_type": "stream"}}]}
    assert http.post("/api/definitions", json=defs).is_success
    exported = [v for v in http.get("/api/definitions").json()["vhosts"] if v["name"] == "dqt-defs"]
    assert exported[0]["metadata"]["default_queue_type"] == "stream"
    assert exported[0]["default_queue_type"] == "stream"
    _vhost(http, "dqt-defs", {})
    assert http.put("/api/queues/dqt-defs/log", json={"durable": True}).is_success
    assert _types(http, "dqt-defs")["log"] == ("stream", {"x-queue-type": "stream"})
    assert http.delete("/api/vhosts/dqt-defs").is_success
