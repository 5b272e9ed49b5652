"""contrib/: the systemd unit passes ``systemd-analyze verify`` (and its offline security
review), the broker sends sd_notify READY=1 only once its listeners accept connections,
and the container file's command line is one ``roost server`` accepts."""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from roost import config_sources
from roost.cli import build_parser
from tests.support import RoostProcess, prerequisite

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"
INSTALLED = "/usr/local/bin/roost"  # where the unit expects pip's console script


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        prerequisite("systemd-analyze is not installed (Debian's systemd package)")
    assert found is not None
    return found


def unit_here(tmp_path: Path, text: str | None = None) -> Path:
    """The shipped unit, with ExecStart pointing at this checkout's roost (verify checks
    that the program exists); nothing else is changed."""
    text = (CONTRIB / "roost.service").read_text() if text is None else text
    roost = Path(sys.executable).with_name("roost")
    assert roost.exists(), roost
    assert text.count(INSTALLED) == 1
    unit = tmp_path / "roost.service"
    unit.write_text(text.replace(INSTALLED, str(roost)))
    return unit


def test_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    tool = systemd_analyze()
    text = (CONTRIB / "roost.service").read_text()
    assert re.search(r"^Type=notify$", text, re.M)
    done = subprocess.run(
        [tool, "verify", str(unit_here(tmp_path))], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    # the offline security review (the score systemd prints: 0 safest .. 10 unsafe)
    done = subprocess.run(
        [tool, "security", "--offline=yes", str(unit_here(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    score = re.search(r"Overall exposure level for roost.service: ([0-9.]+) (\w+)", done.stdout)
    assert score is not None, done.stdout + done.stderr
    assert float(score.group(1)) <= 2.0 and score.group(2) == "OK", score.group(0)
    # the command line is one roost parses
    start = re.search(r"^ExecStart=(.*)$", text, re.M)
    assert start is not None
    argv = shlex.split(start.group(1))
    assert argv[0] == INSTALLED
    args = build_parser().parse_args(argv[1:])
    assert config_sources.load(args, environ={}).log_file == "/var/log/roost/roost.log"


def test_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a misspelt directive is reported."""
    tool = systemd_analyze()
    text = (CONTRIB / "roost.service").read_text().replace("Type=notify", "Type=notfy")
    done = subprocess.run(
        [tool, "verify", str(unit_here(tmp_path, text))], capture_output=True, text=True
    )
    assert "Failed to parse service type, ignoring: notfy" in done.stderr


def test_ready_is_notified_once_listeners_are_open(tmp_path: Path) -> None:
    sock_path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(sock_path))
        sock.settimeout(20)
        server = RoostProcess(tmp_path / "data", env={"NOTIFY_SOCKET": str(sock_path)})
        server.start()
        try:
            message = sock.recv(4096).decode()
            lines = message.split("\n")
            assert lines[0] == "READY=1"
            assert f"MAINPID={server.proc.pid}" in lines  # type: ignore[union-attr]
            # every listener was open when it was sent
            for port in (server.amqp_port, server.http_port, server.stomp_port):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
            server.proc.send_signal(15)  # type: ignore[union-attr]
            assert sock.recv(4096).decode().split("\n")[0] == "STOPPING=1"
        finally:
            server.stop()


def test_ready_comes_after_the_listeners(tmp_path: Path) -> None:
    """Ordering in the log: the notification is sent after the last listener line."""
    sock_path = tmp_path / "n.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(sock_path))
        sock.settimeout(20)
        server = RoostProcess(
            tmp_path / "data",
            "--log-level",
            "debug",
            env={"NOTIFY_SOCKET": str(sock_path)},
        ).start()
        try:
            sock.recv(4096)
            server.wait_for_log("notified systemd: READY=1")
            log = server.log
            assert log.rindex("listening on") < log.index("notified systemd: READY=1")
        finally:
            server.stop()


@pytest.mark.parametrize("name", ["Containerfile"])
def test_container_file_runs_a_valid_command(name: str) -> None:
    text = (CONTRIB / name).read_text()
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M)
    assert cmd is not None
    import json

    argv = json.loads(cmd.group(1))
    assert argv[:2] == ["roost", "server"]
    cfg = config_sources.load(build_parser().parse_args(argv[1:]), environ={})
    assert cfg.bind_addresses == ["0.0.0.0", "::"]
    exposed = {int(p) for p in re.findall(r"\d+", re.search(r"^EXPOSE (.*)$", text, re.M).group(1))}  # type: ignore[union-attr]
    assert {cfg.amqp_port, cfg.http_port, cfg.stomp_port, cfg.ws_port} <= exposed
