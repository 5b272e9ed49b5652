"""``roost ctl`` commands: each one is a few API calls and a table (or ``--json``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from roost.ctl.client import ApiClient, CtlError, seg
from roost.ctl.output import Progress, dump, table, tsv

# list KIND -> (path, per-vhost?, columns)
LISTS: dict[str, tuple[str, bool, list[str]]] = {
    "queues": (
        "queues",
        True,
        [
            "vhost",
            "name",
            "type",
            "durable",
            "messages_ready",
            "messages_unacknowledged",
            "consumers",
        ],
    ),
    "exchanges": (
        "exchanges",
        True,
        ["vhost", "name", "type", "durable", "auto_delete", "internal"],
    ),
    "bindings": (
        "bindings",
        True,
        ["vhost", "source", "destination", "destination_type", "routing_key", "properties_key"],
    ),
    "connections": (
        "connections",
        False,
        ["name", "user", "vhost", "protocol", "channels", "recv_oct", "send_oct"],
    ),
    "channels": (
        "channels",
        False,
        ["name", "user", "vhost", "consumer_count", "messages_unacknowledged", "prefetch_count"],
    ),
    "consumers": (
        "consumers",
        True,
        ["queue.vhost", "queue.name", "consumer_tag", "ack_required", "prefetch_count"],
    ),
    "users": ("users", False, ["name", "tags"]),
    "vhosts": ("vhosts", False, ["name", "description", "messages"]),
    "permissions": ("permissions", False, ["user", "vhost", "configure", "write", "read"]),
    "policies": (
        "policies",
        True,
        ["vhost", "name", "pattern", "apply-to", "priority", "definition"],
    ),
}
# definitions sections in the order an import must apply them
SECTIONS = (
    "vhosts",
    "users",
    "permissions",
    "topic_permissions",
    "parameters",
    "global_parameters",
    "policies",
    "exchanges",
    "queues",
    "bindings",
)


def _value(text: str) -> Any:
    """An argument value: JSON when it parses (numbers, booleans), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _pairs(items: list[str] | None, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CtlError(0, f"{what} must be KEY=VALUE, got '{item}'")
        out[key] = _value(value)
    return out


def _vhost_path(args: argparse.Namespace, kind: str) -> str:
    return f"/api/{kind}/{seg(args.vhost)}"


def cmd_list(api: ApiClient, args: argparse.Namespace) -> Any:
    path, per_vhost, columns = LISTS[args.kind]
    url = f"/api/{path}" + (f"/{seg(args.vhost)}" if per_vhost and not args.all_vhosts else "")
    rows = api.get(url)
    return rows, columns


def cmd_overview(api: ApiClient, args: argparse.Namespace) -> Any:
    o = api.get("/api/overview")
    row = {
        "product": f"{o.get('product_name')} {o.get('product_version')}",
        **{k: v for k, v in o.get("object_totals", {}).items()},
        "messages": o.get("queue_totals", {}).get("messages", 0),
        "publish/s": o.get("message_stats", {}).get("publish_details", {}).get("rate", 0.0),
        "deliver/s": o.get("message_stats", {}).get("deliver_get_details", {}).get("rate", 0.0),
    }
    return o, [row], list(row)


def cmd_declare(api: ApiClient, args: argparse.Namespace) -> None:
    if args.what == "queue":
        body = {
            "durable": not args.transient,
            "auto_delete": args.auto_delete,
            "arguments": _pairs(args.argument, "argument"),
        }
        api.put(f"{_vhost_path(args, 'queues')}/{seg(args.name)}", body)
    elif args.what == "exchange":
        body = {
            "type": args.type,
            "durable": not args.transient,
            "auto_delete": args.auto_delete,
            "internal": args.internal,
            "arguments": _pairs(args.argument, "argument"),
        }
        api.put(f"{_vhost_path(args, 'exchanges')}/{seg(args.name)}", body)
    elif args.what == "super_stream":
        body = {"arguments": _pairs(args.argument, "argument")}
        if args.partitions is not None:
            body["partitions"] = args.partitions
        else:
            body["binding_keys"] = args.binding_keys
        api.put(f"/api/stream/super-streams/{seg(args.vhost)}/{seg(args.name)}", body)
    else:
        kind = "q" if args.destination_type == "queue" else "e"
        api.post(
            f"/api/bindings/{seg(args.vhost)}/e/{seg(args.source)}/{kind}/{seg(args.destination)}",
            {"routing_key": args.routing_key, "arguments": _pairs(args.argument, "argument")},
        )


def cmd_delete(api: ApiClient, args: argparse.Namespace) -> None:
    if args.what == "queue":
        api.delete(f"{_vhost_path(args, 'queues')}/{seg(args.name)}")
    elif args.what == "exchange":
        api.delete(f"{_vhost_path(args, 'exchanges')}/{seg(args.name)}")
    elif args.what == "super_stream":
        api.delete(f"/api/stream/super-streams/{seg(args.vhost)}/{seg(args.name)}")
    else:
        kind = "q" if args.destination_type == "queue" else "e"
        api.delete(
            f"/api/bindings/{seg(args.vhost)}/e/{seg(args.source)}/{kind}/"
            f"{seg(args.destination)}/{seg(args.properties_key)}"
        )


def cmd_purge(api: ApiClient, args: argparse.Namespace) -> None:
    api.delete(f"{_vhost_path(args, 'queues')}/{seg(args.queue)}/contents")


def cmd_publish(api: ApiClient, args: argparse.Namespace) -> Any:
    payload = sys.stdin.read() if args.payload == "-" else args.payload
    body = {
        "routing_key": args.routing_key,
        "payload": payload,
        "payload_encoding": "string",
        "properties": _pairs(args.property, "property"),
    }
    exchange = args.exchange or "amq.default"
    result = api.post(f"{_vhost_path(args, 'exchanges')}/{seg(exchange)}/publish", body)
    return result, [result], ["routed"]


def cmd_get(api: ApiClient, args: argparse.Namespace) -> Any:
    body = {
        "count": args.count,
        "encoding": "auto",
        "ackmode": "ack_requeue_false" if args.ack else "ack_requeue_true",
    }
    rows = api.post(f"{_vhost_path(args, 'queues')}/{seg(args.queue)}/get", body)
    return (
        rows,
        rows,
        ["routing_key", "exchange", "redelivered", "message_count", "payload_bytes", "payload"],
    )


def cmd_user(api: ApiClient, args: argparse.Namespace) -> None:
    if args.action == "add":
        body: dict[str, Any] = {"tags": args.tags or ""}
        if args.new_password_hash:
            body["password_hash"] = args.new_password_hash
        elif args.new_password is not None:
            body["password"] = args.new_password
        api.put(f"/api/users/{seg(args.name)}", body)
    else:
        api.delete(f"/api/users/{seg(args.name)}")


def cmd_vhost(api: ApiClient, args: argparse.Namespace) -> None:
    if args.action == "add":
        api.put(f"/api/vhosts/{seg(args.name)}", {"description": args.description or ""})
    else:
        api.delete(f"/api/vhosts/{seg(args.name)}")


def cmd_permissions(api: ApiClient, args: argparse.Namespace) -> None:
    path = f"/api/permissions/{seg(args.vhost)}/{seg(args.user)}"
    if args.action == "set":
        api.put(path, {"configure": args.configure, "write": args.write, "read": args.read})
    else:
        api.delete(path)


def cmd_policy(api: ApiClient, args: argparse.Namespace) -> None:
    path = f"/api/policies/{seg(args.vhost)}/{seg(args.name)}"
    if args.action == "set":
        try:
            definition = json.loads(args.definition)
        except ValueError:
            raise CtlError(0, "DEFINITION must be a JSON object") from None
        api.put(
            path,
            {
                "pattern": args.pattern,
                "definition": definition,
                "priority": args.priority,
                "apply-to": args.apply_to,
            },
        )
    else:
        api.delete(path)


def cmd_close(api: ApiClient, args: argparse.Namespace) -> None:
    api.delete(f"/api/connections/{seg(args.name)}", headers={"X-Reason": args.reason})


def _node(api: ApiClient) -> str:
    return str(api.get("/api/nodes")[0]["name"])


def cmd_set_memory_watermark(api: ApiClient, args: argparse.Namespace) -> None:
    """rabbitmqctl set_vm_memory_high_watermark, over Roost's own HTTP call."""
    api.put(f"/api/nodes/{seg(_node(api))}/vm-memory-high-watermark", {"limit": args.limit})


def cmd_set_disk_free_limit(api: ApiClient, args: argparse.Namespace) -> None:
    api.put(f"/api/nodes/{seg(_node(api))}/disk-free-limit", {"limit": args.limit})


def chunks(data: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """Split a definitions document into imports of at most ``size`` objects each, in
    dependency order (vhosts and users before permissions, exchanges before bindings)."""
    out: list[dict[str, Any]] = []
    for section in SECTIONS:
        items = data.get(section) or []
        for start in range(0, len(items), size):
            out.append({section: items[start : start + size]})
    return out


def cmd_definitions(api: ApiClient, args: argparse.Namespace) -> None:
    path = "/api/definitions" + (f"/{seg(args.vhost)}" if args.only_vhost else "")
    if args.action == "export":
        data = api.get(path)
        text = json.dumps(data, indent=2) + "\n"
        if args.file == "-":
            sys.stdout.write(text)
        else:
            Path(args.file).write_text(text, encoding="utf-8")
            print(
                f"exported {sum(len(data.get(s) or []) for s in SECTIONS)} objects to {args.file}",
                file=sys.stderr,
            )
        return
    raw = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise CtlError(0, f"{args.file} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CtlError(0, f"{args.file} is not a definitions document")
    parts = chunks(data, args.chunk)
    progress = Progress(sum(len(next(iter(p.values()))) for p in parts))
    for part in parts:
        api.post(path, part)
        progress.advance(len(next(iter(part.values()))))
    progress.finish()
    print(f"imported {progress.done} objects from {args.file}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    api = ApiClient(args.url, args.api_user, args.api_password)
    try:
        result = args.ctl_func(api, args)
    except CtlError as exc:
        print(f"roost ctl: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"roost ctl: {exc}", file=sys.stderr)
        return 1
    if result is None:
        return 0
    if args.ctl_func is cmd_list:
        rows, columns = result
        raw = rows
    else:
        raw, rows, columns = result
    if args.json:
        dump(raw)
    elif getattr(args, "tsv", False):  # rabbitmqctl's list_* output
        tsv(rows, columns, headers=not getattr(args, "no_table_headers", False))
    else:
        table(rows, columns)
    return 0


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)
