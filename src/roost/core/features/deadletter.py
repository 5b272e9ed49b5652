"""Dead-letter headers as RabbitMQ writes them (x-death, x-first-death-*, x-last-death-*).

Pure functions over a Message: no queue state, no store, so the same code serves
classic and durable queues once the enqueue/settle hooks call it.
"""

from __future__ import annotations

import time
from typing import Any

from roost.core.message import Message

REASONS = ("rejected", "expired", "maxlen", "delivery_limit")


def _routing_keys(message: Message) -> list[str]:
    """The original routing key plus CC values (BCC never reaches a queue)."""
    keys = [message.routing_key]
    cc = (message.properties.headers or {}).get("CC")
    if isinstance(cc, list):
        keys.extend(str(k.decode() if isinstance(k, bytes) else k) for k in cc)
    return keys


def dead_letter(
    message: Message,
    queue: str,
    reason: str,
    dlx: str,
    dlx_routing_key: str | None,
    now: float | None = None,
) -> Message:
    """The message as it is republished to ``dlx``: x-death updated, expiration removed.

    An entry is keyed by (queue, reason): a repeat moves it to the front and counts up,
    as RabbitMQ does; the newest entry is first.
    """
    if reason not in REASONS:
        raise ValueError(f"unknown dead-letter reason {reason!r}")
    props = message.properties
    headers: dict[str, Any] = dict(props.headers or {})
    deaths: list[dict[str, Any]] = [dict(d) for d in headers.get("x-death") or []]
    found = next(
        (d for d in deaths if d.get("queue") == queue and d.get("reason") == reason), None
    )
    if found is not None:
        deaths.remove(found)
        found["count"] = int(found.get("count", 0)) + 1
        entry = found
    else:
        entry = {
            "count": 1,
            "reason": reason,
            "queue": queue,
            "time": int(time.time() if now is None else now),
            "exchange": message.exchange,
            "routing-keys": _routing_keys(message),
        }
        if reason == "expired" and props.expiration is not None:
            entry["original-expiration"] = props.expiration
    deaths.insert(0, entry)
    headers["x-death"] = deaths
    headers.setdefault("x-first-death-reason", reason)
    headers.setdefault("x-first-death-queue", queue)
    headers.setdefault("x-first-death-exchange", message.exchange)
    headers["x-last-death-reason"] = reason
    headers["x-last-death-queue"] = queue
    headers["x-last-death-exchange"] = message.exchange
    routing_key = dlx_routing_key if dlx_routing_key is not None else message.routing_key
    new_props = props.replace(headers=headers, expiration=None)
    return Message(dlx, routing_key, new_props, message.body)


def is_cycle(message: Message, target_queue: str) -> bool:
    """True when dead-lettering into ``target_queue`` would loop with no rejection.

    RabbitMQ drops such a message: it has already died in that queue and every death
    on the way was automatic (expired/maxlen), so nothing would ever stop the loop.
    """
    deaths = (message.properties.headers or {}).get("x-death") or []
    if not any(d.get("queue") == target_queue for d in deaths):
        return False
    return all(d.get("reason") != "rejected" for d in deaths)
