"""Static shovels (issue 23 item 2): shovels from the config file's [shovels.NAME]
tables, run from the start as long as the node runs, shown in /api/shovels with type
``static``, restartable and not a parameter."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import httpx
import pika
import pytest

from roost.config_sources import load
from tests.support import RoostProcess, eventually


def test_config_tables_become_static_shovels(tmp_path: Path) -> None:
    conf = tmp_path / "roost.toml"
    conf.write_text(
        '[server]\namqp_port = 5999\n\n[shovels.orders]\nsrc-uri = "amqp://"\n'
        'src-queue = "orders"\ndest-uri = ["amqp://u:p@dc2", "amqp://u:p@dc3"]\n'
        'dest-queue = "orders"\n'
    )
    cfg = load(argparse.Namespace(config=str(conf)), environ={})
    assert cfg.amqp_port == 5999
    assert cfg.static_shovel_values() == {"orders": {
        "src-uri": "amqp://", "src-queue": "orders",
        "dest-uri": ["amqp://u:p@dc2", "amqp://u:p@dc3"], "dest-queue": "orders"}}
    conf.write_text('[shovels.bad]\nsrc-uri = "amqp://"\nsrc-queue = "a"\nack-mode = "x"\n')
    with pytest.raises(ValueError, match="static shovel 'bad'"):
        load(argparse.Namespace(config=str(conf)), environ={})


def test_a_bad_static_shovel_stops_the_start(tmp_path: Path) -> None:
    conf = tmp_path / "roost.toml"
    conf.write_text('[shovels.bad]\nsrc-uri = "amqp://"\nsrc-queue = "a"\n')
    out = subprocess.run(
        [sys.executable, "-m", "roost", "server", "--config", str(conf), "--data-dir", "none",
         "--amqp-port", "0", "--http-port", "0"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode != 0
    assert "static shovel 'bad'" in out.stderr


def test_static_shovel_moves_messages_and_restarts(tmp_path: Path) -> None:
    dest = RoostProcess(tmp_path / "dest").start()
    try:
        conf = tmp_path / "roost.toml"
        conf.write_text(
            f'[shovels.to-dest]\nsrc-uri = "amqp://"\nsrc-queue = "outbox"\n'
            f'dest-uri = "{dest.url}"\ndest-queue = "inbox"\n'
            f'dest-add-forward-headers = true\nreconnect-delay = 1\n'
        )
        src = RoostProcess(tmp_path / "src", "--config", str(conf)).start()
        api = httpx.Client(base_url=src.http_url + "/api", auth=("guest", "guest"))
        try:
            row = eventually(lambda: next((r for r in api.get("/shovels").json()
                                           if r["state"] == "running"), None))
            assert row["name"] == "to-dest" and row["type"] == "static" and row["vhost"] == "/"
            shown = subprocess.run(
                [sys.executable, "-m", "roost", "ctl", "--url", src.http_url, "shovel_status",
                 "-q", "--no-table-headers"],
                capture_output=True, text=True, check=True, timeout=60,
            ).stdout
            assert shown.split("\t")[:4] == ["to-dest", "/", "static", "running"], shown
            with pika.BlockingConnection(pika.URLParameters(src.url)) as conn:
                ch = conn.channel()
                ch.confirm_delivery()
                for i in range(50):
                    ch.basic_publish("", "outbox", f"s{i}".encode(),
                                     pika.BasicProperties(delivery_mode=2))
            got: list[bytes] = []
            headers = []

            def arrived() -> bool:
                with pika.BlockingConnection(pika.URLParameters(dest.url)) as conn:
                    ch = conn.channel()
                    while True:
                        method, props, body = ch.basic_get("inbox", auto_ack=True)
                        if method is None:
                            return len(got) >= 50
                        got.append(body)
                        headers.append(props.headers)

            eventually(arrived, what=lambda: len(got))
            assert got == [f"s{i}".encode() for i in range(50)]
            assert headers[0]["x-shovelled"][0]["shovel-type"] == "static"
            # not a parameter: it cannot be deleted as one, but it can be restarted
            assert api.get("/parameters/shovel").json() == []
            restart = api.delete("/shovels/vhost/%2F/to-dest/restart")
            assert restart.status_code == 204
            eventually(lambda: api.get("/shovels").json()[0]["state"] == "running")
        finally:
            api.close()
            src.kill()
    finally:
        dest.kill()
