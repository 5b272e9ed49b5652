"""What a node's start removes from the cluster's definitions: what did not survive its
stop, as RabbitMQ drops it (its non-durable and auto-delete queues and the bindings to
them; every queue of a node that keeps nothing on disk; the cluster's transient exchanges
once no node is left running)."""

from __future__ import annotations

import json
from collections.abc import Callable

from roost.cluster.coordinator import KeyValue
from roost.core.definitions import item_recreated

Parse = Callable[[str], tuple[str, list[str]]]  # etcd key -> (section, key parts)


def survivors(
    kvs: list[KeyValue], parse: Parse, node: str, *, alone: bool, volatile: bool
) -> tuple[list[KeyValue], list[KeyValue]]:
    """(kept, dropped) of the definitions' keys when ``node`` starts. ``alone``: no other
    node is running; ``volatile``: ``node`` keeps nothing on disk (--data-dir none)."""
    gone: set[tuple[str, str, str]] = set()  # (section, vhost, name)
    for kv in kvs:
        section, _parts = parse(kv.key)
        if section not in ("queues", "exchanges"):
            continue
        try:
            envelope = json.loads(kv.value)
            item = envelope["item"]
        except (ValueError, KeyError, TypeError):
            continue
        if section == "queues" and envelope.get("node") == node:
            if volatile or not item_recreated(item, "queues"):
                gone.add(("queues", item["vhost"], item["name"]))
        elif section == "exchanges" and alone and not item_recreated(item, "exchanges"):
            gone.add(("exchanges", item["vhost"], item["name"]))
    if not gone:
        return kvs, []
    kept: list[KeyValue] = []
    dropped: list[KeyValue] = []
    for kv in kvs:
        section, parts = parse(kv.key)
        if section in ("queues", "exchanges"):
            stale = (section, parts[0], parts[1]) in gone
        elif section == "bindings" and len(parts) >= 4:
            vhost, source, kind, dest = parts[:4]
            stale = ("exchanges", vhost, source) in gone or (
                ("queues" if kind == "queue" else "exchanges", vhost, dest) in gone
            )
        else:
            stale = False
        (dropped if stale else kept).append(kv)
    return kept, dropped


def departed(kvs: list[KeyValue], parse: Parse, node: str) -> list[KeyValue]:
    """The keys to delete when ``node`` went down: its non-durable (and auto-delete)
    queues and the bindings to them, as RabbitMQ 3.10 deletes a down node's transient
    classic queues; its durable queues stay, down until it returns."""
    return survivors(kvs, parse, node, alone=False, volatile=False)[1]
