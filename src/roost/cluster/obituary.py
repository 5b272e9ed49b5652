"""A peer whose process died is taken for down at once, not a lease TTL later.

When a peer's link drops, this node knocks on the peer's cluster port. Refused every
time means the peer's host answered and nothing listens there: the process that held the
registration is gone (a node listens on its cluster port from before it registers until
after it has revoked its lease). Its lease is revoked then, its live key goes with it, and
the members of the queues it led elect another leader at once, as RabbitMQ takes a node
for down when its distribution connection closes.

Nothing else counts as proof: a host that does not answer (a machine lost, a cable cut)
or a paused process (its kernel still accepts connections) leaves the lease to run out.
A knock is believed only for a peer whose port this node has reached before (it dialed
the link, or knocked once when the peer dialed it), so a firewall that rejects this node
alone cannot make it bury a live peer. Only the registration seen when the link dropped
is revoked: a restarted peer's record, under its new lease, differs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from roost.cluster.errors import ClusterError
from roost.cluster.membership import NodeRecord

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.cluster.node import ClusterNode

log = logging.getLogger("roost.cluster.membership")

KNOCKS = 3  # each refused, KNOCK_GAP apart: a listener closing a moment late is not dead
KNOCK_GAP = 0.05
KNOCK_TIMEOUT = 1.0  # no answer: proves nothing; silence once connected: paused


async def knock(host: str, port: int) -> bool | None:
    """True when something listens on host:port (a live node says Hello at once; a paused
    one's kernel accepts and stays silent), False when the host refuses or the listener
    goes away under the connection (a dying process's, closing), None when the host does
    not answer."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), KNOCK_TIMEOUT)
    except ConnectionRefusedError:
        return False
    except OSError:  # TimeoutError among them: no answer
        return None
    try:
        said = await asyncio.wait_for(reader.read(1), KNOCK_TIMEOUT)
    except TimeoutError:
        return True  # accepted and silent: a paused process
    except OSError:
        return False  # reset: the listener closed with this connection still queued
    finally:
        writer.close()
    return bool(said)  # b"": closed before a word


def incarnation(record: NodeRecord) -> tuple[str, int, int, int]:
    """What tells one run of a node from the next (its client ports are filled in later)."""
    return record.host, record.cluster_port, record.pid, record.started_ms


class Obituary:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        # the runs of peers whose cluster port answered this node, and those asked
        self.reached: dict[str, tuple[str, int, int, int]] = {}
        self.knocked: dict[str, tuple[str, int, int, int]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        node.link_up.append(lambda link: self._check(link.peer))
        node.link_down.append(self.link_down)
        node.members_changed.append(self.members_changed)  # a link may precede the record

    def _record(self, peer: str) -> NodeRecord | None:
        m = self.node.membership
        return None if m is None else m.live.get(peer)

    def members_changed(self) -> None:
        for peer in list(self.node.links.links):
            self._check(peer)

    def _check(self, peer: str) -> None:
        """Has this node reached the peer's cluster port? If it dialed the link, yes;
        else it knocks once per run of the peer."""
        record, link = self._record(peer), self.node.links.link(peer)
        if record is None or link is None or link.protocol is None or not record.cluster_port:
            return
        run = incarnation(record)
        if self.reached.get(peer) == run or self.knocked.get(peer) == run:
            return
        if link.protocol.dialed is not None:
            self.reached[peer] = run
        else:
            self.knocked[peer] = run
            self._spawn(self._first_knock(record))

    def link_down(self, link: Link, why: str) -> None:
        record = self._record(link.peer)
        if record is not None and self.reached.get(link.peer) == incarnation(record):
            self._spawn(self._bury_if_gone(record))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _first_knock(self, record: NodeRecord) -> None:
        if await knock(record.host, record.cluster_port):
            self.reached[record.name] = incarnation(record)

    async def _bury_if_gone(self, record: NodeRecord) -> None:
        for i in range(KNOCKS):
            if i:
                await asyncio.sleep(KNOCK_GAP)
            answer = await knock(record.host, record.cluster_port)
            if answer is not False:  # it answers, or its host does not: the lease decides
                log.info(
                    "node '%s' %s on its cluster port: its lease decides whether it is down",
                    record.name, "still accepts" if answer else "does not answer",
                )  # fmt: skip
                return
        m = self.node.membership
        if m is None:
            return
        try:
            kv = await self.node.coordinator.get(m.key("live", record.name))
            seen = None if kv is None else incarnation(NodeRecord.decode(kv.value))
            if kv is None or not kv.lease or seen != incarnation(record):
                return  # gone already, or registered again since
            log.info(
                "node '%s' refuses connections on %s:%d: its process is gone; "
                "revoking its lease",
                record.name, record.host, record.cluster_port,
            )  # fmt: skip
            await self.node.coordinator.revoke_lease(kv.lease)
        except ClusterError as exc:  # etcd out of reach: the lease runs out instead
            log.debug("could not revoke the lease of '%s': %s", record.name, exc)
