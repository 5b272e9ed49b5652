"""Hand-made events, written to a stream the way the broker writes its events stream
(JSON arrays with headers x-roost-events and x-roost-run), for the traffic job's tests."""

from __future__ import annotations

import json
from typing import Any

from roost.pipeline.amqp import Client, properties

Event = dict[str, Any]


def write_events(url: str, stream: str, batches: list[list[Event]], run: str = "1") -> int:
    """One message per batch; returns how many events were written."""
    with Client(url) as client:
        client.declare_stream(stream)
        client.confirm_select()
        for batch in batches:
            headers = {"x-roost-events": len(batch), "x-roost-run": run}
            props = properties(content_type="application/json", type="roost.events",
                               headers=headers)
            client.publish("", stream, props, json.dumps(batch).encode())
        client.flush_confirmed()
    return sum(len(b) for b in batches)


def published(ts: float, key: str, queues: dict[str, int], size: int = 100,
              exchange: str = "ex") -> Event:
    return {"type": "message.published", "ts": ts, "exchange": exchange, "routing_key": key,
            "queues": queues, "routed": len(queues), "size": size, "persistent": False}


def delivered(ts: float, queue: str, seq: int, *, auto_ack: bool = False,
              redelivered: bool = False) -> Event:
    return {"type": "message.delivered", "ts": ts, "queue": queue, "seq": seq, "size": 100,
            "redelivered": redelivered, "auto_ack": auto_ack, "consumer": "c"}


def acked(ts: float, queue: str, seq: int) -> Event:
    return {"type": "message.acked", "ts": ts, "queue": queue, "seq": seq}
