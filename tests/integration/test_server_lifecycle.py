"""The `roost` command: flags, config file, logging, graceful shutdown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pika
import pytest

from tests.support import RoostProcess, drain, restart


def roost_cmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roost", *args], capture_output=True, text=True, timeout=30
    )


def test_version_and_help() -> None:
    assert roost_cmd("--version").stdout.startswith("roost ")
    helptext = roost_cmd("server", "--help").stdout
    for flag in ("--bind", "--amqp-port", "--data-dir", "--log-level", "--users-file", "--config"):
        assert flag in helptext
    assert "--producers" in roost_cmd("perf", "--help").stdout


def test_bad_setting_is_a_clear_error(tmp_path: Path) -> None:
    out = roost_cmd("server", "--log-level", "loud", "--data-dir", str(tmp_path))
    assert out.returncode == 2
    assert "log_level" in out.stderr


def test_graceful_shutdown_closes_clients_with_320(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path).start()
    conn = pika.BlockingConnection(pika.URLParameters(server.url))
    assert server.stop() == 0
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        conn.process_data_events(time_limit=1)
    assert info.value.reply_code == 320
    assert "closing AMQP 0-9-1 connection" in server.log and "Roost stopped" in server.log


def test_a_second_server_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    """Two servers on one data directory would write the same segment files: the second
    exits with a clear error before touching anything, and the first goes on."""
    first = RoostProcess(tmp_path / "data").start()
    try:
        with pika.BlockingConnection(pika.URLParameters(first.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("kept", durable=True)
            ch.basic_publish("", "kept", b"safe", pika.BasicProperties(delivery_mode=2))
        listeners_off = ("--amqp-port", "0", "--http-port", "0", "--stomp-port", "0")
        out = roost_cmd("server", "--data-dir", str(tmp_path / "data"), *listeners_off,
                        "--ws-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0",
                        "--stream-port", "0")
        assert out.returncode == 2
        assert f"in use by another roost server (pid {first.proc.pid})" in out.stderr
        assert [body for _, _, body in drain(first, "kept")] == [b"safe"]
        first = restart(first)  # stopped cleanly, the lock went with it
        assert [body for _, _, body in drain(first, "kept")] == [b"safe"]
    finally:
        first.kill()


def test_connection_log_lines(fresh_roost: RoostProcess) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    fresh_roost.wait_for_log("user 'guest' authenticated and granted access to vhost '/'")
    conn.close()
    fresh_roost.wait_for_log("(vhost: '/', user: 'guest'): ")
    assert "Message" not in fresh_roost.log  # nothing per message at info


def test_config_file_and_flag_precedence(tmp_path: Path) -> None:
    config = tmp_path / "roost.toml"
    config.write_text('heartbeat = 7\nframe_max = 8192\n')
    server = RoostProcess(tmp_path / "data", "--config", str(config), "--frame-max", "16384")
    server.start()
    try:
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        impl = conn._impl
        assert impl.params.heartbeat == 7  # from the file
        assert impl.params.frame_max == 16384  # the flag wins
        conn.close()
    finally:
        server.kill()


def test_users_file_adds_users_with_hashes(tmp_path: Path) -> None:
    hashed = roost_cmd("users", "hash-password", "s3cret").stdout.strip()
    users = tmp_path / "users.toml"
    users.write_text(
        'vhosts = ["/", "prod"]\n'
        "[[users]]\n"
        'name = "alice"\n'
        f'password_hash = "{hashed}"\n'
        'permissions = { "prod" = { configure = ".*", write = ".*", read = ".*" } }\n'
    )
    server = RoostProcess(tmp_path / "data", "--users-file", str(users)).start()
    try:
        url = f"amqp://alice:s3cret@127.0.0.1:{server.amqp_port}/prod"
        pika.BlockingConnection(pika.URLParameters(url)).close()
        with pytest.raises(pika.exceptions.AMQPConnectionError):  # no rights on "/"
            pika.BlockingConnection(
                pika.URLParameters(f"amqp://alice:s3cret@127.0.0.1:{server.amqp_port}/%2F")
            )
    finally:
        server.kill()


def test_plaintext_password_in_users_file_is_refused(tmp_path: Path) -> None:
    users = tmp_path / "users.toml"
    users.write_text('[[users]]\nname = "bob"\npassword = "plain"\n')
    out = roost_cmd("server", "--users-file", str(users), "--data-dir", str(tmp_path / "d"))
    assert out.returncode == 2
    assert "plaintext" in out.stderr
