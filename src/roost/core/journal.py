"""Definition changes as journal records, and replaying them onto a snapshot.

Every change the broker announces (``on_change``: a core.events event) names one object of the
definitions document: its section and its key (a queue: vhost and name). ``Changes``
keeps the last change per key until the next group commit, then turns each into a
record: ``{"s": section, "k": key, "v": item}`` with the object's item in the export's
format, or ``"v": null`` when it is gone. Only what a restart must recreate is written
(``persistable``): a non-durable queue costs nothing, and a durable one's deletion is
written only because its declaration was.

``replay`` applies records in order to a snapshot. Records describe states, not
operations, so replaying a complete history from any point before the snapshot gives
the same result: that is what lets the store keep a backup snapshot plus the journals
since. Deleting a vhost, a user or an exchange also removes what hangs off it (the
broker removes those without announcing each).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core.definition_items import (
    binding_item,
    exchange_item,
    item_recreated,
    limits_item,
    permission_item,
    policy_item,
    queue_item,
    recreated,
    topic_permission_item,
    user_item,
    vhost_item,
)
from roost.core.events import (
    BindingAdded,
    BindingRemoved,
    Event,
    ExchangeDeclared,
    ExchangeDeleted,
    GlobalParameterChanged,
    GlobalParameterDeleted,
    OperatorPolicyChanged,
    OperatorPolicyDeleted,
    ParameterChanged,
    ParameterDeleted,
    PermissionChanged,
    PermissionDeleted,
    PolicyChanged,
    PolicyDeleted,
    QueueDeclared,
    QueueDeleted,
    TopicPermissionChanged,
    TopicPermissionDeleted,
    UserChanged,
    UserDeleted,
    UserLimitsChanged,
    VHostChanged,
    VHostDeleted,
    VHostLimitsChanged,
)
from roost.core.parameters import operator_item

if TYPE_CHECKING:
    from roost.core.catalog import Catalog
    from roost.core.exchanges.base import Exchange
    from roost.core.queues.base import Queue

Key = tuple[str, ...]
Item = dict[str, Any]


def _args(item: Item) -> str:
    return json.dumps(item.get("arguments") or {}, sort_keys=True, default=str)


# section -> the key of one of its items
KEYS: dict[str, Callable[[Item], Key]] = {
    "vhosts": lambda i: (i["name"],),
    "users": lambda i: (i["name"],),
    "permissions": lambda i: (i["user"], i["vhost"]),
    "topic_permissions": lambda i: (i["user"], i["vhost"], i["exchange"]),
    "parameters": lambda i: (i["vhost"], i["component"], i["name"]),
    "global_parameters": lambda i: (i["name"],),
    "policies": lambda i: (i["vhost"], i["name"]),
    "exchanges": lambda i: (i["vhost"], i["name"]),
    "queues": lambda i: (i["vhost"], i["name"]),
    "bindings": lambda i: (
        i["vhost"],
        i["source"],
        i["destination_type"],
        i["destination"],
        i["routing_key"],
        _args(i),
    ),
}


def persistable(section: str, item: Item, durable_ends: Callable[[Item], bool]) -> bool:
    """Whether a restart recreates this item (core.persistence.persistable, one item)."""
    if section in ("queues", "exchanges"):
        return item_recreated(item, section)
    if section == "bindings":
        return durable_ends(item)
    return True


class Changes:
    """The definition changes not yet journaled, and which keys the files hold."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._pending: dict[tuple[str, Key], Item | None] = {}
        self._stored: set[tuple[str, Key]] = set()  # keys with an item on disk

    def note(self, event: Event) -> bool:
        """Remember a change; True when it must be written (it touches what a restart
        recreates, or what the files hold)."""
        found = self._item(event)
        if found is None or _remote(event):
            return False
        section, item, gone = found
        key = (section, KEYS[section](item))
        value = None if gone or not persistable(section, item, self._durable_ends) else item
        if value is None and key not in self._stored and key not in self._pending:
            return False
        self._pending[key] = value
        return True

    def put(self, section: str, item: Item) -> None:
        """Write this item (a queue with its data-directory mark) with the next batch."""
        self._pending[(section, KEYS[section](item))] = item

    def restore(self, records: list[Item]) -> None:
        """Records that could not be written: pending again (unless changed since)."""
        for record in records:
            key = (record["s"], tuple(record["k"]))
            self._pending.setdefault(key, record["v"])
            if record["v"] is None:
                self._stored.add(key)

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def records(self) -> list[Item]:
        """The pending changes as records (the items as they are now), oldest first."""
        out: list[Item] = []
        for (section, key), item in self._pending.items():
            if item is not None:
                item = self._refresh(section, item)
            if item is None:
                if (section, key) not in self._stored:
                    continue
                self._stored.discard((section, key))
            else:
                self._stored.add((section, key))
            out.append({"s": section, "k": list(key), "v": item})
        self._pending.clear()
        return out

    def stored_from(self, data: dict[str, Any]) -> None:
        """The files now hold exactly ``data`` (a snapshot was written or read)."""
        self._stored = {
            (section, KEYS[section](item))
            for section in KEYS
            for item in data.get(section, [])
            if isinstance(item, dict)
        }

    # -- which object a change names --------------------------------------------------

    def describe(self, event: Event) -> tuple[str, Item, bool] | None:
        """(section, item, gone) of the object a change names, in the export's format; None
        for what no definitions document holds (an exclusive queue, amq.* exchanges)."""
        return self._item(event)

    def _item(self, event: Event) -> tuple[str, Item, bool] | None:
        """(section, item, gone) of the object a change names; None: nothing to write."""
        catalog = self.catalog
        match event:
            case QueueDeclared(queue=q) | QueueDeleted(queue=q):
                gone = isinstance(event, QueueDeleted)
                if q.exclusive_owner is not None and not gone:
                    return None  # exclusive: never recreated (and never written)
                return "queues", queue_item(q.vhost.name, q), gone
            case ExchangeDeclared(exchange=ex) | ExchangeDeleted(exchange=ex):
                if not ex.name or ex.name.startswith("amq."):
                    return None
                return "exchanges", exchange_item(ex.vhost, ex), isinstance(event, ExchangeDeleted)
            case BindingAdded(binding=b) | BindingRemoved(binding=b):
                if not b.source.name:
                    return None
                return "bindings", binding_item(b), isinstance(event, BindingRemoved)
            case VHostLimitsChanged(vhost=v):
                return "parameters", limits_item(v), not v.limits
            case VHostChanged(vhost=v) | VHostDeleted(vhost=v):
                return "vhosts", vhost_item(v), isinstance(event, VHostDeleted)
            case UserLimitsChanged(user=name):
                user = catalog.users.get(name)
                return None if user is None else ("users", user_item(catalog, user), False)
            case UserChanged(user=user) | UserDeleted(user=user):
                return "users", user_item(catalog, user), isinstance(event, UserDeleted)
            case PermissionChanged(user, vhost, permission) | PermissionDeleted(
                user, vhost, permission
            ):
                gone = isinstance(event, PermissionDeleted)
                return "permissions", permission_item(user, vhost, permission), gone
            case TopicPermissionChanged(user, vhost, tp) | TopicPermissionDeleted(user, vhost, tp):
                gone = isinstance(event, TopicPermissionDeleted)
                return "topic_permissions", topic_permission_item(user, vhost, tp), gone
            case PolicyChanged(policy=p) | PolicyDeleted(policy=p):
                return "policies", policy_item(p), isinstance(event, PolicyDeleted)
            case OperatorPolicyChanged(policy=p) | OperatorPolicyDeleted(policy=p):
                return "parameters", operator_item(p), isinstance(event, OperatorPolicyDeleted)
            case ParameterChanged(v, c, n, value) | ParameterDeleted(v, c, n, value):
                item = {"value": value, "vhost": v, "component": c, "name": n}
                return "parameters", item, isinstance(event, ParameterDeleted)
            case GlobalParameterChanged(n, value) | GlobalParameterDeleted(n, value):
                gone = isinstance(event, GlobalParameterDeleted)
                return "global_parameters", {"name": n, "value": value}, gone
        return None

    def _refresh(self, section: str, item: Item) -> Item | None:
        """The item as it is at write time (users and vhosts change after their event;
        a queue's end may have been deleted since), or None when no longer persistable."""
        catalog = self.catalog
        if section == "users":
            user = catalog.users.get(item["name"])
            return None if user is None else user_item(catalog, user)
        if section == "vhosts":
            vhost = catalog.vhosts.get(item["name"])
            return None if vhost is None else vhost_item(vhost)
        if section == "bindings" and not self._durable_ends(item):
            return None
        return item

    def _durable_ends(self, item: Item) -> bool:
        vhost = self.catalog.vhosts.get(item["vhost"])
        if vhost is None:
            return False
        source = vhost.exchanges.get(item["source"])
        if source is None or not (source.name.startswith("amq.") or recreated(source)):
            return False
        if item["destination_type"] == "exchange":
            dest: Queue | Exchange | None = vhost.exchanges.get(item["destination"])
        else:
            dest = vhost.queues.get(item["destination"])
        return dest is not None and recreated(dest)


def _remote(event: Event) -> bool:
    """A cluster's stand-in for a queue homed on another node (and its bindings): that
    node journals it, not this one."""
    match event:
        case QueueDeclared(queue=q) | QueueDeleted(queue=q):
            return q.remote
        case BindingAdded(binding=b) | BindingRemoved(binding=b):
            return not b.destination.is_exchange and bool(b.destination.remote)
    return False


def replay(base: dict[str, Any] | None, records: list[Item]) -> dict[str, Any]:
    """``base`` with ``records`` applied in order (a record that does not parse is
    skipped: the store already dropped damaged ones, this guards against foreign ones)."""
    doc = dict(base or {})
    index: dict[str, dict[Key, Item]] = {}
    for section, key_of in KEYS.items():
        items = doc.get(section)
        entries: dict[Key, Item] = {}
        if isinstance(items, list):
            for item in items:
                try:
                    entries[key_of(item)] = item
                except (KeyError, TypeError):
                    continue  # a malformed item: left for the import to refuse
        index[section] = entries
    for record in records:
        where, key, item = record.get("s"), record.get("k"), record.get("v")
        if not isinstance(where, str) or where not in index or not isinstance(key, list):
            continue
        k = tuple(str(part) for part in key)
        if isinstance(item, dict):
            index[where][k] = item
        elif item is None:
            index[where].pop(k, None)
            _cascade(index, where, k)
    for section, entries in index.items():
        if entries or section in doc:
            doc[section] = list(entries.values())
    return doc


def _cascade(index: dict[str, dict[Key, Item]], section: str, key: Key) -> None:
    def drop(where: str, gone: Callable[[Item], bool]) -> None:
        entries = index[where]
        for k in [k for k, item in entries.items() if gone(item)]:
            del entries[k]

    if section == "vhosts":
        for where in KEYS:
            if where not in ("vhosts", "users"):
                drop(where, lambda i: i.get("vhost") == key[0])
    elif section == "users":
        for where in ("permissions", "topic_permissions"):
            drop(where, lambda i: i.get("user") == key[0])
    elif section == "exchanges":
        vhost, name = key
        drop(
            "bindings",
            lambda i: (
                i.get("vhost") == vhost
                and (
                    i.get("source") == name
                    or (i.get("destination_type") == "exchange" and i.get("destination") == name)
                )
            ),
        )
