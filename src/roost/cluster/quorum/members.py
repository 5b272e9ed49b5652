"""Changing a replicated quorum queue's or stream's members: RabbitMQ's ``add_member`` /
``delete_member`` / ``grow`` / ``shrink``, asked of any node, done by the leader.

A request is written to etcd (``PREFIX/quorum-req/VHOST/QUEUE``); the queue's leader,
which watches the ``quorum`` keys, applies it and deletes the key, and the node that
asked waits for that, or for the leader's error in its place (a new group that did not
catch up in time, ``safechange.py``), which it removes. Applying is the leader's fenced
write of the group record with the new members; every node follows that record (its
management view, and a member taken out drops its copy). A new member catches up from
the leader's snapshot.

Growing back: each group has a **target** size (``x-quorum-initial-group-size``,
default 3; ``add-member`` raises it, ``delete-member`` lowers it). A leader whose group
is smaller than its target adds running nodes, the first that are not members and not
**drained**, whenever a node comes up (and every ``RECONCILE`` seconds). ``shrink NODE``
drains NODE (``PREFIX/quorum-drain/NODE``) and takes it out of every group without
lowering the targets, so its replicas move to other nodes; ``grow NODE`` (or NODE
starting again) ends the drain and adds NODE to the groups.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from roost.cluster.coordinator import Compare, Delete, Put
from roost.core.errors import BrokerError, NotFound, PreconditionFailed

if TYPE_CHECKING:
    from roost.cluster.coordinator import Coordinator
    from roost.cluster.quorum.manager import QuorumManager

REQUEST_WAIT = 15.0  # seconds a request may wait for the leader to apply it
RECONCILE = 1.0  # seconds between a leader's checks of its groups (size, who is in sync)

Key = tuple[str, str]


def target_of(record: dict[str, Any] | None, arguments: dict[str, Any]) -> int:
    if record is not None and record.get("target"):
        return int(record["target"])
    size = arguments.get("x-quorum-initial-group-size")
    return int(size) if size else 3


class MemberControl:
    """What the management API calls (``roost.http.api.quorum``), on any node."""

    def __init__(self, manager: QuorumManager) -> None:
        self.manager = manager
        self.coordinator = manager.node.coordinator

    def _known(self) -> set[str]:
        m = self.manager.node.membership
        return {n.name for n in m.nodes()} if m is not None else {self.manager.name}

    async def _group(self, vhost: str, queue: str) -> dict[str, Any]:
        found = self.manager.broker.catalog.vhosts.get(vhost)
        q = None if found is None else found.queues.get(queue)
        if q is None:
            raise NotFound(f"no queue '{queue}' in vhost '{vhost}'")
        if q.kind not in ("quorum", "stream"):
            raise PreconditionFailed(f"queue '{queue}' in vhost '{vhost}' is not a quorum queue")
        kv = await self.coordinator.get(self.manager._key(self._records(q.kind), (vhost, queue)))
        if kv is None and q.kind == "stream":
            raise PreconditionFailed(f"stream '{queue}' in vhost '{vhost}' is not replicated")
        if kv is None:  # a one-member group writes no record
            home = getattr(q, "home", None) or self.manager.name
            return {"members": [home], "leader": home}
        record: dict[str, Any] = json.loads(kv.value)
        return record

    @staticmethod
    def _records(kind: str) -> str:
        """The etcd folder of a group's record (``-req`` appended: its requests)."""
        return "stream-group" if kind == "stream" else "quorum"

    def _kind(self, key: Key) -> str:
        found = self.manager.broker.catalog.vhosts.get(key[0])
        q = None if found is None else found.queues.get(key[1])
        return "quorum" if q is None else q.kind

    async def add_member(self, vhost: str, queue: str, node: str) -> list[str]:
        if node not in self._known():
            raise NotFound(f"no node '{node}' in this cluster")
        group = await self._group(vhost, queue)
        if node in group["members"]:
            raise PreconditionFailed(f"node '{node}' is already a member of '{queue}'")
        await self._ask((vhost, queue), {"op": "add", "node": node})
        return await self._members((vhost, queue))

    async def delete_member(
        self, vhost: str, queue: str, node: str, *, keep_target: bool = False
    ) -> list[str]:
        group = await self._group(vhost, queue)
        if node not in group["members"]:
            raise PreconditionFailed(f"node '{node}' is not a member of '{queue}'")
        if len(group["members"]) == 1:
            raise PreconditionFailed(f"'{node}' is the last member of '{queue}'")
        op = "move" if keep_target else "delete"
        await self._ask((vhost, queue), {"op": op, "node": node})
        return await self._members((vhost, queue))

    async def _members(self, key: Key) -> list[str]:
        kv = await self.coordinator.get(self.manager._key(self._records(self._kind(key)), key))
        return list(json.loads(kv.value)["members"]) if kv is not None else []

    async def _ask(self, key: Key, request: dict[str, Any]) -> None:
        request["id"] = secrets.token_hex(8)
        kind = "stream-req" if self._kind(key) == "stream" else "quorum-req"
        req_key = self.manager._key(kind, key)
        await self.coordinator.put(req_key, json.dumps(request).encode())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REQUEST_WAIT
        while loop.time() < deadline:
            kv = await self.coordinator.get(req_key)
            if kv is None:
                return
            answer = json.loads(kv.value)
            if answer.get("id") != request["id"]:
                return
            if "error" in answer:  # refused by the leader (``Regroup._refuse``)
                await self._withdraw(req_key, kv.value)
                raise BrokerError(f"timeout: {answer['error']}")
            await asyncio.sleep(0.1)
        await self._withdraw(req_key, json.dumps(request).encode())
        raise BrokerError(f"timeout: the leader of '{key[1]}' did not apply the change in time")

    async def _withdraw(self, req_key: str, value: bytes) -> None:
        """The request (or the leader's answer to it) goes, unless replaced since."""
        await self.coordinator.txn([Compare(req_key, "value", value)], [Delete(req_key)])

    async def _groups(self, vhost_pattern: str, queue_pattern: str) -> list[tuple[Key, list[str]]]:
        """Every quorum queue and replicated stream matching the patterns (regular
        expressions, as RabbitMQ's) with its members. RabbitMQ 3.10's ``grow`` and
        ``shrink`` act on quorum queues only (streams have ``rabbitmq-streams
        add_replica``); here a node's replicas of both move, so a drain empties it."""
        import re

        vre, qre = re.compile(vhost_pattern), re.compile(queue_pattern)
        found = []
        for vhost in self.manager.broker.catalog.vhosts.values():
            if not vre.search(vhost.name):
                continue
            for q in list(vhost.queues.values()):
                if q.kind not in ("quorum", "stream") or not qre.search(q.name):
                    continue
                try:
                    group = await self._group(vhost.name, q.name)
                except PreconditionFailed:  # a stream that is not replicated
                    continue
                found.append(((vhost.name, q.name), list(group["members"])))
        return found

    async def grow(
        self,
        node: str,
        *,
        strategy: str = "all",
        vhost_pattern: str = ".*",
        queue_pattern: str = ".*",
    ) -> list[dict[str, Any]]:
        """Adds ``node`` to every matching group it is not in (``even``: only to groups
        with an even number of members), and ends its drain."""
        if node not in self._known():
            raise NotFound(f"no node '{node}' in this cluster")
        await self.coordinator.delete(self.manager._drain_key(node))
        done = []
        for key, members in await self._groups(vhost_pattern, queue_pattern):
            if node in members or (strategy == "even" and len(members) % 2):
                continue
            done.append(await self._each(key, lambda k=key: self.add_member(k[0], k[1], node)))
        return done

    async def shrink(self, node: str) -> list[dict[str, Any]]:
        """Drains ``node`` and takes it out of every group it is in, keeping the groups'
        target sizes: their leaders add other nodes in its place."""
        if node not in self._known():
            raise NotFound(f"no node '{node}' in this cluster")
        await self.coordinator.put(self.manager._drain_key(node), b"{}")
        done = []
        for key, members in await self._groups(".*", ".*"):
            if node not in members or len(members) == 1:
                continue
            done.append(
                await self._each(
                    key, lambda k=key: self.delete_member(k[0], k[1], node, keep_target=True)
                )
            )
        return done

    async def _each(self, key: Key, change: Any) -> dict[str, Any]:
        try:
            members = await change()
        except BrokerError as exc:
            return {"vhost": key[0], "name": key[1], "result": "error", "error": str(exc)}
        return {"vhost": key[0], "name": key[1], "result": "ok", "members": members}


async def answer_refused(
    coordinator: Coordinator, req_key: str, request: dict[str, Any] | None, why: str
) -> None:
    """The leader's answer to a change it did not make: the request is replaced by the
    error (``MemberControl._ask`` reads it), only if it is still the one applied. A
    change nobody asked for (growing back) has no one to tell."""
    if request is None or "id" not in request:
        return
    answer = json.dumps({"id": request["id"], "error": why}).encode()
    await coordinator.txn(
        [Compare(req_key, "value", json.dumps(request).encode())], [Put(req_key, answer)]
    )


def split_key(prefix: str, key: str) -> tuple[str, Key] | None:
    """``PREFIX/KIND/VHOST/QUEUE`` -> (KIND, (vhost, queue)) for quorum's group keys."""
    rest = key[len(prefix) + 1 :].split("/")
    if len(rest) != 3:
        return None
    return rest[0], (unquote(rest[1]), unquote(rest[2]))
