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

from roost.core.field_types import field_type
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
    entry: dict[str, Any] = {
        "count": 1,
        "reason": reason,
        "queue": queue,
        "time": _timestamp(now),
        "exchange": message.exchange,
        "routing-keys": _routing_keys(message),
    }
    if props.expiration is not None:
        entry["original-expiration"] = props.expiration
    if "x-death" not in headers:
        # the first death, and only then, writes x-first-death-* (RabbitMQ 3.10)
        headers["x-death"] = [entry]
        headers["x-first-death-exchange"] = message.exchange
        headers["x-first-death-queue"] = queue
        headers["x-first-death-reason"] = reason
    else:
        headers["x-death"] = _add_death(headers["x-death"], entry)
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


def _add_death(existing: Any, entry: dict[str, Any]) -> list[Any]:
    """x-death once a message already carries one, as RabbitMQ 3.10 updates it.

    An x-death that is not an array is reset to the new entry alone, with a warning
    (clients that republish a message as text do this: rabbitmq-server#767). Within an
    array, an entry for the same queue and reason counts up and moves to the front; the
    front entry's keys are then written sorted (RabbitMQ's sort_field_table). Elements
    that are not tables are kept where they are: a client put them there, and
    ``is_cycle`` reads them as a break in any automatic loop. (RabbitMQ 3.10 loses the
    message on such an array; keeping them loses nothing.)
    """
    if not isinstance(existing, list):
        log.warning(
            "message has an invalid x-death header (type %s: %.200r); resetting it",
            field_type(existing),
            existing,
        )
        return [entry]
    queue, reason = entry["queue"], entry["reason"]
    deaths = list(existing)
    for i, death in enumerate(deaths):
        if not isinstance(death, dict):
            continue
        if death.get("queue") == queue and death.get("reason") == reason:
            del deaths[i]
            count = death.get("count")
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                count = 0
            entry = {**death, "count": count + 1}
            break
    return [dict(sorted(entry.items())), *deaths]


def is_cycle(message: Message, target_queue: str) -> bool:
    """True when a dead-lettered message would loop back into ``target_queue`` with no
    rejection on the way (RabbitMQ drops it rather than loop for ever).

    ``message`` already carries its newest death. Walking x-death from the newest, the
    loop is the deaths up to the first one in ``target_queue``; it is automatic when none
    of them is ``rejected`` and all are tables (anything else there was put by a client,
    so the loop was not automatic: RabbitMQ's reading).
    """
    deaths = (message.properties.headers or {}).get("x-death")
    if not isinstance(deaths, list):
        return False
    for i, death in enumerate(deaths):
        if isinstance(death, dict) and death.get("queue") == target_queue:
            return all(
                isinstance(d, dict) and d.get("reason") != "rejected" for d in deaths[: i + 1]
            )
    return False


def _cycle_queues(message: Message, target_queue: str) -> tuple[str, ...]:
    """The queues of a detected cycle, as RabbitMQ names them: the target, then every
    queue in x-death."""
    deaths = (message.properties.headers or {}).get("x-death") or []
    names = [d.get("queue") for d in deaths if isinstance(d, dict)]
    return (target_queue, *(str(n) for n in names if n is not None))


_reported_cycles: set[tuple[str, tuple[str, ...]]] = set()
_MAX_REPORTED = 1024  # bounded: a cycle over generated queue names must not grow it for ever


def _report_cycle(vhost: str, queues: tuple[str, ...]) -> None:
    """A warning per cycle, once (RabbitMQ: "This cycle will NOT be reported again")."""
    key = (vhost, queues)
    if key in _reported_cycles:
        return
    if len(_reported_cycles) >= _MAX_REPORTED:
        _reported_cycles.clear()
    _reported_cycles.add(key)
    log.warning(
        "Message dropped. Dead-letter queues cycle detected in vhost '%s': %s. "
        "This cycle will NOT be reported again.",
        vhost,
        list(queues),
    )


def publish_dead_letter(vhost: VHost, message: Message, reason: str) -> int:
    """Route a dead-lettered message from its exchange (``message.exchange``).

    A missing exchange drops the message, as in RabbitMQ; so does a queue the message
    would cycle into (never for ``rejected``, where a consumer breaks the loop). An
    x-delayed-message exchange holds it for its ``x-delay`` and a deduplicating one drops
    a duplicate, as they do a publish (and as RabbitMQ's exchange types do, since its
    dead-lettering routes through them). Returns how many queues took it."""
    ex = vhost.exchanges.get(message.exchange)
    if ex is None:
        log.debug("dead-letter exchange '%s' missing: message dropped", message.exchange)
        return 0
    ex.stat_in += 1
    held = vhost.through_gates(ex, message)
    if held is not None:
        return held
    taken = 0
    for queue in vhost.route(ex, message):
        if reason != "rejected" and is_cycle(message, queue.name):
            _report_cycle(vhost.name, _cycle_queues(message, queue.name))
            continue
        if queue.push(message):
            taken += 1
    if taken:
        ex.stat_out += 1
    return taken
