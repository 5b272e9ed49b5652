"""A node's etcd lease kept alive, and the fence that keeps a node cut off from etcd
from acting as an elected owner once the others may have taken it for dead."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from roost.cluster.errors import ClusterError

if TYPE_CHECKING:
    from roost.cluster.coordinator import Coordinator

log = logging.getLogger("roost.cluster.etcd")


def fence_margin(ttl: float) -> float:
    """How long before its lease could expire a node stops its etcd-elected roles when
    it cannot renew: a quarter of the TTL, at least half a second (a 2 s lease: fenced
    1.5 s after the last renewal sent; the default 5 s: 3.75 s)."""
    return max(ttl / 4, 0.5)


class LeaseKeeper:
    """Keeps a lease alive (a keepalive every third of its TTL) until stopped. When etcd
    answers that the lease is gone (it expired while this node could not reach etcd),
    ``on_lost`` is called once and the keeper stops.

    The fence: etcd restarts a lease's TTL when a keepalive *arrives*, so the lease lives
    at least TTL after the last successful keepalive was *sent* (``renewed_at``). Past
    ``renewed_at + TTL - fence_margin(TTL)`` without a renewal, this node may already be
    taken for dead by the others, who then take its election keys: ``on_fence(True)``
    tells it to stop what it runs as an elected owner, before anyone else can start it;
    ``on_fence(False)`` when a renewal comes back while the lease still lives."""

    def __init__(
        self, coordinator: Coordinator, lease_id: int, ttl: int, on_lost: Callable[[], None],
        *, renewed_at: float | None = None, on_fence: Callable[[bool], None] | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.lease_id = lease_id
        self.ttl = ttl
        self.on_lost = on_lost
        self.on_fence = on_fence
        self.reachable = True
        self.renewed_at = time.monotonic() if renewed_at is None else renewed_at
        self.fenced = False
        self._task: asyncio.Task[None] | None = None
        self._fence_task: asyncio.Task[None] | None = None

    @property
    def fence_at(self) -> float:
        """The monotonic time past which this node must not act as an elected owner."""
        return self.renewed_at + self.ttl - fence_margin(self.ttl)

    def in_lease(self) -> bool:
        """Read the clock, not a timer: true even right after the event loop was blocked."""
        return time.monotonic() < self.fence_at

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        self._fence_task = loop.create_task(self._watch_fence())

    async def _run(self) -> None:
        period = max(self.ttl / 3, 0.2)
        while True:
            await asyncio.sleep(period)
            sent = time.monotonic()
            try:
                left = await self.coordinator.refresh_lease(self.lease_id)
            except ClusterError as exc:
                if self.reachable:
                    log.warning("cannot renew this node's lease: %s", exc)
                self.reachable = False
                continue
            if left <= 0:
                log.error("this node's etcd lease %x expired", self.lease_id)
                self._stop_fence()
                self.on_lost()
                return
            if not self.reachable:
                log.info("etcd reachable again; lease renewed")
            self.reachable = True
            self.renewed_at = max(self.renewed_at, sent)
            if self.fenced:
                self.fenced = False
                log.info("lease renewed in time: this node takes its elected roles again")
                if self.on_fence is not None:
                    self.on_fence(False)

    async def _watch_fence(self) -> None:
        while True:
            left = self.fence_at - time.monotonic()
            if self.fenced or left > 0:
                await asyncio.sleep(max(left, self.ttl / 10))
                continue
            self.fenced = True
            log.warning(
                "this node's lease not renewed for %.1f s: stopping its elected roles "
                "before the lease (%d s) can expire", time.monotonic() - self.renewed_at,
                self.ttl,
            )
            if self.on_fence is not None:
                self.on_fence(True)

    def _stop_fence(self) -> None:
        if self._fence_task is not None and self._fence_task is not asyncio.current_task():
            self._fence_task.cancel()
        self._fence_task = None

    def cancel(self) -> None:
        """Stop renewing at once (the lease is gone), from inside the keeper too."""
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        self._task = None
        self._stop_fence()

    async def stop(self, *, revoke: bool = True) -> None:
        self._stop_fence()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if revoke:
            await self.coordinator.revoke_lease(self.lease_id)
