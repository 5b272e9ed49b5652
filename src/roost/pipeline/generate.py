"""Sample data for the example pipelines: JSON orders, a few of them invalid."""

from __future__ import annotations

import json
import random
import time

from roost.pipeline.amqp import Client, properties

KEYS = ("eu", "us", "apac", "latam", "africa")


def generate(
    url: str,
    stream: str,
    count: int,
    *,
    invalid_every: int = 20,
    start_ts: float | None = None,
    spacing: float = 0.01,
    seed: int = 1,
) -> int:
    """Publish ``count`` orders (every ``invalid_every``-th invalid) with confirms."""
    rng = random.Random(seed)
    ts = time.time() if start_ts is None else start_ts
    with Client(url) as client:
        client.declare_stream(stream)
        client.confirm_select()
        for i in range(count):
            if invalid_every and i % invalid_every == invalid_every - 1:
                body = (
                    b"{not json"
                    if (i // invalid_every) % 2
                    else json.dumps({"id": str(i), "amount": -1}).encode()
                )
            else:
                order = {
                    "id": str(i),
                    "key": KEYS[rng.randrange(len(KEYS))],
                    "amount": round(rng.uniform(1, 100), 2),
                    "ts": ts + i * spacing,
                }
                body = json.dumps(order).encode()
            client.publish(
                "",
                stream,
                properties(
                    content_type="application/json",
                    headers={"sent_ms": str(int(time.time() * 1000))},
                ),
                body,
            )
            if i % 5000 == 4999:
                client.flush_confirmed()
        client.flush_confirmed()
    return count
