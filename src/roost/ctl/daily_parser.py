"""Arguments of the rabbitmqctl-named commands (roost.ctl.daily, roost.ctl.listings)."""

from __future__ import annotations

import argparse
from typing import Any

from roost.ctl import commands as c
from roost.ctl import daily as d
from roost.ctl import listings as ls

Sub = Any  # argparse's _SubParsersAction, private in typeshed


def command(
    sub: Sub, name: str, func: d.Command, help: str, *, vhost: bool = False, tsv: bool = False
) -> argparse.ArgumentParser:
    """``name`` and its hyphenated spelling; ``-p VHOST`` where rabbitmqctl takes one."""
    # (an older roost ctl command of the hyphenated name, close-connection, keeps it)
    hyphenated = name.replace("_", "-")
    aliases = [hyphenated] if "_" in name and hyphenated not in sub.choices else []
    p: argparse.ArgumentParser = sub.add_parser(name, aliases=aliases, help=help)
    if vhost:
        # SUPPRESS: without -p the vhost stays the global -V one (default /)
        p.add_argument(
            "-p", "--vhost", dest="vhost", default=argparse.SUPPRESS, help="virtual host"
        )
    p.set_defaults(ctl_func=func, tsv=tsv)
    return p


def add_daily_arguments(sub: Sub) -> None:
    for kind, listing in ls.LISTINGS.items():
        p = command(
            sub,
            f"list_{kind}",
            ls.listing_command(kind),
            f"list {listing.title} (columns as rabbitmqctl's: {' '.join(listing.defaults)})",
            vhost=listing.per_vhost,
            tsv=True,
        )
        p.add_argument("columns", nargs="*", help="columns to show")
        p.add_argument("-q", "--quiet", action="store_true", help="no 'Listing …' line")
        p.add_argument("--no-table-headers", action="store_true", help="no header line")
    for name, kind in (("shovel_status", "shovels"), ("federation_status", "federation_links")):
        p = command(sub, name, ls.listing_command(kind), f"the {kind.replace('_', ' ')}' status",
                    tsv=True)
        p.add_argument("columns", nargs="*", help="columns to show")
        p.add_argument("-q", "--quiet", action="store_true", help="no 'Listing …' line")
        p.add_argument("--no-table-headers", action="store_true", help="no header line")
    p = command(
        sub, "list_user_permissions", ls.list_user_permissions, "a user's permissions", tsv=True
    )
    p.add_argument("username")
    p = command(
        sub,
        "list_user_topic_permissions",
        ls.list_user_topic_permissions,
        "a user's topic permissions",
        tsv=True,
    )
    p.add_argument("username")
    p = command(
        sub, "list_vhost_limits", ls.list_vhost_limits, "a vhost's limits", vhost=True, tsv=True
    )
    p.add_argument("--global", dest="global_", action="store_true", help="every vhost's")
    p = command(sub, "list_user_limits", ls.list_user_limits, "users' limits", tsv=True)
    p.add_argument("--user", help="just this user's")
    command(sub, "status", ls.status, "the node: versions, alarms, memory, disk, listeners")
    command(sub, "cluster_status", ls.cluster_status, "the nodes of the cluster (/api/nodes)")
    p = command(sub, "await_startup", ls.await_startup, "wait until the node answers")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")

    p = command(sub, "add_user", d.add_user, "add a user (no tags, no permissions)")
    p.add_argument("username")
    p.add_argument("password", nargs="?", help="read from standard input when omitted")
    command(sub, "delete_user", d.delete_user, "delete a user").add_argument("username")
    p = command(sub, "change_password", d.change_password, "set a user's password")
    p.add_argument("username")
    p.add_argument("password", nargs="?", help="read from standard input when omitted")
    p = command(sub, "clear_password", d.clear_password, "remove a user's password")
    p.add_argument("username")
    p = command(sub, "set_user_tags", d.set_user_tags, "replace a user's tags")
    p.add_argument("username")
    p.add_argument("tags", nargs="*", help="administrator, monitoring, policymaker, management")
    p = command(sub, "add_vhost", d.add_vhost, "add a virtual host")
    p.add_argument("name")
    p.add_argument("--description")
    p.add_argument("--default-queue-type", choices=("classic", "quorum", "stream"))
    command(sub, "delete_vhost", d.delete_vhost, "delete a vhost").add_argument("name")

    p = command(sub, "set_permissions", d.set_permissions, "set a user's permissions", vhost=True)
    for arg in ("username", "conf", "write", "read"):
        p.add_argument(arg)
    p = command(sub, "clear_permissions", d.clear_permissions, "clear them", vhost=True)
    p.add_argument("username")
    p = command(
        sub,
        "set_topic_permissions",
        d.set_topic_permissions,
        "set a user's topic permissions on an exchange",
        vhost=True,
    )
    for arg in ("username", "exchange", "write", "read"):
        p.add_argument(arg)
    p = command(
        sub,
        "clear_topic_permissions",
        d.clear_topic_permissions,
        "clear them (on one exchange, or every one)",
        vhost=True,
    )
    p.add_argument("username")
    p.add_argument("exchange", nargs="?")

    p = command(
        sub,
        "set_vhost_limits",
        d.set_vhost_limits,
        'set limits: \'{"max-connections": 64, "max-queues": 256}\'',
        vhost=True,
    )
    p.add_argument("definition")
    command(sub, "clear_vhost_limits", d.clear_vhost_limits, "clear a vhost's limits", vhost=True)
    p = command(
        sub,
        "set_user_limits",
        d.set_user_limits,
        'set limits: \'{"max-connections": 10, "max-channels": 20}\'',
    )
    p.add_argument("username")
    p.add_argument("definition")
    p = command(sub, "clear_user_limits", d.clear_user_limits, "clear one limit, or all")
    p.add_argument("username")
    p.add_argument("limit", help="max-connections, max-channels or all")

    for kind, what in (("policies", "policy"), ("operator-policies", "operator_policy")):
        p = command(sub, f"set_{what}", d._policy(kind), f"create or replace a {what}", vhost=True)
        p.add_argument("name")
        p.add_argument("pattern", help="regular expression over queue/exchange names")
        p.add_argument("definition", help="JSON, e.g. '{\"max-length\": 1000}'")
        p.add_argument("--priority", type=int, default=0)
        p.add_argument(
            "--apply-to",
            default="all",
            help="all, queues, exchanges, classic_queues, quorum_queues or streams",
        )
        p = command(sub, f"clear_{what}", d._clear_policy(kind), f"delete a {what}", vhost=True)
        p.add_argument("name")

    p = command(sub, "set_parameter", d.set_parameter, "set a runtime parameter", vhost=True)
    p.add_argument("component", help="e.g. shovel, federation-upstream, vhost-limits")
    p.add_argument("name")
    p.add_argument("value", help="JSON")
    p = command(sub, "clear_parameter", d.clear_parameter, "clear a parameter", vhost=True)
    p.add_argument("component")
    p.add_argument("name")
    p = command(sub, "set_global_parameter", d.set_global_parameter, "set a global parameter")
    p.add_argument("name")
    p.add_argument("value", help="JSON")
    p = command(sub, "clear_global_parameter", d.clear_global_parameter, "clear one")
    p.add_argument("name")
    p = command(sub, "set_cluster_name", d.set_cluster_name, "rename the cluster")
    p.add_argument("name")

    p = command(sub, "close_connection", d.close_connection, "close a connection, with a reason")
    p.add_argument("name", help="the connection's name (list_connections name)")
    p.add_argument("explanation")
    p = command(
        sub,
        "close_all_connections",
        d.close_all_connections,
        "close the vhost's (or with --global every) connection",
        vhost=True,
    )
    p.add_argument("explanation")
    p.add_argument("--global", dest="global_", action="store_true")
    p = command(sub, "purge_queue", d.purge_queue, "drop a queue's ready messages", vhost=True)
    p.add_argument("queue")
    p = command(sub, "delete_queue", d.delete_queue, "delete a queue", vhost=True)
    p.add_argument("queue")
    p.add_argument("--if-empty", action="store_true")
    p.add_argument("--if-unused", action="store_true")
    command(sub, "trace_on", d.trace(True), "start the firehose (amq.rabbitmq.trace)", vhost=True)
    command(sub, "trace_off", d.trace(False), "stop the firehose", vhost=True)
    p = sub.add_parser("trace", help="the firehose: roost ctl trace on|off [--vhost V]")
    p.add_argument("state", choices=("on", "off"))
    p.add_argument("--vhost", default=argparse.SUPPRESS, help="virtual host (default -V)")
    p.set_defaults(ctl_func=lambda api, args: d.trace(args.state == "on")(api, args))

    p = command(sub, "export_definitions", c.cmd_definitions, "write definitions to a file")
    p.add_argument("file", help="output file, or - for stdout")
    p.set_defaults(action="export", only_vhost=False)
    p = command(sub, "import_definitions", c.cmd_definitions, "apply a definitions file")
    p.add_argument("file", help="input file, or - for stdin")
    p.add_argument("--chunk", type=int, default=500, help="objects per request")
    p.set_defaults(action="import", only_vhost=False)
    for name, func in (
        ("set_vm_memory_high_watermark", c.cmd_set_memory_watermark),
        ("set_disk_free_limit", c.cmd_set_disk_free_limit),
    ):
        command(sub, name, func, f"as rabbitmqctl {name}").add_argument("limit")

    p = sub.add_parser(
        "profile",
        help="record where the broker's time goes (cProfile stats or a py-spy flame graph)",
    )
    p.add_argument("--seconds", type=float, default=10.0, help="how long (default 10)")
    p.add_argument(
        "--format",
        choices=("pstats", "flamegraph", "speedscope"),
        default="pstats",
        help="pstats (python -m pstats FILE), or with py-spy on the server: flamegraph "
        "(SVG) or speedscope",
    )
    p.add_argument("--flame-graph", dest="format", action="store_const", const="flamegraph")
    p.add_argument("-o", "--output", help="file to write (default: the name the server gives)")
    p.set_defaults(ctl_func=d.profile)
