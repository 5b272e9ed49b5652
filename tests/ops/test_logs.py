"""Logs: console and file outputs with their own levels and formats, JSON lines,
per-category levels from the config, and SIGHUP reopening the file after real logrotate
has moved it away (contrib/logrotate's way of working)."""

from __future__ import annotations

import io
import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from roost import logs
from tests.support import RoostProcess, prerequisite


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
    for names in logs.CATEGORIES.values():
        for name in names:
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_outputs_levels_formats_and_categories(tmp_path: Path, restore_logging: None) -> None:
    console = io.StringIO()
    file = tmp_path / "sub" / "roost.log"
    logs.configure(
        level_name="info",
        console_level="warning",
        console_format="text",
        file=str(file),
        file_format="json",
        categories={"connection": "debug", "queue": "error"},
        stream=console,
    )
    logging.getLogger("roost.connection").debug(
        "accepting AMQP connection", extra={"peer": "127.0.0.1:5000", "user": "guest"}
    )
    logging.getLogger("roost.stomp").debug("a connection category child at debug")
    logging.getLogger("roost.queue").warning("below the queue category's error level")
    logging.getLogger("roost.server").info("info for the file only")
    logging.getLogger("roost.server").warning("a warning everywhere")
    logging.getLogger("roost.server").debug("debug is under the root level")
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    assert [line["msg"] for line in lines] == [
        "accepting AMQP connection",
        "a connection category child at debug",
        "info for the file only",
        "a warning everywhere",
    ]
    first = lines[0]
    assert first["level"] == "debug" and first["logger"] == "roost.connection"
    assert first["peer"] == "127.0.0.1:5000" and first["user"] == "guest"
    assert first["time"].endswith("+00:00") and isinstance(first["pid"], int)
    assert console.getvalue().count("\n") == 1
    assert "WARNING roost.server: a warning everywhere" in console.getvalue()


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    def start(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "roost", "server", "--data-dir", str(tmp_path), *args],
            capture_output=True,
            text=True,
            timeout=30,
        )

    done = start("--log-categories", "conection=debug")
    assert done.returncode == 2
    assert "unknown log category 'conection' (one of connection, channel" in done.stderr
    done = start("--log-categories", "queue=loud")
    assert done.returncode == 2 and "unknown log level 'loud'" in done.stderr
    done = start("--log-format", "xml")
    assert done.returncode == 2 and "log_format must be text or json" in done.stderr


def test_config_file_table_and_sighup_reopen_with_logrotate(tmp_path: Path) -> None:
    """The TOML table form of the categories, a JSON file output, and logrotate (the
    real one, with contrib/logrotate's rules pointed at this file) moving the file away
    and sending SIGHUP: the next lines go to a new file of the same name."""
    logrotate = shutil.which("logrotate") or "/usr/sbin/logrotate"
    if not Path(logrotate).exists():
        prerequisite("logrotate is not installed")
    log_file = tmp_path / "log" / "roost.log"
    conf = tmp_path / "roost.toml"
    conf.write_text(
        f'log_file = "{log_file}"\nlog_file_format = "json"\n'
        '[log_categories]\nconnection = "debug"\n'
    )
    server = RoostProcess(tmp_path / "data", "--config", str(conf)).start()
    try:
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        conn.close()
        assert "Roost ready" in log_file.read_text()
        assert server.proc is not None
        rules = (Path(__file__).parents[2] / "contrib" / "logrotate").read_text()
        rules = rules.replace("/var/log/roost/*.log", str(log_file.parent / "*.log"))
        rules = rules.replace(
            "systemctl reload roost.service >/dev/null 2>&1 || true",
            f"kill -HUP {server.proc.pid}",
        )
        assert f"kill -HUP {server.proc.pid}" in rules
        (tmp_path / "logrotate.conf").write_text(rules)
        subprocess.run(
            [
                logrotate,
                "--force",
                "--state",
                str(tmp_path / "state"),
                str(tmp_path / "logrotate.conf"),
            ],
            check=True,
            timeout=30,
        )
        rotated = log_file.parent / "roost.log.1"
        assert "Roost ready" in rotated.read_text()
        server.wait_for_log("SIGHUP: reopened 1 log file(s)")
        deadline = time.monotonic() + 10
        while not log_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        conn.close()
        server.stop()
        fresh = [json.loads(line) for line in log_file.read_text().splitlines()]
        assert fresh[0]["msg"] == "SIGHUP: reopened 1 log file(s)"
        assert fresh[-1]["msg"] == "Roost stopped"
        assert "Roost stopped" not in rotated.read_text()
    finally:
        server.kill()
    assert server.proc.returncode == 0 or server.proc.returncode == -signal.SIGKILL


def test_connection_open_and_close_lines(tmp_path: Path) -> None:
    """As RabbitMQ logs them: who (user), where (vhost), from where (peer) and which
    client (its connection_name), on opening and on closing with the reason; as text
    and, in the JSON file, as fields. The connection category's level applies to them."""
    import stomp

    log_file = tmp_path / "roost.log"
    server = RoostProcess(
        tmp_path / "data", "--log-file", str(log_file), "--log-file-format", "json"
    ).start()
    try:
        params = pika.URLParameters(server.url)
        params.client_properties = {"connection_name": "billing-worker"}
        conn = pika.BlockingConnection(params)
        port = conn._impl._transport._sock.getsockname()[1]  # type: ignore[union-attr]
        conn.close()
        s = stomp.Connection12([("127.0.0.1", server.stomp_port)])
        s.connect("guest", "guest", wait=True)
        s.disconnect()
        server.wait_for_log("closing STOMP")
    finally:
        server.stop()
    peer = f"127.0.0.1:{port}"
    assert (
        f"INFO roost.connection: AMQP 0-9-1 connection {peer} (billing-worker): user 'guest' "
        "authenticated and granted access to vhost '/'" in server.log
    )
    assert (
        f"closing AMQP 0-9-1 connection {peer} (billing-worker, vhost: '/', user: 'guest'): "
        in server.log
    )
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    opened = next(j for j in lines if j["logger"] == "roost.connection" and j["peer"] == peer)
    assert (opened["user"], opened["vhost"], opened["client"], opened["protocol"]) == (
        "guest",
        "/",
        "billing-worker",
        "AMQP 0-9-1",
    )
    assert opened["client_product"] == "Pika Python Client Library"
    closed = [j for j in lines if j["msg"].startswith("closing AMQP") and j["peer"] == peer]
    assert closed and closed[0]["reason"]
    assert any(j["msg"].startswith("closing STOMP") for j in lines)
    quiet = RoostProcess(tmp_path / "data", "--log-categories", "connection=warning").start()
    try:
        pika.BlockingConnection(pika.URLParameters(quiet.url)).close()
    finally:
        quiet.stop()
    assert "roost.connection" not in quiet.log
