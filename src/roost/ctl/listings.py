"""``roost ctl list_*``, ``status`` and ``cluster_status``: rabbitmqctl's read-only
commands (see roost.ctl.daily for the rest and the conventions)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from roost.ctl.client import ApiClient, CtlError, seg
from roost.ctl.daily import Command, Result
from roost.ctl.output import lookup

# -- listings -----------------------------------------------------------------------------


class Listing:
    """A ``list_*`` command: where its rows come from, RabbitMQ's default columns, and
    RabbitMQ's column names that differ from the API's field paths."""

    def __init__(
        self,
        title: str,
        path: str,
        defaults: list[str],
        aliases: dict[str, str] | None = None,
        per_vhost: bool = True,
        constants: dict[str, str] | None = None,
    ) -> None:
        self.title, self.path, self.defaults = title, path, defaults
        self.aliases = aliases or {}
        self.per_vhost = per_vhost
        self.constants = constants or {}  # columns whose value never varies here


LISTINGS: dict[str, Listing] = {
    "queues": Listing("queues", "/api/queues/{vhost}", ["name", "messages"]),
    "exchanges": Listing("exchanges", "/api/exchanges/{vhost}", ["name", "type"]),
    "bindings": Listing(
        "bindings",
        "/api/bindings/{vhost}",
        [
            "source_name",
            "source_kind",
            "destination_name",
            "destination_kind",
            "routing_key",
            "arguments",
        ],
        {
            "source_name": "source",
            "destination_name": "destination",
            "destination_kind": "destination_type",
        },
        constants={"source_kind": "exchange"},  # only exchanges are binding sources
    ),
    "connections": Listing(
        "connections",
        "/api/connections",
        ["user", "peer_host", "peer_port", "state"],
        {"pid": "name"},
        per_vhost=False,
    ),
    "channels": Listing(
        "channels",
        "/api/channels",
        ["pid", "user", "consumer_count", "messages_unacknowledged"],
        {"pid": "name", "connection": "connection_details.name"},
        per_vhost=False,
    ),
    "consumers": Listing(
        "consumers",
        "/api/consumers/{vhost}",
        [
            "queue_name",
            "channel_pid",
            "consumer_tag",
            "ack_required",
            "prefetch_count",
            "active",
            "arguments",
        ],
        {"queue_name": "queue.name", "channel_pid": "channel_details.name"},
    ),
    "users": Listing("users", "/api/users", ["user", "tags"], {"user": "name"}, per_vhost=False),
    "vhosts": Listing("vhosts", "/api/vhosts", ["name"], per_vhost=False),
    "permissions": Listing(
        "permissions",
        "/api/vhosts/{vhost}/permissions",
        ["user", "configure", "write", "read"],
    ),
    "topic_permissions": Listing(
        "topic permissions",
        "/api/vhosts/{vhost}/topic-permissions",
        ["user", "exchange", "write", "read"],
    ),
    "policies": Listing(
        "policies",
        "/api/policies/{vhost}",
        ["vhost", "name", "pattern", "apply-to", "definition", "priority"],
    ),
    "operator_policies": Listing(
        "operator policies",
        "/api/operator-policies/{vhost}",
        ["vhost", "name", "pattern", "apply-to", "definition", "priority"],
    ),
    # /api/parameters/X is component X's: a vhost's parameters are filtered from all
    "parameters": Listing("runtime parameters", "/api/parameters", ["component", "name", "value"]),
    "global_parameters": Listing(
        "global runtime parameters", "/api/global-parameters", ["name", "value"], per_vhost=False
    ),
    # rabbitmqctl's shovel_status and federation_status (every vhost's, as theirs)
    "shovels": Listing(
        "shovels", "/api/shovels", ["name", "vhost", "type", "state", "timestamp"],
        per_vhost=False,
    ),
    "federation_links": Listing(
        "federation links", "/api/federation-links",
        ["vhost", "type", "upstream", "id", "status", "timestamp"], per_vhost=False,
    ),
}


def _rows(api: ApiClient, listing: Listing, vhost: str) -> list[dict[str, Any]]:
    rows = api.get(listing.path.format(vhost=seg(vhost)))
    if listing.per_vhost and "{vhost}" not in listing.path:
        rows = [row for row in rows if row.get("vhost") == vhost]
    return [{**listing.constants, **row} for row in rows]


def _columns(listing: Listing, asked: list[str], rows: list[dict[str, Any]]) -> list[str]:
    columns = asked or listing.defaults
    if rows:
        for column in columns:
            path = listing.aliases.get(column, column)
            if lookup(rows[0], path) is None and path.split(".")[0] not in rows[0]:
                known = sorted({*rows[0], *listing.aliases})
                raise CtlError(0, f"unknown column '{column}' (one of {', '.join(known)})")
    return columns


def listing_command(kind: str) -> Command:
    listing = LISTINGS[kind]

    def run(api: ApiClient, args: argparse.Namespace) -> Result:
        rows = _rows(api, listing, args.vhost)
        columns = _columns(listing, args.columns, rows)
        if not args.json and not args.quiet:
            where = f" for vhost {args.vhost}" if listing.per_vhost else ""
            print(f"Listing {listing.title}{where} ...")
        shown = [{c: lookup(row, listing.aliases.get(c, c)) for c in columns} for row in rows]
        return rows, shown, columns

    return run


def list_user_permissions(api: ApiClient, args: argparse.Namespace) -> Result:
    rows = [p for p in api.get("/api/permissions") if p["user"] == args.username]
    return rows, rows, ["vhost", "configure", "write", "read"]


def list_user_topic_permissions(api: ApiClient, args: argparse.Namespace) -> Result:
    rows = [p for p in api.get("/api/topic-permissions") if p["user"] == args.username]
    return rows, rows, ["vhost", "exchange", "write", "read"]


def list_vhost_limits(api: ApiClient, args: argparse.Namespace) -> Result:
    path = "/api/vhost-limits" if args.global_ else f"/api/vhost-limits/{seg(args.vhost)}"
    rows = api.get(path)
    return rows, [{**r, "value": r.get("value", {})} for r in rows], ["vhost", "value"]


def list_user_limits(api: ApiClient, args: argparse.Namespace) -> Result:
    path = "/api/user-limits" + (f"/{seg(args.user)}" if args.user else "")
    rows = api.get(path)
    return rows, rows, ["user", "value"]


# -- the node -----------------------------------------------------------------------------


def status(api: ApiClient, args: argparse.Namespace) -> Result:
    overview = api.get("/api/overview")
    node = api.get(f"/api/nodes/{seg(overview['node'])}")
    if args.json:
        return {"overview": overview, "node": node}, [], []
    alarms = [a for a in ("mem_alarm", "disk_free_alarm") if node.get(a)]
    lines = [
        f"Status of node {overview['node']} ...",
        "",
        "Runtime",
        "",
        f"OS PID: {node.get('os_pid', '')}",
        f"Product name: {overview.get('product_name')}",
        f"Product version: {overview.get('product_version')}",
        f"Uptime (seconds): {int(node.get('uptime', 0)) // 1000}",
        "",
        "Alarms",
        "",
        "\n".join(f"{a} in effect" for a in alarms) or "(none)",
        "",
        "Memory",
        "",
        f"Total memory used: {node.get('mem_used', 0) / 1e6:.1f} MB",
        f"Memory high watermark: {node.get('mem_limit', 0) / 1e6:.1f} MB",
        "",
        "Free Disk Space",
        "",
        f"Low free disk space watermark: {node.get('disk_free_limit', 0) / 1e6:.1f} MB",
        f"Free disk space: {node.get('disk_free', 0) / 1e6:.1f} MB",
        "",
        "File Descriptors",
        "",
        f"Total: {node.get('fd_used', 0)}, limit: {node.get('fd_total', 0)}",
        "",
        "Listeners",
        "",
        *(
            f"Interface: {li['ip_address']}, port: {li['port']}, protocol: {li['protocol']}"
            for li in overview.get("listeners", [])
        ),
        "",
        "Totals",
        "",
        *(f"{k.capitalize()}: {v}" for k, v in overview.get("object_totals", {}).items()),
    ]
    print("\n".join(lines))
    return None


def cluster_status(api: ApiClient, args: argparse.Namespace) -> Result:
    """The nodes as /api/nodes lists them (one today; every member once clustered)."""
    nodes = api.get("/api/nodes")
    if args.json:
        return nodes, nodes, []
    name = api.get("/api/cluster-name").get("name", "")
    running = [n["name"] for n in nodes if n.get("running", True)]
    lines = [
        f"Cluster status of node {api.get('/api/overview')['node']} ...",
        "Basics",
        "",
        f"Cluster name: {name}",
        "",
        "Disk Nodes",
        "",
        *(n["name"] for n in nodes),
        "",
        "Running Nodes",
        "",
        *running,
        "",
        "Alarms",
        "",
        *(
            f"{alarm} on node {n['name']}"
            for n in nodes
            for alarm in ("mem_alarm", "disk_free_alarm")
            if n.get(alarm)
        ),
    ]
    print("\n".join(lines))
    return None


def await_startup(api: ApiClient, args: argparse.Namespace) -> Result:
    deadline = time.monotonic() + args.timeout
    while True:
        try:
            api.get("/api/healthchecks/node")
            return None
        except CtlError as exc:
            if exc.status not in (0, 503) or time.monotonic() > deadline:
                raise
        time.sleep(0.2)
