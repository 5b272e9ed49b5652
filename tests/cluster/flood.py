"""A flood of publishes from a subprocess and a consumer that acks too slowly for it: the hop-
flow load of the cluster tests."""

from __future__ import annotations

import contextlib
import threading
import time

from tests.cluster.nodes import channel
from tests.support import RoostProcess

# a producer that never waits (no confirms), held only by flow control; in a process of
# its own, since a held publisher blocks in its socket write until the test ends
FLOOD_SCRIPT = """
import sys, pika
conn = pika.BlockingConnection(pika.URLParameters(sys.argv[1]))
ch = conn.channel()
for i in range(int(sys.argv[3])):
    ch.basic_publish("", sys.argv[2], b"m%d" % i)
conn.close()
"""


def slow_consumer(server: RoostProcess, stop: threading.Event) -> None:
    """Acks one message every 50 ms: its queue drains, too slowly for its producer."""
    with contextlib.suppress(Exception):
        conn, ch = channel(server)
        ch.basic_qos(prefetch_count=1)
        for method, _props, _body in ch.consume("slow", inactivity_timeout=0.05):
            if stop.is_set():
                break
            if method is not None:
                time.sleep(0.05)  # the slowness is the point
                ch.basic_ack(method.delivery_tag)
        conn.close()
