"""load_definitions (config key and --load-definitions): applied at every start before
any listener opens; a bad file stops the start with a clear error and applies nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pika

from tests.support import RoostProcess

GOOD = {
    "vhosts": [{"name": "boot"}],
    "users": [{"name": "ops", "password": "s3cret", "tags": ["management"]}],
    "permissions": [
        {"user": "ops", "vhost": "boot", "configure": ".*", "write": ".*", "read": ".*"}
    ],
    "policies": [
        {"vhost": "boot", "name": "cap", "pattern": "^jobs$", "definition": {"max-length": 2}}
    ],
    "exchanges": [{"name": "jobs.x", "vhost": "boot", "type": "fanout"}],
    "queues": [{"name": "jobs", "vhost": "boot", "durable": True, "arguments": {}}],
    "bindings": [
        {
            "source": "jobs.x",
            "vhost": "boot",
            "destination": "jobs",
            "destination_type": "queue",
            "routing_key": "",
        }
    ],
}


def start_fails(data_dir: Path, *args: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "roost",
            "server",
            "--data-dir",
            str(data_dir),
            "--amqp-port",
            "0",
            "--http-port",
            "0",
            "--stomp-port",
            "0",
            "--ws-port",
            "0",
            "--prometheus-port",
            "0",
            "--mqtt-port",
            "0",
            "--mqtt-ws-port",
            "0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert "Roost ready" not in done.stderr and "listening" not in done.stderr
    return done.stderr


def export(server: RoostProcess) -> dict[str, Any]:
    r = httpx.get(server.http_url + "/api/definitions", auth=("guest", "guest"))
    r.raise_for_status()
    data: dict[str, Any] = r.json()
    return data


def test_definitions_file_at_boot(tmp_path: Path) -> None:
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps(GOOD))
    server = RoostProcess(tmp_path / "data", "--load-definitions", str(defs)).start()
    try:
        assert "Imported 7 definitions from" in server.log
        # applied before the listeners: the import is logged before the first listener
        assert server.log.index("Imported 7 definitions") < server.log.index("listening on")
        params = pika.URLParameters(f"amqp://ops:s3cret@127.0.0.1:{server.amqp_port}/boot")
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        for n in range(3):
            ch.basic_publish("jobs.x", "", str(n).encode())
        assert ch.queue_declare("jobs", passive=True).method.message_count == 2
        conn.close()
    finally:
        server.stop()
    # every start applies it again (additively): a deleted queue comes back
    server = RoostProcess(tmp_path / "data", "--load-definitions", str(defs)).start()
    try:
        httpx.delete(server.http_url + "/api/queues/boot/jobs", auth=("guest", "guest"))
    finally:
        server.stop()
    server.start()
    try:
        assert {q["name"] for q in export(server)["queues"]} == {"jobs"}
    finally:
        server.stop()


def test_directory_and_config_key(tmp_path: Path) -> None:
    folder = tmp_path / "defs"
    folder.mkdir()
    (folder / "10-vhost.json").write_text(json.dumps({"vhosts": [{"name": "boot"}]}))
    (folder / "20-queue.json").write_text(
        json.dumps({"queues": [{"name": "q", "vhost": "boot", "arguments": {}}]})
    )
    (folder / "notes.txt").write_text("not a definitions file")
    conf = tmp_path / "roost.toml"
    conf.write_text(f'load_definitions = "{folder}"\n')
    server = RoostProcess(tmp_path / "data", "--config", str(conf)).start()
    try:
        assert [q["name"] for q in export(server)["queues"]] == ["q"]
    finally:
        server.stop()


def test_a_bad_file_stops_the_start_and_applies_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = RoostProcess(data).start()  # a broker with state of its own
    server.stop()
    missing = start_fails(data, "--load-definitions", str(tmp_path / "nope.json"))
    assert f"load_definitions: no file or directory '{tmp_path / 'nope.json'}'" in missing
    broken = tmp_path / "broken.json"
    broken.write_text('{"queues": [')
    assert f"load_definitions: {broken} is not JSON" in start_fails(
        data, "--load-definitions", str(broken)
    )
    # valid JSON, but the last binding names a queue that exists nowhere: found only by
    # applying, in the scratch broker, so the vhost, user and queue before it never land
    half = dict(GOOD)
    half["bindings"] = [dict(GOOD["bindings"][0], destination="no-such-queue")]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(half))
    reason = start_fails(data, "--load-definitions", str(bad))
    assert f"load_definitions: {bad}: no queue 'no-such-queue' in vhost 'boot'" in reason
    assert "(nothing was applied)" in reason
    # a queue redeclared with other arguments than it has
    server = RoostProcess(data, "--load-definitions", str(tmp_path / "ok.json"))
    (tmp_path / "ok.json").write_text(json.dumps(GOOD))
    server.start()
    server.stop()
    other = {"queues": [{"name": "jobs", "vhost": "boot", "arguments": {"x-max-length": 5}}]}
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert "inequivalent arg 'x-max-length'" in start_fails(
        data, "--load-definitions", str(tmp_path / "other.json")
    )
    server = RoostProcess(data).start()
    try:
        defs = export(server)
        assert {v["name"] for v in defs["vhosts"]} == {"/", "boot"}
        assert [q["arguments"] for q in defs["queues"]] == [{}]
        assert [b["destination"] for b in defs["bindings"]] == ["jobs"]
    finally:
        server.stop()


def test_the_check_runs_in_a_scratch_broker(tmp_path: Path) -> None:
    """In process: a document that fails half-way leaves the broker as it was (the
    server process also exits before its store saves anything, so only this shows it)."""
    import pytest

    from roost import boot_definitions
    from roost.server_storage import scratch_management

    broker = scratch_management()
    broker.import_definitions({"vhosts": [{"name": "/"}]})
    before = broker.export_definitions()
    half = dict(GOOD, bindings=[dict(GOOD["bindings"][0], destination="no-such-queue")])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(half))
    with pytest.raises(boot_definitions.DefinitionsError, match="nothing was applied"):
        boot_definitions.load(broker, str(bad), scratch=scratch_management)
    assert broker.export_definitions() == before
    (tmp_path / "good.json").write_text(json.dumps(GOOD))
    assert (
        boot_definitions.load(broker, str(tmp_path / "good.json"), scratch=scratch_management) == 7
    )
    assert {q["name"] for q in broker.export_definitions()["queues"]} == {"jobs"}
