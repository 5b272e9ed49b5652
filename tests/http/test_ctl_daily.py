"""``roost ctl`` under rabbitmqctl's command names (and their hyphenated spellings),
against a real server: what each one changes is read back through the API, and the
list_* output is rabbitmqctl's (a "Listing …" line, a header, tab-separated rows)."""

from __future__ import annotations

import json
import pstats
from pathlib import Path

import httpx
import pika

from tests.http.conftest import json_of
from tests.http.ctl_runs import ctl
from tests.support import RoostProcess


def rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


def test_users_vhosts_permissions_and_limits(
    mgmt: RoostProcess, http: httpx.Client, name: str
) -> None:
    ctl(mgmt, "add_vhost", name, "--description", "daily")
    ctl(mgmt, "add_user", name, "first")
    assert "already exists" in ctl(mgmt, "add_user", name, "again", ok=False).stderr
    ctl(mgmt, "set_user_tags", name, "management", "policymaker")
    assert json_of(http.get(f"/api/users/{name}"))["tags"] == ["management", "policymaker"]
    ctl(mgmt, "set-permissions", "-p", name, name, "^c", "^w", "^r")  # hyphenated too
    ctl(mgmt, "change_password", name, stdin="second\n")  # from standard input
    with httpx.Client(base_url=mgmt.http_url, auth=(name, "second")) as as_user:
        assert as_user.get("/api/whoami").status_code == 200
    assert json_of(http.get(f"/api/permissions/{name}/{name}")) == {
        "user": name,
        "vhost": name,
        "configure": "^c",
        "write": "^w",
        "read": "^r",
    }
    listed = ctl(mgmt, "list_permissions", "-p", name).stdout
    assert listed.splitlines()[0] == f"Listing permissions for vhost {name} ..."
    assert [name, "^c", "^w", "^r"] in rows(listed)
    assert rows(ctl(mgmt, "list_user_permissions", name).stdout) == [
        ["vhost", "configure", "write", "read"],
        [name, "^c", "^w", "^r"],
    ]
    ctl(mgmt, "set_topic_permissions", "-p", name, name, "amq.topic", "^a", "^b")
    topic = rows(ctl(mgmt, "list_topic_permissions", "-p", name, "-q").stdout)
    assert topic == [["user", "exchange", "write", "read"], [name, "amq.topic", "^a", "^b"]]
    ctl(mgmt, "clear_topic_permissions", "-p", name, name, "amq.topic")
    assert http.get(f"/api/topic-permissions/{name}/{name}").status_code == 404

    ctl(mgmt, "set_vhost_limits", "-p", name, '{"max-connections": 1, "max-queues": 9}')
    assert json_of(http.get(f"/api/vhost-limits/{name}"))[0]["value"] == {
        "max-connections": 1,
        "max-queues": 9,
    }
    params = pika.URLParameters(f"amqp://{name}:second@127.0.0.1:{mgmt.amqp_port}/{name}")
    first = pika.BlockingConnection(params)
    try:
        refused = None
        try:
            pika.BlockingConnection(params).close()
        except pika.exceptions.AMQPConnectionError as exc:
            refused = exc
        assert refused is not None  # the limit set by ctl is enforced
    finally:
        first.close()
    ctl(mgmt, "clear_vhost_limits", "-p", name)
    assert json_of(http.get(f"/api/vhost-limits/{name}")) == []
    ctl(mgmt, "set_user_limits", name, '{"max-channels": 2}')
    assert rows(ctl(mgmt, "list_user_limits", "--user", name).stdout)[1] == [
        name,
        '{"max-channels":2}',
    ]
    bad = ctl(mgmt, "set_user_limits", name, "max-channels=2", ok=False)
    assert "limits must be a JSON object" in bad.stderr
    ctl(mgmt, "clear_user_limits", name, "all")
    assert json_of(http.get(f"/api/user-limits/{name}")) == []
    ctl(mgmt, "clear_permissions", "-p", name, name)
    ctl(mgmt, "clear_password", name)
    with httpx.Client(base_url=mgmt.http_url, auth=(name, "second")) as as_user:
        assert as_user.get("/api/whoami").status_code == 401
    ctl(mgmt, "delete_user", name)
    ctl(mgmt, "delete_vhost", name)
    assert http.get(f"/api/vhosts/{name}").status_code == 404


def test_listings_with_columns_and_queue_commands(
    mgmt: RoostProcess, amqp: pika.BlockingConnection, name: str
) -> None:
    ch = amqp.channel()
    ch.queue_declare(name, durable=True)
    ch.exchange_declare(f"{name}.x", "fanout")
    ch.queue_bind(name, f"{name}.x")
    for _ in range(3):
        ch.basic_publish(f"{name}.x", "", b"m")
    ch.basic_consume(name, lambda *a: None, consumer_tag=f"{name}.c")
    out = ctl(mgmt, "list_queues", "name", "messages", "consumers", "durable").stdout
    assert out.splitlines()[:2] == [
        "Listing queues for vhost / ...",
        "name\tmessages\tconsumers\tdurable",
    ]
    assert [name, "3", "1", "true"] in rows(out)
    quiet = ctl(mgmt, "list-queues", "-q", "--no-table-headers", "name").stdout
    assert name in quiet.splitlines() and "Listing" not in quiet and "name" not in quiet
    binding = rows(ctl(mgmt, "list_bindings", "-q").stdout)
    assert [f"{name}.x", "exchange", name, "queue", name, ""] in binding  # pika: key = queue
    consumers = rows(ctl(mgmt, "list_consumers", "-q", "queue_name", "consumer_tag").stdout)
    assert [name, f"{name}.c"] in consumers
    conns = rows(ctl(mgmt, "list_connections", "-q", "user", "peer_host", "state").stdout)
    assert ["guest", "127.0.0.1", "running"] in conns
    assert "unknown column 'nme'" in ctl(mgmt, "list_queues", "nme", ok=False).stderr
    as_json = json.loads(ctl(mgmt, "--json", "list_queues").stdout)
    assert any(q["name"] == name and q["durable"] for q in as_json)
    ch.basic_cancel(f"{name}.c")

    ctl(mgmt, "purge_queue", name)
    assert ch.queue_declare(name, passive=True).method.message_count == 0
    ch.basic_publish("", name, b"keep")
    assert "404" in ctl(mgmt, "delete_queue", "nope", ok=False).stderr
    refused = ctl(mgmt, "delete_queue", name, "--if-empty", ok=False)
    assert "not empty" in refused.stderr
    ctl(mgmt, "delete_queue", name)
    assert name not in ctl(mgmt, "list_queues", "-q", "name").stdout


def test_close_connection_status_and_definitions(
    mgmt: RoostProcess, http: httpx.Client, name: str, tmp_path: Path
) -> None:
    params = pika.URLParameters(mgmt.url)
    params.client_properties = {"connection_name": name}
    conn = pika.BlockingConnection(params)
    try:
        target = next(
            c["name"]
            for c in json_of(http.get("/api/connections"))
            if c["client_properties"].get("connection_name") == name
        )
        ctl(mgmt, "close_connection", target, "maintenance window")
        closed = None
        try:
            conn.sleep(5)
        except pika.exceptions.ConnectionClosedByBroker as exc:
            closed = exc
        assert closed is not None and closed.reply_code == 320
        assert "maintenance window" in closed.reply_text
    finally:
        if conn.is_open:
            conn.close()
    status = ctl(mgmt, "status").stdout
    assert "Status of node" in status and "Product name: Roost" in status
    assert f"port: {mgmt.amqp_port}, protocol: amqp" in status
    cluster = ctl(mgmt, "cluster_status").stdout
    node = json_of(http.get("/api/overview"))["node"]
    assert "Running Nodes" in cluster and node in cluster
    out = tmp_path / "defs.json"
    ctl(mgmt, "add_vhost", name)
    ctl(mgmt, "export_definitions", str(out))
    exported = json.loads(out.read_text())
    assert name in {v["name"] for v in exported["vhosts"]}
    ctl(mgmt, "delete_vhost", name)
    ctl(mgmt, "import-definitions", str(out))
    assert http.get(f"/api/vhosts/{name}").status_code == 200
    ctl(mgmt, "delete_vhost", name)


def test_policies_and_operator_policies(mgmt: RoostProcess, http: httpx.Client) -> None:
    ctl(mgmt, "set_policy", "daily", "^d\\.", '{"max-length": 5}', "--apply-to", "queues")
    policy = json_of(http.get("/api/policies/%2F/daily"))
    assert policy["definition"] == {"max-length": 5} and policy["apply-to"] == "queues"
    assert ["/", "daily", "^d\\.", "queues", '{"max-length":5}', "0"] in rows(
        ctl(mgmt, "list_policies", "-q").stdout
    )
    ctl(mgmt, "clear_policy", "daily")
    assert http.get("/api/policies/%2F/daily").status_code == 404
    ctl(mgmt, "set_operator_policy", "ocap", "^d\\.", '{"max-length": 2}', "--priority", "3")
    assert json_of(http.get("/api/operator-policies/%2F/ocap"))["priority"] == 3
    assert ["/", "ocap", "^d\\.", "all", '{"max-length":2}', "3"] in rows(
        ctl(mgmt, "list_operator_policies", "-q").stdout
    )
    refused = ctl(mgmt, "set_operator_policy", "bad", ".*", '{"ha-mode": "all"}', ok=False)
    assert "not recognised policy settings" in refused.stderr
    ctl(mgmt, "clear_operator_policy", "ocap")
    assert http.get("/api/operator-policies/%2F/ocap").status_code == 404


def test_parameters_and_global_parameters(mgmt: RoostProcess, http: httpx.Client) -> None:
    value = '{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","dest-queue":"b"}'
    ctl(mgmt, "set_parameter", "shovel", "daily", value)
    assert json_of(http.get("/api/parameters/shovel/%2F/daily"))["value"]["dest-queue"] == "b"
    listed = rows(ctl(mgmt, "list_parameters", "-q").stdout)
    assert ["shovel", "daily", value] in listed
    refused = ctl(mgmt, "set_parameter", "shovel", "bad", '{"src-queue": "a"}', ok=False)
    assert "src-uri" in refused.stderr
    refused = ctl(mgmt, "set_parameter", "nope", "x", "{}", ok=False)
    assert "component nope not found" in refused.stderr
    ctl(mgmt, "clear_parameter", "shovel", "daily")
    assert http.get("/api/parameters/shovel/%2F/daily").status_code == 404
    ctl(mgmt, "set_global_parameter", "daily-note", '{"colour": "blue"}')
    assert ["daily-note", '{"colour":"blue"}'] in rows(
        ctl(mgmt, "list_global_parameters", "-q").stdout
    )
    ctl(mgmt, "clear_global_parameter", "daily-note")
    assert http.get("/api/global-parameters/daily-note").status_code == 404


def test_profile_writes_pstats(mgmt: RoostProcess, tmp_path: Path) -> None:
    out = tmp_path / "broker.pstats"
    done = ctl(mgmt, "profile", "--seconds", "1", "-o", str(out))
    assert f"Wrote {out}" in done.stdout
    stats = pstats.Stats(str(out))
    # the event loop's thread was recorded: the management app's own code shows up
    assert any("roost" in filename for filename, _line, _fn in stats.stats)  # type: ignore[attr-defined]


def test_profile_flame_graph(mgmt: RoostProcess, tmp_path: Path) -> None:
    out = tmp_path / "broker.svg"
    done = ctl(mgmt, "profile", "--seconds", "1", "--flame-graph", "-o", str(out))
    assert "Wrote" in done.stdout
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
