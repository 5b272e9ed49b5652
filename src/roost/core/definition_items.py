"""One object each, in RabbitMQ's definitions format: what an export lists (core/definitions.py)
and what the journal writes (core/journal.py); and which objects a restart recreates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.core.exchanges.base import Exchange

if TYPE_CHECKING:
    from roost.core.auth import Permission, TopicPermission, User
    from roost.core.catalog import Catalog
    from roost.core.exchanges.base import Binding
    from roost.core.policy import Policy
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost


def user_item(catalog: Catalog, u: User) -> dict[str, Any]:
    return {
        "name": u.name,
        "password_hash": u.password_hash,
        "hashing_algorithm": u.hashing_algorithm,
        "tags": list(u.tags),
        "limits": dict(catalog.user_limits.get(u.name, {})),
    }


def vhost_item(v: VHost) -> dict[str, Any]:
    description = getattr(v, "description", "")
    tags = list(getattr(v, "tags", []))
    queue_type = getattr(v, "default_queue_type", "classic")
    return {
        "name": v.name,
        "description": description,
        "tags": tags,
        "default_queue_type": queue_type,
        "metadata": {"description": description, "tags": list(tags)}
        | ({} if queue_type == "classic" else {"default_queue_type": queue_type}),
    }


def permission_item(user: str, vhost: str, p: Permission) -> dict[str, Any]:
    return {
        "user": user,
        "vhost": vhost,
        "configure": p.configure,
        "write": p.write,
        "read": p.read,
    }


def topic_permission_item(user: str, vhost: str, p: TopicPermission) -> dict[str, Any]:
    return {"user": user, "vhost": vhost, "exchange": p.exchange, "write": p.write, "read": p.read}


def limits_item(v: VHost) -> dict[str, Any]:
    return {"value": dict(v.limits), "component": "vhost-limits", "name": "limits", "vhost": v.name}


def policy_item(p: Policy) -> dict[str, Any]:
    return {
        "name": p.name,
        "pattern": p.pattern,
        "apply-to": p.apply_to,
        "definition": dict(p.definition),
        "priority": p.priority,
        "vhost": p.vhost,
    }


def recreated(obj: Queue | Exchange) -> bool:
    """Whether a restart recreates this queue or exchange: a durable exchange (auto-delete
    or not, as RabbitMQ keeps it); a durable queue unless it is exclusive or auto-delete
    (issue 3 asks that these never survive, where RabbitMQ 3.10 keeps a durable
    auto-delete queue)."""
    if isinstance(obj, Exchange):
        return obj.durable
    return obj.durable and not obj.auto_delete and obj.exclusive_owner is None


def item_recreated(item: dict[str, Any], section: str) -> bool:
    """``recreated`` for a queue or exchange as exported (``section`` "queues" or
    "exchanges"; no export holds an exclusive queue)."""
    if section == "exchanges":
        return bool(item.get("durable"))
    return bool(item.get("durable")) and not item.get("auto_delete")


def queue_item(vhost: str, q: Queue) -> dict[str, Any]:
    return {
        "name": q.name,
        "durable": q.durable,
        "auto_delete": q.auto_delete,
        "arguments": dict(q.arguments),
        "vhost": vhost,
    }


def exchange_item(vhost: str, ex: Exchange) -> dict[str, Any]:
    return {
        "name": ex.name,
        "type": ex.kind,
        "durable": ex.durable,
        "auto_delete": ex.auto_delete,
        "internal": ex.internal,
        "arguments": dict(ex.arguments),
        "vhost": vhost,
    }


def binding_item(b: Binding) -> dict[str, Any]:
    dest = b.destination
    return {
        "source": b.source.name,
        "destination": dest.name,
        "destination_type": "exchange" if dest.is_exchange else "queue",
        "routing_key": b.routing_key,
        "arguments": dict(b.arguments),
        "vhost": b.source.vhost,
    }
