"""Dead-lettering as RabbitMQ does it: the x-death header, x-first-death-* and
x-last-death-* headers, cycle detection, and the republish to the dead-letter exchange.

The header functions are pure; ``publish_dead_letter`` routes through a vhost the way a
publish does, without a publisher (no confirms, no flow control: RabbitMQ's at-most-once
dead-lettering).
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import TYPE_CHECKING, Any

from roost.core.message import Message

if TYPE_CHECKING:
    from roost.core.vhost import VHost

log = logging.getLogger("roost.deadletter")

REASONS = ("rejected", "expired", "maxlen", "delivery_limit")


def _routing_keys(message: Message) -> list[str]:
    """The original routing key plus CC values (BCC never reaches a queue)."""
    keys = [message.routing_key]
    cc = (message.properties.headers or {}).get("CC")
    if isinstance(cc, list):
        keys.extend(str(k.decode() if isinstance(k, bytes) else k) for k in cc)
    return keys


def _timestamp(now: float | None) -> datetime.datetime:
    """Whole seconds, UTC: the AMQP timestamp type ('T') RabbitMQ writes."""
    seconds = int(time.time() if now is None else now)
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


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
    as RabbitMQ does; the newest entry is first. ``original-expiration`` keeps the
    message's own expiration whatever the reason (RabbitMQ 3.10 and later do). With a
    dead-letter routing key the CC and BCC headers go, as their keys no longer apply.
    """
    if reason not in REASONS:
        raise ValueError(f"unknown dead-letter reason {reason!r}")
    props = message.properties
    headers: dict[str, Any] = dict(props.headers or {})
    headers.pop("x-delivery-count", None)  # the queue's delivery annotation, not the message's
    deaths: list[dict[str, Any]] = [dict(d) for d in headers.get("x-death") or []]
    found = next(
        (d for d in deaths if d.get("queue") == queue and d.get("reason") == reason), None
    )
    if found is not None:
        deaths.remove(found)
        found["count"] = int(found.get("count", 0)) + 1
        entry = dict(sorted(found.items()))  # RabbitMQ rewrites an updated entry sorted
    else:
        entry = {
            "count": 1,
            "reason": reason,
            "queue": queue,
            "time": _timestamp(now),
            "exchange": message.exchange,
            "routing-keys": _routing_keys(message),
        }
        if props.expiration is not None:
            entry["original-expiration"] = props.expiration
    deaths.insert(0, entry)
    headers["x-death"] = deaths
    headers.setdefault("x-first-death-exchange", message.exchange)
    headers.setdefault("x-first-death-queue", queue)
    headers.setdefault("x-first-death-reason", reason)
    headers["x-last-death-exchange"] = message.exchange
    headers["x-last-death-queue"] = queue
    headers["x-last-death-reason"] = reason
    routing_key = message.routing_key
    if dlx_routing_key is not None:
        routing_key = dlx_routing_key
        headers.pop("CC", None)
        headers.pop("BCC", None)
    new_props = props.replace(headers=headers, expiration=None)
    return Message(dlx, routing_key, new_props, message.body)


def is_cycle(message: Message, target_queue: str) -> bool:
    """True when a dead-lettered message would loop back into ``target_queue`` with no
    rejection on the way (RabbitMQ drops it rather than loop for ever).

    ``message`` already carries its newest death. Walking x-death from the newest, the
    loop is the deaths up to the first one in ``target_queue``; it is automatic when none
    of them is ``rejected``.
    """
    deaths = (message.properties.headers or {}).get("x-death") or []
    for i, death in enumerate(deaths):
        if isinstance(death, dict) and death.get("queue") == target_queue:
            return all(
                not isinstance(d, dict) or d.get("reason") != "rejected" for d in deaths[: i + 1]
            )
    return False


def publish_dead_letter(vhost: VHost, message: Message, reason: str) -> int:
    """Route a dead-lettered message from its exchange (``message.exchange``).

    A missing exchange drops the message, as in RabbitMQ; so does a queue the message
    would cycle into (never for ``rejected``, where a consumer breaks the loop). Returns
    how many queues took it."""
    ex = vhost.exchanges.get(message.exchange)
    if ex is None:
        log.debug("dead-letter exchange '%s' missing: message dropped", message.exchange)
        return 0
    ex.stat_in += 1
    taken = 0
    for queue in vhost.route(ex, message):
        if reason != "rejected" and is_cycle(message, queue.name):
            log.debug("dead-letter cycle into '%s' (%s): message dropped", queue.name, reason)
            continue
        if queue.push(message):
            taken += 1
    if taken:
        ex.stat_out += 1
    return taken
