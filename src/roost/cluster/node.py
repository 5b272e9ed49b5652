"""This node's place in the cluster: its coordinator connection, its membership and its
links to the others. ``server.py`` joins before it opens a client listener and leaves
after the last client is gone."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from roost import __version__
from roost.cluster.coordinator import Coordinator
from roost.cluster.link import frames as f
from roost.cluster.link.transport import Link, LinkManager, Peer
from roost.cluster.membership import Membership, NodeRecord, NodeStatus
from roost.cluster.obituary import Obituary
from roost.cluster.owners import Owners
from roost.cluster.urls import parse_cluster_url
from roost.core.info import MemberInfo

log = logging.getLogger("roost.cluster")

# For tests only: seconds this node's start-up blocks its event loop before it publishes
# its client ports, as a machine at load 13 once starved a starting node: no keepalive
# goes out, so a lease shorter than the pause expires
# (tests/cluster/test_lease_at_startup.py). 0, the default, in any real use.
START_STALL = float(os.environ.get("ROOST_TEST_START_STALL") or 0)


def default_node_name() -> str:
    return f"roost@{platform.node() or 'localhost'}"


@dataclass(frozen=True)
class ClusterSettings:
    url: str  # etcd://HOST:PORT[,HOST:PORT…][/PREFIX]
    node_name: str
    bind: str
    cluster_port: int
    lease_ttl: int
    data_dir: Path | None
    timeout: float = 3.0


class ClusterNode:
    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings
        endpoints, self.prefix = parse_cluster_url(settings.url)
        self.coordinator = Coordinator(endpoints, timeout=settings.timeout)
        self.links = LinkManager(
            settings.node_name,
            on_frame=self._frame,
            on_up=self._link_up,
            on_down=self._link_down,
        )
        self.membership: Membership | None = None
        # the data plane's handlers, set by whoever carries messages between nodes
        self.frame_handlers: list[Callable[[Link, f.Frame], None]] = []
        self.link_up: list[Callable[[Link], None]] = []
        self.link_down: list[Callable[[Link, str], None]] = []
        self.node_down: list[Callable[[str], None]] = []  # a peer's lease ended
        self.members_changed: list[Callable[[], None]] = []  # a node came or went
        self.definitions: Any = None  # roost.cluster.definitions, once serving
        self.quorum: Any = None  # roost.cluster.quorum.manager, once serving
        self.streams: Any = None  # roost.cluster.quorum.stream_groups, once serving
        self._tasks: set[asyncio.Task[None]] = set()
        self.owners = Owners(self)  # which node runs each dynamic shovel
        Obituary(self)  # a peer whose process died is down at once (obituary.py)
        # frames that came before ``serve`` installed the handlers (links come up while
        # joining): handled then, so a forwarded publish is answered, not dropped
        self._early: list[tuple[Link, object, f.Frame]] | None = []

    @property
    def name(self) -> str:
        return self.settings.node_name

    async def join(self, *, amqp_port: int = 0, http_port: int = 0) -> None:
        """Listen for links, register under a lease and start following the others.
        Raises ``ClusterError`` (etcd unreachable, name taken) or ``OSError`` (port)."""
        s = self.settings
        port = await self.links.listen(s.bind, s.cluster_port) if s.cluster_port else 0
        record = NodeRecord(
            name=s.node_name,
            host=advertised_host(s.bind),
            cluster_port=port,
            amqp_port=amqp_port,
            http_port=http_port,
            pid=os.getpid(),
            started_ms=int(time.time() * 1000),
            version=__version__,
        )
        self.membership = Membership(
            self.coordinator, self.prefix, record, ttl=s.lease_ttl, data_dir=s.data_dir
        )
        self.membership.listeners.append(self._membership_changed)
        self.membership.fence_listeners.append(self.owners.fence)  # cut off: shovels stop
        await self.membership.join()
        self._dial_running()

    async def publish_ports(
        self, amqp_port: int, http_port: int, stream: tuple[str, int] | None = None
    ) -> None:
        """The client ports the listeners got (port 0 picks one): into this node's record;
        ``stream``: the stream protocol's advertised host and port."""
        m = self.membership
        if m is None:
            return
        host, port = stream or ("", 0)
        if START_STALL:
            time.sleep(START_STALL)  # blocks the loop on purpose (see START_STALL)
        await m.update_record(
            replace(
                m.record, amqp_port=amqp_port, http_port=http_port, stream_host=host,
                stream_port=port,
            )
        )

    def nodes(self) -> list[NodeStatus]:
        return [] if self.membership is None else self.membership.nodes()

    def stream_addresses(self) -> dict[str, tuple[str, int]]:
        """The running nodes' advertised stream-protocol addresses, by node name."""
        return {
            n.name: (n.record.stream_host, n.record.stream_port)
            for n in self.nodes()
            if n.running and n.record.stream_port
        }

    async def serve(self, broker: Any) -> None:
        """Share definitions through etcd and carry messages to and from the queues'
        home nodes (after ``join``, before any client listener opens)."""
        from roost.cluster.definitions import ClusterDefinitions
        from roost.cluster.remote import DataPlane

        activity = broker.management.activity  # the API shows the whole cluster
        activity.node_name = self.name
        if self.membership is not None:  # every node announces the first node's name
            activity.default_cluster_name = self.membership.first
        activity.members = self.members
        plane = DataPlane(self, broker)
        defs = ClusterDefinitions(self.coordinator, self.prefix, self.name, broker, self.links)
        defs.remote_factory = plane.make_queue
        from roost.cluster.quorum.fence import LeaderFence
        from roost.cluster.quorum.manager import QuorumManager
        from roost.cluster.quorum.stream_asks import StreamAsks
        from roost.cluster.quorum.stream_groups import StreamGroups

        broker.stream_addresses = self.stream_addresses  # the stream protocol's Metadata
        self.quorum = QuorumManager(self, broker, plane, defs)
        LeaderFence(self, self.quorum)  # cut off from etcd: its leaders stop serving
        self.stream_asks = StreamAsks(self, broker)  # streams without a copy here
        self.streams = StreamGroups(self, broker, plane, defs, self.quorum)
        defs.remote_factory = self.streams.make_queue  # quorum's stand-ins through it
        defs.running = self.running_names
        self.node_down.append(lambda peer: self._departed(defs, peer))
        self.frame_handlers.append(defs.applied.frame)
        self.link_up.append(defs.link_up)
        self.link_down.append(lambda link, why: defs.applied.peer_gone(link.peer))
        self.members_changed.append(defs.applied.wake)
        broker.messaging.behind = defs.behind  # unroutable while behind: nacked
        self._handle_early()
        running = [] if self.membership is None else self.membership.running()
        await defs.start(
            alone=all(r.name == self.name for r in running),
            volatile=self.settings.data_dir is None,
        )
        self.definitions = defs
        self.quorum.start()
        self.streams.start()
        for peer in list(self.links.links):
            link = self.links.link(peer)
            if link is not None:
                defs.link_up(link)

    def running_names(self) -> list[str]:
        return [] if self.membership is None else [r.name for r in self.membership.running()]

    def _departed(self, defs: Any, peer: str) -> None:
        """A node went down: the first running node (by name) deletes its transient
        queues from the cluster's definitions, once."""
        running = [] if self.membership is None else self.membership.running()
        if not running or min(r.name for r in running) != self.name:
            return
        task = asyncio.get_running_loop().create_task(defs.drop_departed(peer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def members(self) -> list[MemberInfo]:
        """The members for management (``/api/nodes``, cluster-wide listings)."""
        return [
            MemberInfo(
                name=n.name,
                running=n.running,
                host=n.record.host,
                http_port=n.record.http_port,
                amqp_port=n.record.amqp_port,
                pid=n.record.pid,
                started_ms=n.record.started_ms,
                version=n.record.version,
            )
            for n in self.nodes()
        ]

    def _membership_changed(self, record: NodeRecord, running: bool) -> None:
        self._dial_running()
        if not running and record.name != self.name:
            for listener in self.node_down:
                listener(record.name)
        for changed in self.members_changed:
            changed()

    def runs_here(self, key: str) -> bool:
        """Is this node the one of the running nodes that should run ``key`` (a dynamic
        shovel)? Rendezvous hashing: every node computes the same answer from the same
        members. Only a preference: ``owners.py``'s election decides who runs it."""
        names = self.running_names() or [self.name]
        if self.name not in names:
            return False

        def weight(node: str) -> bytes:
            return hashlib.sha1(f"{key}\0{node}".encode()).digest()

        return max(names, key=weight) == self.name

    def _dial_running(self) -> None:
        if self.membership is None:
            return
        self.links.set_peers(
            [
                Peer(r.name, r.host, r.cluster_port)
                for r in self.membership.running()
                if r.cluster_port
            ]
        )

    def _frame(self, link: Link, frame: f.Frame) -> None:
        early = self._early
        if early is not None:
            early.append((link, link.protocol, frame))
            return
        for handler in self.frame_handlers:
            handler(link, frame)

    def _handle_early(self) -> None:
        """The frames held until the handlers were there, in order; those of a
        connection that went down meanwhile are dropped (the peer counted them lost)."""
        early, self._early = self._early or [], None
        for link, protocol, frame in early:
            if link.protocol is protocol and link.up:
                self._frame(link, frame)

    def _link_up(self, link: Link) -> None:
        log.debug("link with %s up", link.peer)
        for listener in self.link_up:
            listener(link)

    def _link_down(self, link: Link, why: str) -> None:
        log.debug("link with %s down: %s", link.peer, why)
        for listener in self.link_down:
            listener(link, why)

    async def leave(self) -> None:
        await self.owners.stop()  # resigned: another node takes the shovels at once
        if self.quorum is not None:
            await self.quorum.stop()
        if self.streams is not None:
            await self.streams.stop()
        if self.definitions is not None:
            await self.definitions.stop()
        await self.links.close()
        if self.membership is not None:
            await self.membership.leave()
        await self.coordinator.close()


def advertised_host(bind: str) -> str:
    """The address peers dial: the first --bind address, or this host's name when the
    node listens on every interface."""
    first = bind.split(",")[0].strip()
    if first in ("0.0.0.0", "::", ""):
        return platform.node() or "127.0.0.1"
    return first
