"""Read-your-writes across nodes: a definition change's reply goes out once every other
running node said (an ``Applied`` frame on the link, sent after each watch batch it
applied) that it applied the change's etcd revision, so a client that declares on one
node and passive-declares on another right after finds its queue."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from roost.cluster.link import frames as f

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link, LinkManager

log = logging.getLogger("roost.cluster.definitions")

# how long a reply waits for the other running nodes to apply a change before it goes
# out anyway (a node that slow is about to lose its lease and be declared down)
APPLY_WAIT = 2.0


class Applied:
    """The revision each linked peer has applied, and the replies waiting for them."""

    def __init__(self, links: LinkManager | None) -> None:
        self.links = links
        self.peer_revision: dict[str, int] = {}
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []

    def _running(self) -> list[str]:
        """The running peers (membership's, with a cluster port), linked at the moment or
        not: a peer whose link is down for an instant (a reconnect) has not applied the
        change because of that, and a reply sent then reached a client that published
        through that peer next, to a queue it did not know yet (confirmed unroutable)."""
        return [] if self.links is None else list(self.links.peers)

    async def everywhere(self, revision: int) -> None:
        """Return once every running peer applied ``revision`` (or after ``APPLY_WAIT``)."""
        if not revision or all(self.peer_revision.get(p, 0) >= revision for p in self._running()):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((revision, future))
        try:
            await asyncio.wait_for(future, APPLY_WAIT)
        except TimeoutError:
            log.warning(
                "a running node did not apply revision %d within %.0f s", revision, APPLY_WAIT
            )
        finally:
            self._waiting = [w for w in self._waiting if w[1] is not future]

    def applied_by(self, peer: str, revision: int) -> None:
        """``peer`` applied every change up to ``revision``."""
        if revision > self.peer_revision.get(peer, 0):
            self.peer_revision[peer] = revision
        self._wake()

    def peer_gone(self, peer: str) -> None:
        self.peer_revision.pop(peer, None)
        self._wake()

    def wake(self) -> None:
        """The running nodes changed (``ClusterNode.members_changed``): a reply waiting
        only for a node that went down goes now."""
        self._wake()

    def _wake(self) -> None:
        if not self._waiting:
            return
        running = self._running()
        for revision, future in self._waiting:
            if not future.done() and all(self.peer_revision.get(p, 0) >= revision for p in running):
                future.set_result(None)

    def frame(self, link: Link, frame: f.Frame) -> None:
        if isinstance(frame, f.Applied):
            self.applied_by(link.peer, frame.revision)

    @staticmethod
    def tell(link: Link, revision: int) -> None:
        link.send(f.Applied(revision))

    def tell_all(self, revision: int) -> None:
        """This node applied everything up to ``revision``: say so to every peer."""
        links = self.links
        if links is None:
            return
        for peer in list(links.links):
            link = links.link(peer)
            if link is not None:
                link.send(f.Applied(revision))
