"""The bench's lean load generator (``bench/_lean_client.py``) is a correct AMQP client:
against a real Roost, every message it says it published is either acked by its
consumer or still in the queue, so its delivery count (frame headers only) is exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pika
import pytest

from tests.support import RoostProcess, eventually

LEAN = Path(__file__).resolve().parents[2] / "bench" / "_lean_client.py"


def depth(server: RoostProcess, queue: str) -> int:
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        return int(conn.channel().queue_declare(queue, passive=True).method.message_count)


@pytest.mark.parametrize("ack", ["multiple", "auto"])
def test_published_is_acked_or_still_queued(roost: RoostProcess, qname: str, ack: str) -> None:
    done = subprocess.run(
        [sys.executable, str(LEAN), "--url", roost.url, "--queue", qname, "--duration", "1",
         "--warmup", "0.2", "--batch", "8", *(["--auto-ack"] if ack == "auto" else [])],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["consumed"] > 0 and report["published"] > 0, report  # however slow the box
    assert report["acked"] <= report["consumed"] <= report["published"], report
    if ack == "multiple":
        # deliveries in flight when the consumer closed go back to the queue unacked
        eventually(lambda: depth(roost, qname) == report["published"] - report["acked"],
                   timeout=30, what=lambda: (depth(roost, qname), report))  # fmt: skip
    else:  # no_ack: whatever the broker sent is gone, counted or still in the socket
        eventually(lambda: depth(roost, qname) <= report["published"] - report["consumed"],
                   timeout=30, what=lambda: (depth(roost, qname), report))  # fmt: skip
