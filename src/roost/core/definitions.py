"""Definitions export and import in RabbitMQ's JSON format (``rabbitmqctl export_definitions``).

Import is additive, as RabbitMQ's is: objects that exist are updated or checked for
equivalence, nothing is deleted. The whole document is validated before anything is
applied, so a malformed file changes nothing; a conflict found while applying (an
inequivalent queue) stops the import there with a reason. The document's checks are in
core/definitions_schema.py, its items in core/definition_items.py (``ORDER``,
``queue_item`` and ``item_recreated`` are re-exported here for roost.cluster).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from roost import __version__
from roost.core.auth import BCRYPT, User
from roost.core.client import Client
from roost.core.definition_items import (
    binding_item,
    exchange_item,
    permission_item,
    policy_item,
    topic_permission_item,
    user_item,
    vhost_item,
)
from roost.core.definition_items import item_recreated as item_recreated  # roost.cluster's
from roost.core.definition_items import queue_item as queue_item
from roost.core.definitions_schema import ORDER as ORDER
from roost.core.definitions_schema import _validate
from roost.core.info import ImportReport
from roost.core.parameters import VHOST_LIMITS

if TYPE_CHECKING:
    from roost.core.catalog import Catalog
    from roost.core.ports.adapter import AdapterPort

log = logging.getLogger("roost.definitions")


def import_definitions(
    catalog: Catalog,
    port: AdapterPort,
    data: Any,
    vhost: str | None = None,
    *,
    creator: str | None = None,
    recovering: bool = False,
) -> ImportReport:
    """``recovering``: the broker's own saved definitions at start. A policy that no
    longer validates (a mutator uninstalled since, a value saved by an older version) is
    then kept or skipped with a warning rather than stopping the recovery of every queue
    after it."""
    sections = _validate(data, vhost, recovering)
    if vhost is not None:
        catalog.vhost(vhost)
    counts: dict[str, int] = {}
    for entry in sections.get("vhosts", []):
        metadata = entry.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        catalog.put_vhost(
            entry["name"],
            description=entry["description"],
            tags=entry["tags"],
            # RabbitMQ 3.10 keeps it in the vhost's metadata
            default_queue_type=entry["default_queue_type"] or metadata.get("default_queue_type"),
            creator=creator,
        )
    for entry in sections.get("users", []):
        password_hash, algorithm = entry["password_hash"], entry["hashing_algorithm"]
        if entry["password_bcrypt_base64"] is not None and password_hash is None:
            password_hash, algorithm = entry["password_bcrypt_base64"], BCRYPT
        catalog.put_user(
            entry["name"],
            password=entry["password"],
            password_hash=password_hash,
            hashing_algorithm=algorithm,
            tags=entry["tags"],
        )
        for name, value in entry["limits"].items():
            catalog.put_user_limit(entry["name"], name, value)
    for entry in sections.get("permissions", []):
        catalog.put_permission(
            entry["user"],
            entry["vhost"],
            configure=entry["configure"],
            write=entry["write"],
            read=entry["read"],
        )
    for entry in sections.get("topic_permissions", []):
        catalog.put_topic_permission(
            entry["user"],
            entry["vhost"],
            exchange=entry["exchange"],
            write=entry["write"],
            read=entry["read"],
        )
    for entry in sections.get("global_parameters", []):
        catalog.parameters.put_global_parameter(entry["name"], entry["value"])
    for entry in sections.get("parameters", []):
        if entry["component"] == VHOST_LIMITS:  # added to, as every import is additive
            for name, value in entry["value"].items():
                catalog.put_vhost_limit(entry["vhost"], name, value)
        else:
            catalog.parameters.put_parameter(
                entry["vhost"], entry["component"], entry["name"], entry["value"]
            )
    for entry in sections.get("policies", []):
        catalog.put_policy(
            entry["vhost"],
            entry["name"],
            pattern=entry["pattern"],
            definition=entry["definition"],
            priority=entry["priority"],
            apply_to=entry["apply-to"],
            check_mutators=not recovering,
        )
    clients: dict[str, Client] = {}

    def client(name: str) -> Client:
        if name not in clients:
            clients[name] = Client(
                protocol="definitions",
                peer="import",
                user=User("rmq-internal", ""),
                vhost=catalog.vhost(name),
            )
        return clients[name]

    for entry in sections.get("exchanges", []):
        port.declare_exchange(
            client(entry["vhost"]),
            entry["name"],
            entry["type"],
            durable=entry["durable"],
            auto_delete=entry["auto_delete"],
            internal=entry["internal"],
            arguments=entry["arguments"],
        )
    for entry in sections.get("queues", []):
        port.declare_queue(
            client(entry["vhost"]),
            entry["name"],
            durable=entry["durable"],
            auto_delete=entry["auto_delete"],
            arguments=entry["arguments"],
        )
    for entry in sections.get("bindings", []):
        c = client(entry["vhost"])
        if entry["destination_type"] == "queue":
            port.bind_queue(
                c, entry["destination"], entry["source"], entry["routing_key"], entry["arguments"]
            )
        else:
            port.bind_exchange(
                c, entry["destination"], entry["source"], entry["routing_key"], entry["arguments"]
            )
    for section, items in sections.items():
        counts[section] = len(items)
    return ImportReport(counts)


def export_definitions(catalog: Catalog, vhost: str | None = None) -> dict[str, Any]:
    """Everything a restart needs to recreate, as RabbitMQ writes it; messages excluded."""
    vhosts = [catalog.vhost(vhost)] if vhost is not None else list(catalog.vhosts.values())
    names = {v.name for v in vhosts}
    scoped = vhost is not None

    def where(item: dict[str, Any]) -> dict[str, Any]:
        if scoped:
            item.pop("vhost", None)
        return item

    out: dict[str, Any] = {
        "rabbit_version": __version__,
        "rabbitmq_version": __version__,
        "product_name": "Roost",
        "product_version": __version__,
    }
    if not scoped:
        out["users"] = [user_item(catalog, u) for u in catalog.users.values()]
        out["vhosts"] = [vhost_item(v) for v in vhosts]
        out["permissions"] = [permission_item(u, v, p) for (u, v), p in catalog.permissions.items()]
        out["topic_permissions"] = [
            topic_permission_item(u, v, p) for (u, v, _), p in catalog.topic_permissions.items()
        ]
        out["global_parameters"] = [
            {"name": g.name, "value": g.value} for g in catalog.parameters.list_global_parameters()
        ]
    out["parameters"] = [
        where({"value": p.value, "vhost": p.vhost, "component": p.component, "name": p.name})
        for p in catalog.parameters.list_parameters()
        if p.vhost in names
    ]
    policies = catalog.policies.items()
    out["policies"] = [where(policy_item(p)) for (v, _), p in policies if v in names]
    out["queues"] = [
        where(queue_item(v.name, q))
        for v in vhosts
        for q in v.queues.values()
        if q.exclusive_owner is None
    ]
    out["exchanges"] = [
        where(exchange_item(v.name, ex))
        for v in vhosts
        for ex in v.exchanges.values()
        if ex.name and not ex.name.startswith("amq.")
    ]
    out["bindings"] = [
        where(binding_item(b))
        for v in vhosts
        for ex in v.exchanges.values()
        if ex.name  # the default exchange's bindings are implicit
        for b in ex.bindings.values()
        if b.destination.is_exchange or not _exclusive(v, b.destination.name, "queue")
    ]
    return out


def _exclusive(vhost: Any, name: str, kind: str) -> bool:
    if kind != "queue":
        return False
    q = vhost.queues.get(name)
    return q is not None and q.exclusive_owner is not None
