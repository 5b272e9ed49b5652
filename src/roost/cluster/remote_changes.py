"""The other nodes' definition changes, as this node's watch of etcd hands them over,
applied to its in-memory view (``ClusterDefinitions`` follows the keys; this half turns
a key's new value or deletion into the catalog's and the vhosts' own calls). While it
applies them, this node's own listener writes nothing back (``applying``)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core.definitions import import_definitions
from roost.core.errors import BrokerError, NotFound

if TYPE_CHECKING:
    from roost.core.broker import Broker
    from roost.core.catalog import Catalog
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.definitions")

Item = dict[str, Any]
# a queue homed elsewhere: (vhost, item, home node) -> its stand-in
RemoteFactory = Callable[["VHost", Item, str], "Queue"]


class RemoteChanges:
    """Applying what etcd says (a base of ``ClusterDefinitions``)."""

    node: str
    broker: Broker
    catalog: Catalog
    remote_factory: RemoteFactory | None
    _applying: int

    def _apply(self) -> contextlib.AbstractContextManager[None]:
        return _Applying(self)

    def _apply_put(self, section: str, raw: bytes) -> None:
        try:
            envelope = json.loads(raw)
            item, home = envelope["item"], envelope["node"]
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed definition in etcd (%s)", section)
            return
        with self._apply():
            try:
                if section == "queues" and home != self.node:
                    self._put_remote_queue(item, home)
                elif section == "bindings" and self._bind_exclusive(item):
                    pass
                else:
                    doc = {section: [item]}
                    import_definitions(self.catalog, self.broker, doc, recovering=True)
            except BrokerError as exc:
                log.warning("definition from the cluster not applied (%s): %s", section, exc)

    def _bind_exclusive(self, item: Item) -> bool:
        """A binding to another node's exclusive queue (an import refuses it: 405)."""
        vhost = self.catalog.vhosts.get(item["vhost"])
        dest = None if vhost is None else vhost.queues.get(item["destination"])
        if vhost is None or item["destination_type"] != "queue" or dest is None:
            return False
        if not dest.remote or dest.exclusive_owner is None:
            return False
        vhost.bind(item["source"], dest, item["routing_key"], item.get("arguments") or {})
        return True

    def _put_remote_queue(self, item: Item, home: str) -> None:
        vhost = self.catalog.vhosts.get(item["vhost"])
        if vhost is None or self.remote_factory is None:
            return
        existing = vhost.queues.get(item["name"])
        if existing is not None and existing.remote and getattr(existing, "home", None) == home:
            return
        if existing is not None and existing.remote and hasattr(existing, "rehome"):
            existing.rehome(home)  # a replicated queue's new leader (cluster.quorum)
            return
        remote = self.remote_factory(vhost, item, home)
        if existing is None:
            vhost.adopt_queue(remote)
            return
        # ours lost a race (or the cluster moved it): its bindings and the messages it
        # took meanwhile go to the winner; its consumers are cancelled (basic.cancel)
        messages = [e.message for e in existing.ready if e.message is not None]
        consumers = []
        if existing.kind == "quorum":
            messages = []  # a deposed leader's: the new leader holds what was committed
            # and its consumers stay, fed by the new leader (as RabbitMQ keeps them)
            consumers = list(existing.consumers)
            existing.consumers.clear()
        take_place(vhost, existing, remote)
        for message in messages:
            remote.push(message)
        for consumer in consumers:
            if consumer.session.client.protocol == "cluster":
                # a peer's subscription to the queue led here: it ends (the peer hears
                # a Cancel), never relayed from the new leader through this node's
                # stand-in to a peer that subscribes there itself (cluster.quorum)
                consumer.session.consumer_gone(consumer)
                continue
            consumer.queue = remote
            remote.add_consumer(consumer)

    def _apply_delete(self, section: str, parts: list[str]) -> None:
        catalog = self.catalog
        with self._apply(), contextlib.suppress(BrokerError):
            if section in ("vhosts", "users"):
                (catalog.delete_vhost if section == "vhosts" else catalog.delete_user)(parts[0])
            elif section == "permissions":
                catalog.delete_permission(parts[0], parts[1])
            elif section == "topic_permissions":
                catalog.delete_topic_permission(parts[0], parts[1], parts[2])
            elif section == "policies":
                catalog.delete_policy(parts[0], parts[1])
            elif section == "global_parameters":  # cluster_name among them
                catalog.parameters.delete_global_parameter(parts[0])
            elif section == "parameters":  # vhost limits, operator policies, shovels, …
                catalog.parameters.delete_parameter(parts[0], parts[1], parts[2])
            elif section == "queues":
                vhost = catalog.vhost(parts[0])
                queue = vhost.queues.get(parts[1])
                if queue is not None:  # even when its home node is down
                    vhost.delete_queue(queue)
            elif section == "exchanges":
                catalog.vhost(parts[0]).delete_exchange(parts[1])
            elif section == "bindings":
                vhost = catalog.vhost(parts[0])
                source, kind, dest_name, routing_key, args = parts[1:6]
                dest: Any = (
                    vhost.exchanges.get(dest_name)
                    if kind == "exchange"
                    else vhost.queues.get(dest_name)
                )
                if dest is None or source not in vhost.exchanges:
                    raise NotFound("gone already")
                vhost.unbind(source, dest, routing_key, json.loads(args))


def take_place(vhost: VHost, old: Queue, new: Queue) -> None:
    """``new`` replaces ``old`` under its name, bound as it was (a stand-in and the
    queue it stands for, either way round). ``old``'s consumers are cancelled unless the
    caller moved them first."""
    bindings = [
        (b.source.name, b.routing_key, dict(b.arguments))
        for ex in vhost.exchanges.values()
        for b in ex.bindings_to(old)
    ]
    vhost.delete_queue(old)
    vhost.adopt_queue(new)
    for source, routing_key, arguments in bindings:
        with contextlib.suppress(BrokerError):
            vhost.bind(source, new, routing_key, arguments)


class _Applying:
    """While applying what etcd says, this node's listener writes nothing back."""

    def __init__(self, owner: RemoteChanges) -> None:
        self.owner = owner

    def __enter__(self) -> None:
        self.owner._applying += 1

    def __exit__(self, *exc: object) -> None:
        self.owner._applying -= 1
