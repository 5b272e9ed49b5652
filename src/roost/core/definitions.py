"""Definitions export and import in RabbitMQ's JSON format (``rabbitmqctl export_definitions``).

Import is additive, as RabbitMQ's is: objects that exist are updated or checked for
equivalence, nothing is deleted. The whole document is validated before anything is
applied, so a malformed file changes nothing; a conflict found while applying (an
inequivalent queue) stops the import there with a reason.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from roost import __version__
from roost.core.auth import BCRYPT, User
from roost.core.client import Client
from roost.core.errors import PreconditionFailed
from roost.core.exchanges.base import Exchange
from roost.core.features.settings import validate_policy_definition
from roost.core.info import ImportReport
from roost.core.parameters import (
    COMPONENTS,
    OPERATOR_POLICY,
    VHOST_LIMITS,
    check_operator_policy,
)

if TYPE_CHECKING:
    from roost.core.auth import Permission, TopicPermission
    from roost.core.catalog import Catalog
    from roost.core.exchanges.base import Binding
    from roost.core.policy import Policy
    from roost.core.ports.adapter import AdapterPort
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.definitions")

# section -> (required keys, optional keys with their defaults)
SCHEMA: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "vhosts": (("name",), {"description": None, "tags": None, "default_queue_type": None}),
    "users": (
        ("name",),
        {
            "password_hash": None,
            "password": None,
            "hashing_algorithm": None,
            "tags": [],
            "limits": {},
            "password_bcrypt_base64": None,  # dispatchd's users
        },
    ),
    "permissions": (("user", "vhost", "configure", "write", "read"), {}),
    "topic_permissions": (("user", "vhost", "exchange", "write", "read"), {}),
    # vhost limits, operator policies, shovels and federation upstreams (core/parameters.py)
    "parameters": (("vhost", "component", "name", "value"), {}),
    "global_parameters": (("name", "value"), {}),
    "policies": (
        ("vhost", "name", "pattern", "definition"),
        {"priority": 0, "apply-to": "all"},
    ),
    "queues": (("name", "vhost"), {"durable": True, "auto_delete": False, "arguments": {}}),
    "exchanges": (
        ("name", "vhost", "type"),
        {"durable": True, "auto_delete": False, "internal": False, "arguments": {}},
    ),
    "bindings": (
        ("source", "vhost", "destination", "destination_type"),
        {"routing_key": "", "arguments": {}},
    ),
}
GLOBAL_SECTIONS = ("vhosts", "users", "permissions", "topic_permissions", "global_parameters")
# the sections in import order (what each may refer to comes first)
ORDER = (*GLOBAL_SECTIONS, "parameters", "policies", "exchanges", "queues", "bindings")
BOOLEAN_KEYS = ("durable", "auto_delete", "internal")
MAP_KEYS = ("arguments", "definition", "limits")


def _validate(
    data: Any, vhost: str | None, recovering: bool = False
) -> dict[str, list[dict[str, Any]]]:
    if not isinstance(data, dict):
        raise PreconditionFailed("definitions must be a JSON object")
    sections: dict[str, list[dict[str, Any]]] = {}
    for section in ORDER:
        items = data.get(section)
        if items is None:
            continue
        if section == "users" and isinstance(items, dict):
            # dispatchd's config: {"users": {"name": {"password_bcrypt_base64": "…"}}}
            items = [{"name": k, **v} if isinstance(v, dict) else v for k, v in items.items()]
        if vhost is not None and section in GLOBAL_SECTIONS:
            continue  # a vhost's definitions carry no users, vhosts or permissions
        if not isinstance(items, list):
            raise PreconditionFailed(f"'{section}' must be a list")
        required, optional = SCHEMA[section]
        if vhost is not None and "vhost" in required:
            required = tuple(k for k in required if k != "vhost")
        checked = []
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise PreconditionFailed(f"{section}[{i}] must be an object")
            missing = [k for k in required if k not in item]
            if missing:
                raise PreconditionFailed(f"{section}[{i}] lacks {', '.join(missing)}")
            entry = {**optional, **item}
            if vhost is not None:
                entry["vhost"] = vhost
            for key in ("name", "vhost", "user", "source", "destination", "type"):
                if key in entry and not isinstance(entry[key], str):
                    raise PreconditionFailed(f"{section}[{i}].{key} must be a string")
            for key in BOOLEAN_KEYS:
                if key in entry and not isinstance(entry[key], bool):
                    raise PreconditionFailed(f"{section}[{i}].{key} must be true or false")
            for key in MAP_KEYS:
                if entry.get(key) == []:  # Erlang's empty proplist: rabbitmqctl writes
                    entry[key] = {}  # a vhost's "limits": [] in export_definitions
                if key in entry and not isinstance(entry[key], dict):
                    raise PreconditionFailed(f"{section}[{i}].{key} must be an object")
            if section == "policies" and not _policy_ok(entry, i, recovering):
                continue
            if section == "parameters" and not _parameter_ok(entry, i):
                continue
            if section == "bindings" and entry["destination_type"] not in ("queue", "exchange"):
                raise PreconditionFailed(
                    f"{section}[{i}].destination_type must be queue or exchange"
                )
            checked.append(entry)
        sections[section] = checked
    return sections


def _policy_ok(entry: dict[str, Any], i: int, recovering: bool) -> bool:
    """Check a policy's definition before anything is applied (so a bad one changes
    nothing); at recovery, skip it with a warning instead."""
    try:
        validate_policy_definition(entry["definition"], check_mutators=not recovering)
    except PreconditionFailed as exc:
        if not recovering:
            raise PreconditionFailed(f"policies[{i}]: {exc.text}") from None
        log.warning("definitions: policy '%s' skipped: %s", entry["name"], exc.text)
        return False
    return True


def _parameter_ok(entry: dict[str, Any], i: int) -> bool:
    """A parameter of a component Roost keeps, checked before anything is applied; one of
    another component (a plugin Roost does not have) is skipped with a warning."""
    component, value = entry["component"], entry["value"]
    if component not in COMPONENTS:
        log.warning(
            "definitions: parameter '%s' of component '%s' skipped", entry["name"], component
        )
        return False
    if not isinstance(value, dict) and not (
        component == "federation-upstream-set" and isinstance(value, list)
    ):
        raise PreconditionFailed(f"parameters[{i}].value must be an object")
    if component == OPERATOR_POLICY:
        assert isinstance(value, dict)  # only an upstream set's value is a list
        try:
            check_operator_policy(value)
        except PreconditionFailed as exc:
            raise PreconditionFailed(f"parameters[{i}]: {exc.text}") from None
    return True


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


# One object each, in the export's format (the journal of core/journal.py writes these).


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


def _exclusive(vhost: Any, name: str, kind: str) -> bool:
    if kind != "queue":
        return False
    q = vhost.queues.get(name)
    return q is not None and q.exclusive_owner is not None
