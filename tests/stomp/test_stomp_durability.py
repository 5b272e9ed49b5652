"""A STOMP receipt for a persistent SEND means the message is on disk (issue 4 + 3)."""

from __future__ import annotations

from pathlib import Path

import pika
import stomp

from tests.integration.conftest import pika_params
from tests.stomp.conftest import Inbox
from tests.support import RoostProcess


def test_receipted_persistent_sends_survive_kill_9(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data").start()
    try:
        conn = stomp.Connection12([("127.0.0.1", server.stomp_port)])
        inbox = Inbox()
        conn.set_listener("inbox", inbox)
        conn.connect("guest", "guest", wait=True)
        for i in range(50):
            conn.send("/queue/stomp-durable", f"m{i}", persistent="true", receipt=f"r{i}")
        receipts = {inbox.receipt() for _ in range(50)}
        assert receipts == {f"r{i}" for i in range(50)}
        server.kill()  # no DISCONNECT, no flush: only what was fsync'ed before each receipt
        server = RoostProcess(server.data_dir).start()
        amqp = pika.BlockingConnection(pika_params(server))
        ch = amqp.channel()
        bodies = []
        while (got := ch.basic_get("stomp-durable", auto_ack=True))[0] is not None:
            bodies.append(got[2])
        amqp.close()
        assert bodies == [f"m{i}".encode() for i in range(50)]
    finally:
        server.stop()
