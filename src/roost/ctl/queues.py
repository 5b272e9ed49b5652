"""``roost ctl queues …``: a replicated quorum queue's members, as ``rabbitmq-queues``
changes them (``add_member``, ``delete_member``, ``grow``, ``shrink``), through the
management API (``/api/queues/quorum/…``)."""

from __future__ import annotations

import argparse
from typing import Any

from roost.ctl.client import ApiClient, seg


def _replicas(args: argparse.Namespace) -> str:
    return f"/api/queues/quorum/{seg(args.vhost)}/{seg(args.queue)}/replicas"


def cmd_add_member(api: ApiClient, args: argparse.Namespace) -> Any:
    result = api.post(_replicas(args) + "/add", {"node": args.node})
    return result, [{"queue": args.queue, "members": result["members"]}], ["queue", "members"]


def cmd_delete_member(api: ApiClient, args: argparse.Namespace) -> Any:
    result = api.request("DELETE", _replicas(args) + "/delete", {"node": args.node})
    return result, [{"queue": args.queue, "members": result["members"]}], ["queue", "members"]


def cmd_grow(api: ApiClient, args: argparse.Namespace) -> Any:
    body = {
        "strategy": args.strategy,
        "vhost_pattern": args.vhost_pattern,
        "queue_pattern": args.queue_pattern,
    }
    result = api.post(f"/api/queues/quorum/replicas/on/{seg(args.node)}/grow", body)
    return result, result, ["vhost", "name", "result", "members"]


def cmd_shrink(api: ApiClient, args: argparse.Namespace) -> Any:
    result = api.request("DELETE", f"/api/queues/quorum/replicas/on/{seg(args.node)}/shrink")
    return result, result, ["vhost", "name", "result", "members"]


def add_queues_arguments(sub: Any) -> None:
    p = sub.add_parser("queues", help="a quorum queue's members (as rabbitmq-queues)")
    qs = p.add_subparsers(dest="queues_command", required=True)
    for name, func, what in (
        ("add-member", cmd_add_member, "add NODE to QUEUE's group (it catches up from the leader)"),
        ("delete-member", cmd_delete_member, "take NODE out of QUEUE's group"),
    ):
        sp = qs.add_parser(name, help=what)
        sp.add_argument("queue")
        sp.add_argument("node")
        sp.set_defaults(ctl_func=func)
    sp = qs.add_parser(
        "grow", help="add NODE to every quorum queue's and replicated stream's group (ends shrink)"
    )
    sp.add_argument("node")
    sp.add_argument("strategy", nargs="?", choices=("all", "even"), default="all")
    sp.add_argument("--vhost-pattern", default=".*", help="regular expression")
    sp.add_argument("--queue-pattern", default=".*", help="regular expression")
    sp.set_defaults(ctl_func=cmd_grow)
    sp = qs.add_parser(
        "shrink",
        help="move NODE's quorum queue and stream members off it (decommission):"
        " other nodes take its place",
    )
    sp.add_argument("node")
    sp.set_defaults(ctl_func=cmd_shrink)
