"""Node's amqplib (callback API) against Roost: the cases of its own suite around "send to
and get from queue" (tests/integration/node/amqplib_callback.test.js, run by Node's test
runner). amqplib can write publishes after its connection.close; closing the socket right
after close-ok, with them unread, reset the connection (EPIPE in the client, a hung
suite): Roost now reads and drops input until the client closes, as RabbitMQ does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support import ROOT, RoostProcess, prerequisite

AMQPLIB = ROOT / ".cache" / "amqplib" / "2.3.1" / "node_modules"  # scripts/_amqplib.sh
SCRIPT = Path(__file__).parent / "node" / "amqplib_callback.test.js"


def test_amqplib_callback_api(roost: RoostProcess) -> None:
    node = shutil.which("node")
    if node is None:
        prerequisite("node is not installed")
    if not (AMQPLIB / "amqplib" / "callback_api.js").exists():
        prerequisite("amqplib was not fetched from npm (scripts/_amqplib.sh)")
    assert node is not None
    run = subprocess.run(
        [node, "--test", "--test-timeout=20000", str(SCRIPT)],
        env={**os.environ, "NODE_PATH": str(AMQPLIB), "ROOST_AMQP_URL": roost.url},
        capture_output=True,
        text=True,
        timeout=90,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "# pass 9" in out and "# fail 0" in out, out
    assert "EPIPE" not in out and "ECONNRESET" not in out, out
