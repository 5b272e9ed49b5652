"""The checks of a definitions document before anything of it is applied: each section's
required and optional keys, their types, policies and runtime parameters (an import is
all or nothing: a malformed file changes nothing)."""

from __future__ import annotations

import logging
from typing import Any

from roost.core.errors import PreconditionFailed
from roost.core.features.settings import validate_policy_definition
from roost.core.parameters import COMPONENTS, OPERATOR_POLICY, check_operator_policy

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
