"""What a quorum queue's leader and a replicated stream's leader share: who the
members are, what a majority of them holds on disk, and whether a majority still
answers (a leader that hears from none resigns: ``lost_majority``)."""

from __future__ import annotations

from collections.abc import Callable, Collection

from roost.cluster.quorum.safechange import held_by, in_every_majority

# A leader that heard no acknowledgement from a majority of its members (itself counted)
# for this many lease TTLs resigns its election. A leader that dies is replaced once its
# lease expires (one TTL); a leader cut off from its members but not from etcd keeps its
# lease, so it gives up on the same scale: two TTLs, so that one slow round of acks (a
# loaded host, an fsync) does not change leaders.
STEPDOWN_TTLS = 2


class LeaderRole:
    """Subclasses keep ``node`` (this one), ``members``, ``own_durable``, ``acked``
    (member -> the position it holds on disk) and ``heard`` (member -> when its last
    acknowledgement arrived), and implement ``_commit``."""

    node: str
    members: list[str]
    own_durable: int
    acked: dict[str, int]
    heard: dict[str, float]
    stepdown_after = 0.0  # seconds without a majority before resigning; 0: never
    on_lost_majority: Callable[[], None] | None = None
    running: Callable[[], list[str]] = list  # the nodes that hold their etcd lease
    # a new group being written (safechange.py): every majority of it must meet a holder
    # of a record before it commits
    joining: list[str] | None = None
    _last_check = 0.0

    @property
    def leader(self) -> str:
        return self.node

    @property
    def followers(self) -> list[str]:
        return [m for m in self.members if m != self.node]

    @property
    def majority(self) -> int:
        return len(self.members) // 2 + 1

    def _own(self, end: int, ok: bool) -> None:
        if ok:
            self.own_durable = max(self.own_durable, end)
            self._commit()

    def _commit(self) -> None:
        raise NotImplementedError

    def _majority_holds(self) -> int:
        """The position a majority (this leader counted) holds on disk."""
        held = sorted(
            [self.own_durable, *(self.acked.get(m, 0) for m in self.followers)], reverse=True
        )[self.majority - 1]
        if self.joining is None:
            return held
        return min(held, held_by(self, self.joining, in_every_majority(self.joining)))  # type: ignore[arg-type]

    def lost_majority(self, now: float, also_heard: Collection[str] = ()) -> bool:
        """True when fewer than a majority (this leader counted) answered within
        ``stepdown_after`` seconds while a majority of the members other than this one
        are running (they hold their etcd lease: alive, cut off from here, and able to
        elect one of them). Members that are down cannot elect anyone: with too few
        running the leader stays and holds its publishes until one is back.
        ``also_heard``: members counted as answering (a snapshot under way). A gap in
        this leader's own checks (its process paused, its loop stalled) restarts every
        member's clock: silence it did not witness is not held against them."""
        if not self.stepdown_after:
            return False
        if now - self._last_check > self.stepdown_after / 2:
            self.heard = dict.fromkeys(self.followers, now)
        self._last_check = now
        answering = sum(
            1
            for m in self.followers
            if m in also_heard or now - self.heard.setdefault(m, now) < self.stepdown_after
        )
        if 1 + answering >= self.majority:
            return False
        running = set(self.running())
        return sum(1 for m in self.followers if m in running) >= self.majority
